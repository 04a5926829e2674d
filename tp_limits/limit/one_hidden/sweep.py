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

Particles are stored feature-major (U[d, N], V[d_out, N]) and processed in
blocks (``block_size``) small enough to stay in L2 while the block is
visited once per input.  Each block is copied into C-ordered float64
scratch first, so every row is a contiguous vector; the inner loops run
over particles and vectorize (φ uses the branch-free tanh of fastmath.py).
Only for wide inputs (d >= BLAS_MIN_D) do the pre-activations of a block
come from one BLAS gemm (inputs x block).  Each block writes its own row of ``out``
(no atomics; the host sums rows in a fixed order), so results do not depend
on the thread count, and the per-block sums double as batch means for the
Monte Carlo standard error.

The columns of a row of ``out`` are described in columns.py.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from numba.extending import overload

from .fastmath import fast_tanh
from .state import hyperparameters

_FAST = dict(fastmath=True, error_model="numpy", cache=True)

PHI_CODES = {"id": 0, "tanh": 1, "relu": 2, "sigmoid": 3, "gelu": 4, "erf": 5, "softplus": 6}
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
    value = len(tag) - 1 in (PHI_CODES["id"], PHI_CODES["relu"])
    return lambda tag: value


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
def phi_dot(tag, h, v):
    """Σ_j v_j φ(h_j) in one pass (used for the piecewise-linear φ: id, relu)."""
    s = 0.0
    for j in range(h.shape[0]):
        p, _ = phi_dphi(tag, h[j])
        s += v[j] * p
    return s


# With the block in C-ordered scratch, plain vectorized passes beat small BLAS
# gemms up to d = 64 (measured); BLAS takes over only for wide inputs.
BLAS_MIN_D = 128     # from this input dimension on, pre-activations come from BLAS gemm
BLAS_MIN_B = 4       # ... and the Z^U update too, from this batch size on
#: from this input dimension on the engine keeps φ, φ′ of the next batch between sweeps:
#: it saves B (d multiply-adds + one φ) per particle and costs 4B float64 of traffic;
#: measured (docs/performance.md) a loss at d = 1, even at d = 4, +6-22 % at d = 16
CACHE_MIN_D = 8
#: from this input dimension on, pre-activations are built two inputs per pass over Z^U
PAIR_MIN_D = 4
L2_BUDGET = 768 * 1024   # bytes of per-block scratch meant to stay in a core's L2
MIN_BLOCK, MAX_BLOCK = 256, 8192


