"""The fused particle kernel of the one-hidden-layer limit (docs/theory.md §2).

One call = one sweep over particle memory = one SGD step of the limit:

1. (if a batch is given) with χ_t, update every particle simultaneously:
       Z^U   -= step_u Σ_i (χ_iᵀ Z^{nV}) φ′(Z^U ξ_i) ξ_iᵀ
       Z^{nV} -= step_v Σ_i χ_i φ(Z^U ξ_i)
   (step_u = α η_1 e_1 and step_v = α η_2 e_V carry the output multiplier α and
   the limit switches of docs/theory.md §5.1).  Other optimizers keep per-particle
   state ``SU`` (k, d, N), ``SV`` (k, d_out, N) and read ``hp`` (see HP):
   k = 1, heavy ball with decay (docs/theory.md §10.2): the increment joins the
       buffer, M ← μ M + δ Z + increment, Z ← Z − M;
   k = 2, Adam (§10.5): with the gradient ĝ (step_u, step_v are then its scale α),
       m ← β₁ m + (1−β₁) ĝ, v ← β₂ v + (1−β₂) ĝ²,
       Z ← (1 − δ) Z − lr m̂ / (√v̂ + ε)   (lr = η e, bias-corrected m̂, v̂);
2. with the updated particles, accumulate the weighted sums
       Σ_α w_α Z^{nV}_α φ(Z^U_α ξ)   for the next batch and the eval inputs,
   and, if asked, the coordinate statistics of the eval inputs.  With a
   ``cache`` the next batch's φ(Z^U ξ) and φ′(Z^U ξ) stay in memory: they are
   exactly what step 1 of the next sweep needs (Z^U does not move between).
   Where φ′ is a function of φ (id, tanh, relu, sigmoid) only φ is kept and
   step 1 recovers φ′ from it (``cache_planes``).

Particles are stored feature-major (U[d, N], V[d_out, N]) and processed in
blocks (``block_size``) small enough to stay in L2 while the block is
visited once per input.  A block's rows are read as 1-d slices
``U[k, a0:a0 + m]``, contiguous vectors: the inner loops run over particles
and vectorize (φ uses the branch-free tanh of fastmath.py).  Float64
particles are updated where they lie; float32 storage is copied into float64
scratch per block and written back (``block_of``).
The pre-activations come from register tiles (tiles.py: 16 particles, up to
six inputs, the running sums in registers), the forward pass in chunks of
FORWARD_CHUNK particles whose rows stay in L1.  With plain SGD and B <=
FUSE_MAX_B the step of Z^U is taken inside the forward pass's first tile, so
the block is read from memory, moved and used for the forward inputs in one
pass (step 1 then moves Z^{nV} only).  Only for wide inputs (d >= BLAS_MIN_D)
do the pre-activations of a block come from one BLAS gemm (inputs x block).
Each block writes its own row of ``out`` (no atomics; the host sums rows in
a fixed order), so results do not depend on the thread count, and the
per-block sums double as batch means for the Monte Carlo standard error.

The columns of a row of ``out`` are described in columns.py.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ...nonlinearities import get_nonlinearity
from .fastmath import fast_tanh
from .state import hyperparameters
from .tiles import (
    MAX_Q,
    PREFETCH_AHEAD,
    preact_tile,
    preacts_into,
    tile_count,
    tile_size,
    update_preact_tile,
)

_FAST = dict(fastmath=True, error_model="numpy", cache=True)

PHI_CODES = {"id": 0, "tanh": 1, "relu": 2, "sigmoid": 3, "gelu": 4, "erf": 5, "softplus": 6}
PIECEWISE_LINEAR = ("id", "relu")      # φ that cost next to nothing to evaluate
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRTPI = 2.0 / math.sqrt(math.pi)


def phi_tag(phi: str) -> tuple:
    """The kernel's handle for φ: a tuple of PHI_CODES[φ] + 1 zeros.

    Its *length* is part of its Numba type, so the sweep is compiled (and
    cached on disk) once per nonlinearity, with only that φ inside: the first
    call pays for one φ, not for all seven.
    """
    return (0,) * (PHI_CODES[phi] + 1)


def phi_dphi(tag, x):
    """(φ(x), φ′(x)) for the φ of ``tag``; chosen while compiling (see the overload)."""
    raise NotImplementedError("only callable from Numba-compiled code")


def piecewise_linear(tag):
    """Whether the φ of ``tag`` is id or relu (a compile-time constant)."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(phi_dphi, jit_options=_FAST)
def _phi_dphi_for(tag, x):
    code = len(tag) - 1
    if code == 0:
        return lambda tag, x: (x, 1.0)
    if code == 1:
        def tanh(tag, x):
            t = fast_tanh(x)
            return t, 1.0 - t * t
        return tanh
    if code == 2:
        return lambda tag, x: (x, 1.0) if x > 0.0 else (0.0, 0.0)
    if code == 3:
        def sigmoid(tag, x):
            s = 0.5 * (1.0 + fast_tanh(0.5 * x))
            return s, s * (1.0 - s)
        return sigmoid
    if code == 4:
        def gelu(tag, x):                              # scalar libm erf/exp
            c = 0.5 * (1.0 + math.erf(x * _SQRT1_2))
            return x * c, c + x * _INV_SQRT2PI * math.exp(-0.5 * x * x)
        return gelu
    if code == 5:
        return lambda tag, x: (math.erf(x), _TWO_OVER_SQRTPI * math.exp(-x * x))

    def softplus(tag, x):
        s = 0.5 * (1.0 + fast_tanh(0.5 * x))
        return max(x, 0.0) + math.log1p(math.exp(-abs(x))), s
    return softplus


@overload(piecewise_linear, inline="always")
def _piecewise_linear_for(tag):
    value = len(tag) - 1 in (PHI_CODES[name] for name in PIECEWISE_LINEAR)
    return lambda tag: value


_PHI_NAMES = {code: name for name, code in PHI_CODES.items()}
_ID_CODE = PHI_CODES["id"]


def cache_planes(phi: str) -> int:
    """Rows per batch input of the φ cache: 1 (φ alone) where φ′ is a function of the
    value φ(x) (``Nonlinearity.dphi_of_value``: id, tanh, relu, sigmoid), else 2 (φ, φ′).

    Keeping φ alone halves the cache's memory and traffic (2B float64 per
    particle and step instead of 4B); the update recovers φ′ from it with the
    formula ``phi_dphi`` uses (tanh: 1 − t² from the same t), bit for bit for id,
    tanh and relu, to an ulp for sigmoid (the compiler may fuse s(1 − s)
    differently in the two places)."""
    return 1 if get_nonlinearity(phi).dphi_of_value is not None else 2


def dphi_from_value(tag):
    """Whether the cache of the φ of ``tag`` holds φ alone (a compile-time constant)."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(dphi_from_value, inline="always")
def _dphi_from_value_for(tag):
    value = cache_planes(_PHI_NAMES[len(tag) - 1]) == 1
    return lambda tag: value


def dphi_from_cache(tag, c):
    """φ′ from a value of the cache's last plane: c itself where that plane holds φ′,
    dphi_of_value(c) where it holds φ."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(dphi_from_cache, inline="always")
def _dphi_from_cache_for(tag, c):
    if cache_planes(_PHI_NAMES[len(tag) - 1]) == 1:
        return lambda tag, c: dphi_of_value(tag, c)
    return lambda tag, c: c