def block_size(d: int, d_out: int, B: int, E: int, N: int, stats: bool = False) -> int:
    """Particles per block: the largest power of two whose scratch fits ``L2_BUDGET``.

    Per particle a block holds (in float64) Z^U and Z^{nV}, the batch's
    pre-activations, φ′-weighted errors and φ values (3B), two scratch rows,
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


@njit(fastmath=True, error_model="numpy", cache=True)
def _preacts(Ub, X, use_blas):
    """H[i, j] = Ub[:, j] · X[i]: one gemm, or the vectorized passes of _preact_row."""
    n, m = X.shape[0], Ub.shape[1]
    if use_blas and n > 0:
        return np.dot(X, Ub)
    H = np.empty((n, m))
    for i in range(n):
        _preact_row(Ub, X[i], H[i])
    return H


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _decay_into(M, mu, shrink, Z):
    """M ← μ M + δ Z (the heavy-ball buffer before the gradient increment joins it)."""
    for k in range(M.shape[0]):
        Mk, Zk = M[k], Z[k]
        for j in range(Mk.shape[0]):
            Mk[j] = mu * Mk[j] + shrink * Zk[j]


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _adam_into(Z, M, V, Gr, b1, b2, eps, bias1, bias2, lr, shrink):
    """Adam on every entry of a block: moments (M, V) of the gradient Gr, then
    Z ← (1 − δ) Z − lr m̂/(√v̂ + ε); an entry that has seen only zero gradients with
    ε = 0 does not move (0/0 read as 0)."""
    for k in range(Z.shape[0]):
        Zk, Mk, Vk, Gk = Z[k], M[k], V[k], Gr[k]
        for j in range(Zk.shape[0]):
            g = Gk[j]
            mk = b1 * Mk[j] + (1.0 - b1) * g
            vk = b2 * Vk[j] + (1.0 - b2) * g * g
            Mk[j] = mk
            Vk[j] = vk
            den = math.sqrt(vk / bias2) + eps
            psi = (mk / bias1) / den if den > 0.0 else 0.0
            Zk[j] = (1.0 - shrink) * Zk[j] - lr * psi


@njit(fastmath=True, error_model="numpy", cache=True)
def _update_block(Ub, Vb, tag, Xb, chi, step_u, step_v, D, use_blas, S0u, S0v, S1u, S1v,
                  mode, hp, CP, CD):
    """Simultaneous update of one block with the batch (Xb, χ); see the module docstring.

    ``mode`` 0: the increments go straight into Ub, Vb; 1: into the heavy-ball
    buffers S0u, S0v; 2: into zeroed gradient scratch, then Adam with moments
    (S0, S1).  ``CP``, ``CD``: φ(Z^U ξ_i), φ′(Z^U ξ_i) of the batch, cached by the
    previous sweep's forward pass (B, m), or empty (0, m) to compute them here.
    """
    d, m = Ub.shape
    do = Vb.shape[0]
    B = Xb.shape[0]
    cached = CP.shape[0] == B
    H = _preacts(Ub, Xb, use_blas) if not cached else np.empty((0, m))
    P = CP if cached else np.empty((B, m))
    G = np.empty((B, m))
    sv = np.empty(m)
    # innermost loops run over particles j, so they vectorize
    for i in range(B):
        sv[:] = 0.0
        for o in range(do):
            c = chi[i, o]
            for j in range(m):
                sv[j] += c * Vb[o, j]
        Gi = G[i]
        if cached:
            Di = CD[i]
        else:
            phi_arrays(tag, H[i], P[i], D)
            Di = D
        for j in range(m):
            Gi[j] = sv[j] * Di[j]
    if mode == 1:                      # both buffers from the old particles, then move
        _decay_into(S0u, hp[0], hp[1], Ub)
        _decay_into(S0v, hp[0], hp[2], Vb)
        TU, TV = S0u, S0v              # where the increments go (subtracted with -step)
    elif mode == 2:
        TU, TV = np.zeros((d, m)), np.zeros((do, m))
    else:
        TU, TV = Ub, Vb
    sign = -1.0 if mode else 1.0
    if step_u != 0.0:
        if use_blas and B >= BLAS_MIN_B:
            _sub_scaled(TU, sign * step_u, np.dot(np.ascontiguousarray(Xb.T), G))
        else:
            _sub_outer(TU, sign * step_u, Xb, G)
    if step_v != 0.0:
        _sub_outer(TV, sign * step_v, chi, P)
    if mode == 1:
        _sub_scaled(Ub, 1.0, S0u)
        _sub_scaled(Vb, 1.0, S0v)
    elif mode == 2:
        _adam_into(Ub, S0u, S1u, TU, hp[3], hp[4], hp[5], hp[6], hp[7], hp[8], hp[1])
        _adam_into(Vb, S0v, S1v, TV, hp[3], hp[4], hp[5], hp[6], hp[7], hp[9], hp[2])


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _sub_outer(A, lr, C, M):
    """A -= lr Cᵀ M for A (rows, m), C (B, rows), M (B, m); innermost loop over particles.

    Four batch rows per pass: one load and store of A[k] serve four
    multiply-adds (a pass per row is bound by loads and stores, not FMAs).
    """
    B = C.shape[0]
    for k in range(A.shape[0]):
        Ak = A[k]
        i = 0
        while i + 4 <= B:
            c0, c1, c2, c3 = lr * C[i, k], lr * C[i + 1, k], lr * C[i + 2, k], lr * C[i + 3, k]
            M0, M1, M2, M3 = M[i], M[i + 1], M[i + 2], M[i + 3]
            for j in range(Ak.shape[0]):
                Ak[j] -= (c0 * M0[j] + c1 * M1[j]) + (c2 * M2[j] + c3 * M3[j])
            i += 4
        for i2 in range(i, B):
            c = lr * C[i2, k]
            Mi = M[i2]
            for j in range(Ak.shape[0]):
                Ak[j] -= c * Mi[j]


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _sub_scaled(A, lr, dA):
    for k in range(A.shape[0]):
        Ak, dAk = A[k], dA[k]
        for j in range(Ak.shape[0]):
            Ak[j] -= lr * dAk[j]


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _preact_row(Ub, x, h):
    """h[j] = Ub[:, j] · x by vectorized passes over the block, four rows of Ub per pass
    (one load and store of h per four multiply-adds)."""
    d, m = Ub.shape
    k = d % 4
    if k == 0:
        for j in range(m):
            h[j] = 0.0
    elif k == 1:
        U0, x0 = Ub[0], x[0]
        for j in range(m):
            h[j] = U0[j] * x0
    elif k == 2:
        U0, U1, x0, x1 = Ub[0], Ub[1], x[0], x[1]
        for j in range(m):
            h[j] = U0[j] * x0 + U1[j] * x1
    else:
        U0, U1, U2, x0, x1, x2 = Ub[0], Ub[1], Ub[2], x[0], x[1], x[2]
        for j in range(m):
            h[j] = U0[j] * x0 + U1[j] * x1 + U2[j] * x2
    while k < d:
        U0, U1, U2, U3 = Ub[k], Ub[k + 1], Ub[k + 2], Ub[k + 3]
        x0, x1, x2, x3 = x[k], x[k + 1], x[k + 2], x[k + 3]
        for j in range(m):
            h[j] += (U0[j] * x0 + U1[j] * x1) + (U2[j] * x2 + U3[j] * x3)
        k += 4


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _preact_pair(Ub, x, y, hx, hy):
    """hx[j] = Ub[:, j] · x and hy[j] = Ub[:, j] · y in the same passes: each load of four
    rows of Ub serves both inputs (4 loads, 2 loads and 2 stores per 8 multiply-adds,
    against 4 + 2 per 4 for one input at a time)."""
    d, m = Ub.shape
    k = d % 4
    if k == 0:
        for j in range(m):
            hx[j] = 0.0
            hy[j] = 0.0
    elif k == 1:
        U0 = Ub[0]
        for j in range(m):
            hx[j] = U0[j] * x[0]
            hy[j] = U0[j] * y[0]
    elif k == 2:
        U0, U1 = Ub[0], Ub[1]
        for j in range(m):
            hx[j] = U0[j] * x[0] + U1[j] * x[1]
            hy[j] = U0[j] * y[0] + U1[j] * y[1]
    else:
        U0, U1, U2 = Ub[0], Ub[1], Ub[2]
        for j in range(m):
            hx[j] = U0[j] * x[0] + U1[j] * x[1] + U2[j] * x[2]
            hy[j] = U0[j] * y[0] + U1[j] * y[1] + U2[j] * y[2]
    while k < d:
        U0, U1, U2, U3 = Ub[k], Ub[k + 1], Ub[k + 2], Ub[k + 3]
        x0, x1, x2, x3 = x[k], x[k + 1], x[k + 2], x[k + 3]
        y0, y1, y2, y3 = y[k], y[k + 1], y[k + 2], y[k + 3]
        for j in range(m):
            u0, u1, u2, u3 = U0[j], U1[j], U2[j], U3[j]
            hx[j] += (u0 * x0 + u1 * x1) + (u2 * x2 + u3 * x3)
            hy[j] += (u0 * y0 + u1 * y1) + (u2 * y2 + u3 * y3)
        k += 4


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _row_sums(h, Vb, wb, uniform, tag, ph, acc, c0):
    """acc[c0 + o] += Σ_j w_j Vb[o, j] φ(h_j); ``ph`` is scratch (it may be h)."""
    do = Vb.shape[0]
    m = h.shape[0]
    if uniform and piecewise_linear(tag):
        for o in range(do):
            acc[c0 + o] += wb[0] * phi_dot(tag, h, Vb[o])
        return
    phi_values(tag, h, ph)
    if not uniform:
        for j in range(m):
            ph[j] *= wb[j]
    scale = wb[0] if uniform else 1.0
    for o in range(do):
        s = 0.0
        Vo = Vb[o]
        for j in range(m):
            s += Vo[j] * ph[j]
        acc[c0 + o] += scale * s


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _sums_of_rows(H, Vb, wb, uniform, tag, ph, acc, col):
    """_row_sums for every row of the pre-activations H (H is left as it is)."""
    for i in range(H.shape[0]):
        _row_sums(H[i], Vb, wb, uniform, tag, ph, acc, col + i * Vb.shape[0])


@njit(fastmath=True, error_model="numpy", cache=True)
def _forward_sums(Ub, X, Vb, wb, uniform, tag, use_blas, ph, ph2, acc, col):
    """acc[col + i*d_out + o] += Σ_j w_j Vb[o, j] φ(Ub[:, j] · X[i])  for each input row i.

    Small d: each row's pre-activations are built in the scratch ``ph`` and
    φ is applied there in place (no (n, m) array, no φ′); from BLAS_MIN_D on
    they come from one gemm.  For id and relu (piecewise linear) with equal
    weights, φ is fused with the dot product in one pass; LLVM does not
    vectorize that reduction around the longer tanh body, so the other φ
    first fill ``ph`` (a vectorized loop) and then take the dot product
    (measured: tanh 1.4 ns two-pass vs 3.4 fused).  From PAIR_MIN_D on the
    rows are built two at a time (_preact_pair), in ``ph`` and ``ph2``.
    """
    do, n = Vb.shape[0], X.shape[0]
    if use_blas:
        _sums_of_rows(_preacts(Ub, X, True), Vb, wb, uniform, tag, ph, acc, col)
        return
    i = 0
    if X.shape[1] >= PAIR_MIN_D:        # two inputs per pass over Z^U (ph2: their scratch)
        while i + 1 < n:
            _preact_pair(Ub, X[i], X[i + 1], ph, ph2)
            _row_sums(ph, Vb, wb, uniform, tag, ph, acc, col + i * do)
            _row_sums(ph2, Vb, wb, uniform, tag, ph2, acc, col + (i + 1) * do)
            i += 2
    while i < n:
        _preact_row(Ub, X[i], ph)
        _row_sums(ph, Vb, wb, uniform, tag, ph, acc, col + i * do)
        i += 1


@njit(fastmath=True, error_model="numpy", cache=True)
def _forward_sums_keep(Ub, X, Vb, wb, uniform, tag, use_blas, ph, ph2, cache, a0, acc, col):
    """_forward_sums that also keeps φ(Ub·X[i]) and φ′ in the cache's columns a0.. of
    row i: the next sweep's update reads them instead of recomputing."""
    do, m, n = Vb.shape[0], Ub.shape[1], X.shape[0]
    H = _preacts(Ub, X, True) if use_blas else np.empty((0, m))
    pairs = not use_blas and X.shape[1] >= PAIR_MIN_D
    for i in range(n):
        Pi = cache[0, i, a0:a0 + m]
        if use_blas:
            h = H[i]
        elif pairs and i % 2 == 1:      # built with the row before it
            h = ph2
        elif pairs and i + 1 < n:
            _preact_pair(Ub, X[i], X[i + 1], ph, ph2)
            h = ph
        else:
            _preact_row(Ub, X[i], ph)
            h = ph
        phi_arrays(tag, h, Pi, cache[1, i, a0:a0 + m])
        for o in range(do):
            s = 0.0
            Vo = Vb[o]
            if uniform:
                for j in range(Pi.shape[0]):
                    s += Vo[j] * Pi[j]
                s *= wb[0]
            else:
                for j in range(Pi.shape[0]):
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


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _load_block(A, a0, m):
    """float64 C-ordered copy of the columns a0 .. a0+m of A (rows copied as 1-d C slices)."""
    Ab = np.empty((A.shape[0], m))
    for k in range(A.shape[0]):
        Ab[k, :] = A[k, a0:a0 + m]
    return Ab


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _store_block(Ab, A, a0):
    m = Ab.shape[1]
    for k in range(A.shape[0]):
        A[k, a0:a0 + m] = Ab[k, :]