def dphi_of_value(tag, p):
    """φ′ from the value p = φ(x), for the φ whose cache holds φ alone."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(dphi_of_value, jit_options=_FAST)
def _dphi_of_value_for(tag, p):
    code = len(tag) - 1
    if code == PHI_CODES["tanh"]:
        return lambda tag, p: 1.0 - p * p
    if code == PHI_CODES["relu"]:
        return lambda tag, p: 1.0 if p > 0.0 else 0.0
    if code == PHI_CODES["sigmoid"]:
        return lambda tag, p: p * (1.0 - p)
    if code == _ID_CODE:
        return lambda tag, p: 1.0
    # gelu, erf, softplus keep φ′ in the cache and never call this; Numba still types
    # the untaken branch for them, so it needs a body: NaN, loud if it were ever reached
    return lambda tag, p: math.nan


@njit(inline="always", **_FAST)
def _phi_loop(tag, h, P, D, with_d):
    for j in range(h.shape[0]):
        p, dp = phi_dphi(tag, h[j])
        P[j] = p
        if with_d:                 # a constant after inlining: φ′ is dropped when unused
            D[j] = dp


@njit(inline="always", **_FAST)
def phi_arrays(tag, h, P, D):
    """P = φ(h), D = φ′(h) elementwise."""
    _phi_loop(tag, h, P, D, True)


@njit(inline="always", **_FAST)
def phi_values(tag, h, P):
    """P = φ(h) elementwise (P may be h itself)."""
    _phi_loop(tag, h, P, P, False)


@njit(inline="always", **_FAST)
def phi_times(tag, h, P, G):
    """P = φ(h) and G *= φ′(h) elementwise, in one pass (φ′ is not stored)."""
    for j in range(h.shape[0]):
        p, dp = phi_dphi(tag, h[j])
        P[j] = p
        G[j] *= dp


@njit(inline="always", **_FAST)
def phi_dot(tag, h, v):
    """Σ_j v_j φ(h_j) in one pass (used for the piecewise-linear φ: id, relu)."""
    s = 0.0
    for j in range(h.shape[0]):
        p, _ = phi_dphi(tag, h[j])
        s += v[j] * p
    return s


# With contiguous rows, plain vectorized passes beat small BLAS
# gemms up to d = 64 (measured); BLAS takes over only for wide inputs.
BLAS_MIN_D = 128     # from this input dimension on, pre-activations come from BLAS gemm
BLAS_MIN_B = 4       # ... and the Z^U update too, from this batch size on
#: for the piecewise-linear φ (id, relu), from this input dimension on the engine keeps φ
#: of the next batch between sweeps (cache_pays)
CACHE_MIN_D = 8


def cache_pays(phi: str, d: int) -> bool:
    """Whether the engine keeps φ (and φ′ where it does not follow from φ, see
    cache_planes) of the next batch between sweeps.

    The cache saves B·(d multiply-adds + one φ) per particle and step and costs
    2·cache_planes·B float64 of memory traffic.  Measured (docs/performance.md):
    for every φ that costs a real evaluation (tanh, sigmoid, gelu, erf,
    softplus) it pays at every d (1.06-1.53x from d = 1 on); for id and relu,
    whose φ is almost free, only the d multiply-adds count and it pays from
    d = CACHE_MIN_D (0.80-0.99x at d = 1, even at d = 4, 1.06-1.47x at d = 16).
    """
    return d >= CACHE_MIN_D or phi not in PIECEWISE_LINEAR


#: up to this batch size plain SGD moves Z^U in the forward pass's first tile
#: (tiles.update_preact_tile); beyond it the separate update passes are faster
FUSE_MAX_B = 4
#: particles per chunk of the forward pass: a tile's pre-activation rows (at most MAX_Q
#: rows of 2 KB) stay in L1 while φ and the readout sums take them
FORWARD_CHUNK = 256
#: without the φ cache, the fused path runs the update and the forward pass chunk by
#: chunk, the forward tiles prefetching the next chunk, which the update's pass over
#: the batch then finds in cache (docs/performance.md: 1.15-1.2x at d = 16, B = 1)
UPDATE_CHUNK = 512
#: ... from this input dimension on; below it the pass over the batch moves too little
#: data for the chunks' extra passes to pay (0.83-0.93x at d = 1 and 4, B = 1)
CHUNKED_UPDATE_MIN_D = 8
L2_BUDGET = 768 * 1024   # bytes of per-block scratch meant to stay in a core's L2
MIN_BLOCK, MAX_BLOCK = 256, 8192


def block_size(d: int, d_out: int, B: int, E: int, N: int, stats: bool = False) -> int:
    """Particles per block: the largest power of two whose scratch fits ``L2_BUDGET``.

    Per particle a block holds in L2 (in place, or as a float64 copy) Z^U and
    Z^{nV}, and in float64 scratch the batch's
    pre-activations, φ′-weighted errors and φ values (3B), two scratch rows
    (the forward pass's chunk of pre-activation rows is a fixed 12 KB),
    on the gemm path the pre-activation rows of the inputs and the Z^U
    increment, and with statistics the (h, h_0, x) rows of the eval inputs.
    At d = 16, B = 16 a fixed 2048-particle block spilled out of L2 and ran
    4x slower.  The block is kept between 256 and 8192 particles and small
    enough that N holds at least 32 blocks, so the batch-means error bar has
    degrees of freedom.
    """
    per = 8 * (d + d_out + 3 * B + 2 + (max(B, E) + d if d >= BLAS_MIN_D else 0)
               + (3 * E if stats else 0))
    b = MIN_BLOCK
    while b < MAX_BLOCK and 2 * b * per <= L2_BUDGET and 2 * b * 32 <= max(N, 1):
        b *= 2
    return b


# A block of a (rows, N) array is the pair (A, a): its row k is the slice A[k, a:a + m],
# a 1-d contiguous view that Numba types as C-ordered, so loops over it vectorize.
# Float64 particles are worked on in place this way (a = the block's first column);
# scratch and copies have a = 0.


@njit(fastmath=True, error_model="numpy", cache=True)
def _preacts(Ub, ua, m, X, use_blas):
    """H[i, j] = Ub[:, ua + j] · X[i]: one gemm (Ub is then a copy, ua = 0), or the
    register tiles of tiles.py."""
    n = X.shape[0]
    if use_blas and n > 0:
        return np.dot(X, Ub)
    H = np.empty((n, m))
    preacts_into(Ub, ua, m, X, H)
    return H


@njit(fastmath=True, error_model="numpy", cache=True)
def _decay_into(M, Z, a, m, mu, shrink):
    """M ← μ M + δ Z on a block (the heavy-ball buffer before the gradient increment joins it)."""
    for k in range(M.shape[0]):
        Mk, Zk = M[k, a:a + m], Z[k, a:a + m]
        for j in range(m):
            Mk[j] = mu * Mk[j] + shrink * Zk[j]


@njit(fastmath=True, error_model="numpy", cache=True)
def _adam_into(Z, M, V, a, Gr, b1, b2, eps, bias1, bias2, lr, shrink):
    """Adam on every entry of a block: moments (M, V) of the gradient Gr (scratch), then
    Z ← (1 − δ) Z − lr m̂/(√v̂ + ε); an entry that has seen only zero gradients with
    ε = 0 does not move (0/0 read as 0)."""
    m = Gr.shape[1]
    for k in range(Z.shape[0]):
        Zk, Mk, Vk, Gk = Z[k, a:a + m], M[k, a:a + m], V[k, a:a + m], Gr[k]
        for j in range(m):
            g = Gk[j]
            mk = b1 * Mk[j] + (1.0 - b1) * g
            vk = b2 * Vk[j] + (1.0 - b2) * g * g
            Mk[j] = mk
            Vk[j] = vk
            den = math.sqrt(vk / bias2) + eps
            psi = (mk / bias1) / den if den > 0.0 else 0.0
            Zk[j] = (1.0 - shrink) * Zk[j] - lr * psi


@njit(fastmath=True, error_model="numpy", cache=True)
def _update_block(Ub, Vb, S0u, S0v, S1u, S1v, pa, m, tag, Xb, chi, step_u, step_v,
                  use_blas, mode, hp, cache, ca, cached, defer_u):
    """Simultaneous update of one block with the batch (Xb, χ); see the module docstring.

    The particles and optimizer state are the blocks (·, pa) of width m.  ``mode``
    0: the increments go straight into Ub, Vb; 1: into the heavy-ball buffers S0u,
    S0v; 2: into zeroed gradient scratch, then Adam with moments (S0, S1).  With
    ``cached`` the batch's φ(Z^U ξ_i), φ′(Z^U ξ_i) are read from the columns ca.. of
    ``cache`` (left there by the previous sweep's forward pass) instead of recomputed.
    With ``defer_u`` Z^U is not moved here: the forward pass takes that step
    (_forward_sums) with the φ′-weighted errors G returned.
    """
    d, do, B = Ub.shape[0], Vb.shape[0], Xb.shape[0]
    H = _preacts(Ub, pa, m, Xb, use_blas) if not cached else np.empty((0, m))
    P = np.empty((0 if cached else B, m))
    P_rows, pr = (cache[0], ca) if cached else (P, 0)
    G = np.empty((B, m))
    if cached and dphi_from_value(tag) and do == 1:
        _chi_v_times_dphi(tag, chi, Vb, pa, G, cache[0], ca)
    else:
        # innermost loops run over particles j, so they vectorize
        for i in range(B):
            Gi = G[i]                       # G_i = χ_iᵀ Z^{nV}, times φ′_i below
            Gi[:] = 0.0
            for o in range(do):
                c = chi[i, o]
                Vo = Vb[o, pa:pa + m]
                for j in range(m):
                    Gi[j] += c * Vo[j]
            if not cached:
                phi_times(tag, H[i], P[i], Gi)
        if cached:                  # the last plane: φ′, or φ where φ′ follows from it
            _times_dphi(tag, G, cache[cache.shape[0] - 1], ca)
    if mode == 1:                      # both buffers from the old particles, then move
        _decay_into(S0u, Ub, pa, m, hp[0], hp[1])
        _decay_into(S0v, Vb, pa, m, hp[0], hp[2])
        TU, TV, ta = S0u, S0v, pa      # where the increments go (subtracted with -step)
    elif mode == 2:
        TU, TV, ta = np.zeros((d, m)), np.zeros((do, m)), 0
    else:
        TU, TV, ta = Ub, Vb, pa
    sign = -1.0 if mode else 1.0
    if step_u != 0.0 and not defer_u:
        if use_blas and B >= BLAS_MIN_B:
            _sub_scaled(TU, ta, sign * step_u, np.dot(np.ascontiguousarray(Xb.T), G), 0, m)
        else:
            _sub_outer(TU, ta, m, sign * step_u, Xb, G, 0)
    if step_v != 0.0:
        _sub_outer(TV, ta, m, sign * step_v, chi, P_rows, pr)
    if mode == 1:
        _sub_scaled(Ub, pa, 1.0, S0u, pa, m)
        _sub_scaled(Vb, pa, 1.0, S0v, pa, m)
    elif mode == 2:
        _adam_into(Ub, S0u, S1u, pa, TU, hp[3], hp[4], hp[5], hp[6], hp[7], hp[8], hp[1])
        _adam_into(Vb, S0v, S1v, pa, TV, hp[3], hp[4], hp[5], hp[6], hp[7], hp[9], hp[2])
    return G


@njit(fastmath=True, error_model="numpy", cache=True)
def _chi_v_times_dphi(tag, chi, Vb, pa, G, P, ca):
    """G[i] = (χ_i Z^{nV}) φ′ for d_out = 1, with φ′ recovered from the cached values
    P[i, ca:ca + m] = φ: one pass per four rows, each cache row read once and each
    row of G written once (the general path builds G, then multiplies it by φ′)."""
    B, m = G.shape
    V0 = Vb[0, pa:pa + m]
    i = 0
    while i + 4 <= B:
        G0, G1, G2, G3 = G[i], G[i + 1], G[i + 2], G[i + 3]
        P0, P1 = P[i, ca:ca + m], P[i + 1, ca:ca + m]
        P2, P3 = P[i + 2, ca:ca + m], P[i + 3, ca:ca + m]
        c0, c1, c2, c3 = chi[i, 0], chi[i + 1, 0], chi[i + 2, 0], chi[i + 3, 0]
        for j in range(m):
            v = V0[j]
            G0[j] = (c0 * v) * dphi_of_value(tag, P0[j])
            G1[j] = (c1 * v) * dphi_of_value(tag, P1[j])
            G2[j] = (c2 * v) * dphi_of_value(tag, P2[j])
            G3[j] = (c3 * v) * dphi_of_value(tag, P3[j])
        i += 4
    for i2 in range(i, B):
        Gi, Pi, c = G[i2], P[i2, ca:ca + m], chi[i2, 0]
        for j in range(m):
            Gi[j] = (c * V0[j]) * dphi_of_value(tag, Pi[j])


@njit(fastmath=True, error_model="numpy", cache=True)
def _times_dphi(tag, G, C, ca):
    """G[i] *= φ′_i for every row i, from the cache plane C that holds it: φ′ itself,
    or φ where φ′ follows from it (dphi_from_cache); nothing to do for id (φ′ = 1).

    Four rows per pass: the rows of C are read here from memory, and four rows in
    one loop keep four streams in flight, which the hardware prefetchers serve about
    1.4x faster than one row after another (each row of a block spans only a few
    pages and the prefetchers stop at page boundaries)."""
    if len(tag) - 1 == _ID_CODE:
        return
    B, m = G.shape
    i = 0
    while i + 4 <= B:
        G0, G1, G2, G3 = G[i], G[i + 1], G[i + 2], G[i + 3]
        C0, C1 = C[i, ca:ca + m], C[i + 1, ca:ca + m]
        C2, C3 = C[i + 2, ca:ca + m], C[i + 3, ca:ca + m]
        for j in range(m):
            G0[j] *= dphi_from_cache(tag, C0[j])
            G1[j] *= dphi_from_cache(tag, C1[j])
            G2[j] *= dphi_from_cache(tag, C2[j])
            G3[j] *= dphi_from_cache(tag, C3[j])
        i += 4
    for i2 in range(i, B):
        Gi, Ci = G[i2], C[i2, ca:ca + m]
        for j in range(m):
            Gi[j] *= dphi_from_cache(tag, Ci[j])


@njit(fastmath=True, error_model="numpy", cache=True)
def _sub_outer(A, a, m, lr, C, M, ma):
    """A -= lr Cᵀ M on the blocks (A, a), (M, ma) of width m, C (B, rows); innermost loop
    over particles.

    Four rows of A and four batch rows per pass: each load of a row of M serves
    four rows of A, and one load and store of a row of A serves four
    multiply-adds.  A row of A is applied the batch rows in the same order and
    grouping as _sub_row_outer, so the result does not depend on which rows
    went four at a time.  Four rows of A together also keep four memory streams
    in flight where A is first read here (see _times_dphi).
    """
    B, R = C.shape[0], A.shape[0]
    k = 0
    while k + 4 <= R:
        A0, A1 = A[k, a:a + m], A[k + 1, a:a + m]
        A2, A3 = A[k + 2, a:a + m], A[k + 3, a:a + m]
        i = 0
        while i + 4 <= B:
            M0, M1 = M[i, ma:ma + m], M[i + 1, ma:ma + m]
            M2, M3 = M[i + 2, ma:ma + m], M[i + 3, ma:ma + m]
            c00, c01, c02, c03 = lr * C[i, k], lr * C[i + 1, k], lr * C[i + 2, k], lr * C[i + 3, k]
            c10, c11 = lr * C[i, k + 1], lr * C[i + 1, k + 1]
            c12, c13 = lr * C[i + 2, k + 1], lr * C[i + 3, k + 1]
            c20, c21 = lr * C[i, k + 2], lr * C[i + 1, k + 2]
            c22, c23 = lr * C[i + 2, k + 2], lr * C[i + 3, k + 2]
            c30, c31 = lr * C[i, k + 3], lr * C[i + 1, k + 3]
            c32, c33 = lr * C[i + 2, k + 3], lr * C[i + 3, k + 3]
            for j in range(m):
                m0, m1, m2, m3 = M0[j], M1[j], M2[j], M3[j]
                A0[j] -= (c00 * m0 + c01 * m1) + (c02 * m2 + c03 * m3)
                A1[j] -= (c10 * m0 + c11 * m1) + (c12 * m2 + c13 * m3)
                A2[j] -= (c20 * m0 + c21 * m1) + (c22 * m2 + c23 * m3)
                A3[j] -= (c30 * m0 + c31 * m1) + (c32 * m2 + c33 * m3)
            i += 4
        for i2 in range(i, B):
            Mi = M[i2, ma:ma + m]
            c0, c1, c2, c3 = lr * C[i2, k], lr * C[i2, k + 1], lr * C[i2, k + 2], lr * C[i2, k + 3]
            for j in range(m):
                mi = Mi[j]
                A0[j] -= c0 * mi
                A1[j] -= c1 * mi
                A2[j] -= c2 * mi
                A3[j] -= c3 * mi
        k += 4
    for k2 in range(k, R):
        _sub_row_outer(A[k2, a:a + m], lr, C, k2, M, ma)


@njit(fastmath=True, error_model="numpy", cache=True)
def _sub_row_outer(Ak, lr, C, k, M, ma):
    """Ak -= lr Σ_i C[i, k] M[i] for one row of A, four batch rows per pass."""
    B, m = C.shape[0], Ak.shape[0]
    i = 0
    while i + 4 <= B:
        c0, c1, c2, c3 = lr * C[i, k], lr * C[i + 1, k], lr * C[i + 2, k], lr * C[i + 3, k]
        M0, M1 = M[i, ma:ma + m], M[i + 1, ma:ma + m]
        M2, M3 = M[i + 2, ma:ma + m], M[i + 3, ma:ma + m]
        for j in range(m):
            Ak[j] -= (c0 * M0[j] + c1 * M1[j]) + (c2 * M2[j] + c3 * M3[j])
        i += 4
    for i2 in range(i, B):
        c = lr * C[i2, k]
        Mi = M[i2, ma:ma + m]
        for j in range(m):
            Ak[j] -= c * Mi[j]


@njit(fastmath=True, error_model="numpy", cache=True)
def _sub_scaled(A, a, lr, dA, da, m):
    for k in range(A.shape[0]):
        Ak, dAk = A[k, a:a + m], dA[k, da:da + m]
        for j in range(m):
            Ak[j] -= lr * dAk[j]


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _row_sums(h, Vb, va, wb, uniform, tag, ph, acc, c0):
    """acc[c0 + o] += Σ_j w_j Vb[o, va + j] φ(h_j); ``ph`` is scratch (it may be h)."""
    do = Vb.shape[0]
    m = h.shape[0]
    if uniform and piecewise_linear(tag):
        for o in range(do):
            acc[c0 + o] += wb[0] * phi_dot(tag, h, Vb[o, va:va + m])
        return
    phi_values(tag, h, ph)
    if not uniform:
        for j in range(m):
            ph[j] *= wb[j]
    scale = wb[0] if uniform else 1.0
    for o in range(do):
        s = 0.0
        Vo = Vb[o, va:va + m]
        for j in range(m):
            s += Vo[j] * ph[j]
        acc[c0 + o] += scale * s


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _sums_of_rows(H, Vb, va, wb, uniform, tag, ph, acc, col):
    """_row_sums for every row of the pre-activations H (H is left as it is)."""
    for i in range(H.shape[0]):
        _row_sums(H[i], Vb, va, wb, uniform, tag, ph, acc, col + i * Vb.shape[0])


@njit(fastmath=True, error_model="numpy", cache=True)
def _forward_sums(Ub, Vb, a, m, X, wb, uniform, tag, use_blas, cache, a0, nkeep, acc, col,
                  Xb, G, step_u, ahead):
    """acc[col + i*d_out + o] += Σ_j w_j Vb[o, a+j] φ(Ub[:, a+j] · X[i])  for each input i.

    The block goes in chunks of FORWARD_CHUNK particles; in each, the inputs
    go in register tiles of up to MAX_Q (tiles.py) whose pre-activation rows
    (at most MAX_Q × FORWARD_CHUNK float64) stay in L1 while φ is applied to
    them in place and the readout sums are taken (_rows_into_sums).  From
    BLAS_MIN_D on the pre-activations of the whole block come from one gemm.
    For id and relu (piecewise linear) with equal weights, φ is fused
    with the dot product in one pass; LLVM does not vectorize that reduction
    around the longer tanh body, so the other φ first fill the row (a
    vectorized loop) and then take the dot product (measured: tanh 1.4 ns
    two-pass vs 3.4 fused).

    The first ``nkeep`` inputs (the next batch, when the sweep keeps a cache)
    also leave φ(Ub·X[i]) (and φ′, unless it follows from φ: see cache_planes)
    in the cache's columns a0.. of row i: the next sweep's update reads them
    instead of recomputing.

    With a batch ``Xb`` (plain SGD, float64 in place, B <= FUSE_MAX_B) the step
    of Z^U that _update_block left undone is taken here, Z^U −= step_u Xbᵀ G,
    by the first tile of each chunk (tiles.update_preact_tile), which reads
    each row of the chunk once, moves it, writes it back and uses it for its
    inputs: the update's memory traffic overlaps the forward arithmetic; it
    prefetches ``ahead`` particles past itself.
    """
    if use_blas:
        H = _preacts(Ub, a, m, X, True)
        _rows_into_sums(H, X.shape[0], m, 0, Vb, a, wb, uniform, tag, cache, a0, nkeep, acc,
                        col)
        return
    n = X.shape[0]
    tiles = tile_count(n)
    H = np.empty((MAX_Q, min(m, FORWARD_CHUNK)))
    for c0 in range(0, m, FORWARD_CHUNK):
        mc = min(m, c0 + FORWARD_CHUNK) - c0
        wc = wb if uniform else wb[c0:c0 + mc]
        i0 = 0
        for t in range(tiles):
            q = tile_size(n, i0, t, tiles)
            if t == 0 and Xb.shape[0] > 0:
                update_preact_tile(Ub, a + c0, mc, Xb, G[:, c0:], step_u, X, i0, q, H, ahead)
            else:
                preact_tile(Ub, a + c0, mc, X, i0, q, H)
            _rows_into_sums(H, q, mc, i0, Vb, a + c0, wc, uniform, tag, cache, a0 + c0, nkeep,
                            acc, col)
            i0 += q


@njit(fastmath=True, error_model="numpy", cache=True)
def _rows_into_sums(H, q, m, i0, Vb, a, wb, uniform, tag, cache, ca, nkeep, acc, col):
    """acc[col + i*d_out + o] += Σ_j w_j Vb[o, a+j] φ(H[r, j]), j < m, for the inputs
    i = i0 + r held in the rows r < q of H (overwritten); inputs below ``nkeep`` leave φ
    (and φ′) in the cache's columns ca.. (see _forward_sums)."""
    do = Vb.shape[0]
    for r in range(q):
        i = i0 + r
        h = H[r, :m]
        if i >= nkeep:
            _row_sums(h, Vb, a, wb, uniform, tag, h, acc, col + i * do)
            continue
        Pi = cache[0, i, ca:ca + m]
        if dphi_from_value(tag):      # φ′ follows from φ: the next update recovers it
            phi_values(tag, h, Pi)
        else:
            phi_arrays(tag, h, Pi, cache[1, i, ca:ca + m])
        for o in range(do):
            s = 0.0
            Vo = Vb[o, a:a + m]
            if uniform:
                for j in range(m):
                    s += Vo[j] * Pi[j]
                s *= wb[0]
            else:
                for j in range(m):
                    s += wb[j] * Vo[j] * Pi[j]
            acc[col + i * do + o] += s


@njit(fastmath=True, error_model="numpy", cache=True)
def _stats_block(H, H0, wb, uniform, tag, D, acc, col):
    """Weighted sums of h², (h-h_0)², x², (x-x_0)² per eval input and of x_e x_f."""
    E, m = H.shape
    XE = np.empty((E, m))
    X0 = np.empty(m)
    for e in range(E):
        xe, he, h0 = XE[e], H[e], H0[e]
        phi_arrays(tag, he, xe, D)
        phi_arrays(tag, h0, X0, D)
        s_h = s_dh = s_x = s_dx = 0.0
        for j in range(m):
            wj = wb[0] if uniform else wb[j]
            dh, dx = he[j] - h0[j], xe[j] - X0[j]
            s_h += wj * he[j] * he[j]
            s_dh += wj * dh * dh
            s_x += wj * xe[j] * xe[j]
            s_dx += wj * dx * dx
        acc[col + e] += s_h
        acc[col + E + e] += s_dh
        acc[col + 2 * E + e] += s_x
        acc[col + 3 * E + e] += s_dx
    base = col + 4 * E
    for e in range(E):
        for f in range(e, E):
            s = 0.0
            xe, xf = XE[e], XE[f]
            for j in range(m):
                s += (wb[0] if uniform else wb[j]) * xe[j] * xf[j]
            acc[base + e * E + f] += s
            if f != e:
                acc[base + f * E + e] += s


@njit(fastmath=True, error_model="numpy", cache=True)
def _load_block(A, a0, m):
    """float64 C-ordered copy of the columns a0 .. a0+m of A (rows copied as 1-d C slices)."""
    Ab = np.empty((A.shape[0], m))
    for k in range(A.shape[0]):
        Ab[k, :] = A[k, a0:a0 + m]
    return Ab


@njit(fastmath=True, error_model="numpy", cache=True)
def _store_block(Ab, A, a0):
    m = Ab.shape[1]
    for k in range(A.shape[0]):
        A[k, a0:a0 + m] = Ab[k, :]


def block_of(A, a0, m, copy):
    """(rows, offset, copied): how the kernel reads the columns a0 .. a0+m of A."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(block_of, jit_options=_FAST)
def _block_of_for(A, a0, m, copy):
    """float64 storage is read and written in place, (A, a0), unless ``copy`` (the gemm
    path, whose np.dot needs a contiguous 2-d block); other storage dtypes are copied
    into float64 scratch, (copy, 0), and written back after the update."""
    if A.dtype == types.float64:
        def in_place(A, a0, m, copy):
            if copy:
                return _load_block(A, a0, m), 0, True
            return A, a0, False
        return in_place
    return lambda A, a0, m, copy: (_load_block(A, a0, m), 0, True)


def sweep(U, V, w, U0, tag, Xb, chi, step_u, step_v, Xn, Xe, stats, block, out, SU, SV, hp,
          cache, cached):
    """One fused step; see the module docstring.  ``out`` must be zeroed, shape (nblocks, K).

    U, V, U0, SU, SV share one storage dtype.  SU (k, d, N), SV (k, d_out, N): the
    optimizer's per-particle state (k = 0 plain SGD, 1 heavy ball, 2 Adam), updated
    in place; ``hp``: hyperparameters (HP).

    ``cache`` (planes, B', N) float64, B' = 0 for none, planes = cache_planes(φ):
    the forward pass of the next batch leaves φ(Z^U ξ) of its rows in plane 0 (and
    φ′(Z^U ξ) in plane 1 where φ′ does not follow from φ), and with ``cached`` the
    update reads those of its batch (left by the previous sweep, computed with the
    Z^U it now updates) instead of recomputing them: B φ evaluations and B·d
    multiply-adds per particle fewer, 2·planes·B floats of memory traffic more.

    Rows are read as 1-d slices ``U[k, a0:a0 + m]``, which Numba types as
    contiguous, so every particle loop vectorizes; the 2-d slice
    ``U[:, a0:a0 + m]`` would not (its rows get run-time strides, measured 2.5x
    slower).  Float64 particles are updated where they lie: the first pass over
    a block pulls it from memory while it computes, and modified lines go back
    as the cache evicts them.  Float32 storage (and the gemm path) copies each
    block into float64 scratch and back, one pass each way (see block_of).
    """
    dtypes = [a.dtype for a in (U, V, U0, SU, SV)]
    if len(set(dtypes)) != 1:
        # One dtype means one copy-or-in-place choice, so one block offset for all
        # (block_of).  Checked here, before Numba is asked for a kernel: a mixed call
        # would otherwise compile a whole specialization only to refuse it.
        raise TypeError("sweep: U, V, U0, SU and SV must share one storage dtype, got "
                        + ", ".join(map(str, dtypes)))
    if not (U.flags.c_contiguous and U0.flags.c_contiguous):
        # the register tiles read rows of particles as contiguous vectors (tiles.py)
        raise TypeError("sweep: U and U0 must be C-contiguous (d, N) arrays, one row per "
                        "coordinate of the particles")
    sweep_kernel(U, V, w, U0, tag, Xb, chi, step_u, step_v, Xn, Xe, stats, block, out, SU,
                 SV, hp, cache, cached)


@njit(parallel=True, fastmath=True, error_model="numpy", cache=True)
def sweep_kernel(U, V, w, U0, tag, Xb, chi, step_u, step_v, Xn, Xe, stats, block, out, SU,
                 SV, hp, cache, cached):
    """The compiled sweep behind :func:`sweep` (which checks the storage dtypes first)."""
    d, N = U.shape
    do = V.shape[0]
    Bn, E = Xn.shape[0], Xe.shape[0]
    nb = (N + block - 1) // block
    uniform = w.shape[0] == 1
    use_blas = d >= BLAS_MIN_D
    mode = SU.shape[0]
    keep = cache.shape[1] >= Bn > 0
    with_stats = stats and E > 0
    # the next batch and, unless their statistics are asked for, the eval inputs share
    # one set of tiles: their columns of ``out`` follow one another
    Xf = Xn if with_stats else np.concatenate((Xn, Xe))
    nkeep = Bn if keep else 0
    # plain SGD: the Z^U step rides on the forward pass's tiles (one pass over the block
    # for both) where the block is worked on in place; it needs a forward input
    fuse = (mode == 0 and not use_blas and step_u != 0.0 and 0 < Xb.shape[0] <= FUSE_MAX_B
            and Xf.shape[0] > 0)
    moves = Xb.shape[0] > 0
    for bi in prange(nb):
        a0 = bi * block
        m = min(N, a0 + block) - a0
        Ub, pa, copied = block_of(U, a0, m, use_blas)
        Vb = block_of(V, a0, m, use_blas)[0]      # the same dtype: the same offset pa
        wb = w[a0:a0 + m] if not uniform else w[:1]
        acc = out[bi]
        Xu = Xb if fuse and not copied else Xb[:0]
        no_g = np.empty((0, 0))         # G when there is no batch (the forward ignores it)
        S0u = block_of(SU[0], a0, m, use_blas)[0] if moves and mode > 0 else Ub
        S0v = block_of(SV[0], a0, m, use_blas)[0] if moves and mode > 0 else Vb
        S1u = block_of(SU[1], a0, m, use_blas)[0] if moves and mode > 1 else Ub
        S1v = block_of(SV[1], a0, m, use_blas)[0] if moves and mode > 1 else Vb
        # without the cache the fused update goes chunk by chunk: the forward tiles of one
        # chunk prefetch the next, which the update's pass over the batch reads first
        step = (UPDATE_CHUNK if Xu.shape[0] > 0 and not cached and d >= CHUNKED_UPDATE_MIN_D
                else m)
        ahead = UPDATE_CHUNK if step < m else PREFETCH_AHEAD
        for c0 in range(0, m, step):
            mc = min(m, c0 + step) - c0
            wc = wb if uniform else wb[c0:c0 + mc]
            G = no_g
            if moves:
                G = _update_block(Ub, Vb, S0u, S0v, S1u, S1v, pa + c0, mc, tag, Xb, chi, step_u,
                                  step_v, use_blas, mode, hp, cache, a0 + c0, cached,
                                  Xu.shape[0] > 0)
            _forward_sums(Ub, Vb, pa + c0, mc, Xf, wc, uniform, tag, use_blas, cache, a0 + c0,
                          nkeep, acc, 0, Xu, G, step_u, ahead)
        if copied and moves:
            _store_block(Ub, U, a0)
            _store_block(Vb, V, a0)
            if mode > 0:
                _store_block(S0u, SU[0], a0)
                _store_block(S0v, SV[0], a0)
            if mode > 1:
                _store_block(S1u, SU[1], a0)
                _store_block(S1v, SV[1], a0)
        if with_stats:                  # the eval pre-activations serve both sums
            ph, D = np.empty(m), np.empty(m)      # φ(h) and φ′ scratch rows
            He = _preacts(Ub, pa, m, Xe, use_blas)
            _sums_of_rows(He, Vb, pa, wb, uniform, tag, ph, acc, Bn * do)
            U0b, u0a, _ = block_of(U0, a0, m, use_blas)
            H0 = _preacts(U0b, u0a, m, Xe, use_blas)
            _stats_block(He, H0, wb, uniform, tag, D, acc, (Bn + E) * do)


def warm_up(tag, dtype) -> None:
    """Compile (or load from the disk cache) the sweep for this φ and storage dtype, on
    arrays of one particle: the types, not the sizes, select the compiled code."""
    one = np.zeros((1, 1), dtype)
    f64 = np.zeros((1, 1))
    sweep(one, one.copy(), np.ones(1), one.copy(), tag, f64, f64, 0.0, 0.0, f64, f64, False,
          1, np.zeros((1, 2)), np.zeros((0, 1, 1), dtype), np.zeros((0, 1, 1), dtype),
          hyperparameters(), np.zeros((2, 0, 1)), False)