@njit(parallel=True, fastmath=True, error_model="numpy", cache=True)
def sweep(U, V, w, U0, tag, Xb, chi, step_u, step_v, Xn, Xe, stats, block, out, SU, SV, hp,
          cache, cached):
    """One fused step; see the module docstring.  ``out`` must be zeroed, shape (nblocks, K).

    SU (k, d, N), SV (k, d_out, N): the optimizer's per-particle state (k = 0 plain
    SGD, 1 heavy ball, 2 Adam), updated in place; ``hp``: hyperparameters (HP).

    ``cache`` (2, B', N) float64, B' = 0 for none: the forward pass of the next
    batch leaves φ(Z^U ξ) and φ′(Z^U ξ) of its rows there, and with ``cached`` the
    update reads those of its batch (left by the previous sweep, computed with the
    Z^U it now updates) instead of recomputing them: B φ evaluations and B·d
    multiply-adds per particle fewer, 4B floats of memory traffic more.

    Each block is first copied into C-ordered float64 scratch: a column
    slice ``U[:, a0:a1]`` is a non-contiguous view whose rows Numba can only
    read with run-time strides, which stops every particle loop from
    vectorizing (measured 2.5x slower); the copy costs one pass.
    """
    d, N = U.shape
    do = V.shape[0]
    Bn, E = Xn.shape[0], Xe.shape[0]
    nb = (N + block - 1) // block
    uniform = w.shape[0] == 1
    use_blas = d >= BLAS_MIN_D
    mode = SU.shape[0]
    keep = cache.shape[1] >= Bn > 0
    for bi in prange(nb):
        a0 = bi * block
        m = min(N, a0 + block) - a0
        Ub = _load_block(U, a0, m)
        Vb = _load_block(V, a0, m)
        wb = w[a0:a0 + m] if not uniform else w[:1]
        acc = out[bi]
        ph = np.empty(m)
        D = np.empty(m)
        if Xb.shape[0] > 0:
            S0u = _load_block(SU[0], a0, m) if mode > 0 else Ub
            S0v = _load_block(SV[0], a0, m) if mode > 0 else Vb
            S1u = _load_block(SU[1], a0, m) if mode > 1 else Ub
            S1v = _load_block(SV[1], a0, m) if mode > 1 else Vb
            B = Xb.shape[0]
            # C-ordered copies: the update's loops vectorize only over contiguous rows
            CP = _load_block(cache[0, :B], a0, m) if cached else np.empty((0, m))
            CD = _load_block(cache[1, :B], a0, m) if cached else CP
            _update_block(Ub, Vb, tag, Xb, chi, step_u, step_v, D, use_blas, S0u, S0v, S1u,
                          S1v, mode, hp, CP, CD)
            _store_block(Ub, U, a0)
            _store_block(Vb, V, a0)
            if mode > 0:
                _store_block(S0u, SU[0], a0)
                _store_block(S0v, SV[0], a0)
            if mode > 1:
                _store_block(S1u, SU[1], a0)
                _store_block(S1v, SV[1], a0)
        # D is free again here: the forward passes use it as their second scratch row
        if keep:
            _forward_sums_keep(Ub, Xn, Vb, wb, uniform, tag, use_blas, ph, D, cache, a0, acc,
                               0)
        else:
            _forward_sums(Ub, Xn, Vb, wb, uniform, tag, use_blas, ph, D, acc, 0)
        if stats and E > 0:             # the eval pre-activations serve both sums
            He = _preacts(Ub, Xe, use_blas)
            _sums_of_rows(He, Vb, wb, uniform, tag, ph, acc, Bn * do)
            H0 = _preacts(_load_block(U0, a0, m), Xe, use_blas)
            _stats_block(He, H0, wb, uniform, tag, D, acc, (Bn + E) * do)
        else:
            _forward_sums(Ub, Xe, Vb, wb, uniform, tag, use_blas, ph, D, acc, Bn * do)


def warm_up(tag, dtype) -> None:
    """Compile (or load from the disk cache) the sweep for this φ and storage dtype, on
    arrays of one particle: the types, not the sizes, select the compiled code."""
    one = np.zeros((1, 1), dtype)
    f64 = np.zeros((1, 1))
    sweep(one, one.copy(), np.ones(1), one.copy(), tag, f64, f64, 0.0, 0.0, f64, f64, False,
          1, np.zeros((1, 2)), np.zeros((0, 1, 1), dtype), np.zeros((0, 1, 1), dtype),
          hyperparameters(), np.zeros((2, 0, 1)), False)
