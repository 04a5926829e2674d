"""Coordinate statistics of a finite network on its evaluation inputs (docs/theory.md §7.2).

Recorded at every t = 0..T (leading axis), averaged over the E evaluation
inputs; "rms" is ‖v‖/√(size):

    h_rms, x_rms           (T+1, L)     rms h^l_t, x^l_t
    dh_rms, dx_rms         (T+1, L)     rms (h^l_t - h^l_0), (x^l_t - x^l_0)
    dWx_rms                (T+1, L+1)   rms (W^l_t - W^l_0) x^{l-1}_t  (readout: without α)
    spectral_ratio         (T+1, L+1)   ‖W^l_t - W^l_0‖_* / ‖W^l_0‖_*
    frobenius_ratio        (T+1, L+1)   ‖W^l_t - W^l_0‖_F / ‖W^l_0‖_F
    feature_kernel         (T+1, E, E)  ⟨x^L_t(ξ_i), x^L_t(ξ_j)⟩ = x·x'/n
    feature_kernel_change  (T+1,)       rms over entries of feature_kernel_t - feature_kernel_0

Spectral norms of n x n matrices are iterative (no SVD).  ‖W_0‖_* of a
Gaussian matrix, whose top singular values are only ~n^{-2/3} apart, comes
from Golub-Kahan-Lanczos bidiagonalization, which converges in ~50 steps
where power iteration needs thousands.  ΔW is low rank (rank <= t·B), so
warm-started block power iteration converges in a few sweeps.  Thin matrices
(input layer, readout) use the exact Gram eigenvalue.
"""
from __future__ import annotations

import numpy as np

from .network import FiniteNetwork

THIN = 64                  # below this many rows or columns, use the exact Gram matrix
LANCZOS_STEPS = 300        # cap on bidiagonalization steps (a Gaussian n = 8192 needs ~60)
LANCZOS_RTOL = 1e-8        # stop when the estimate changes by less (relative)
POWER_ITERS_DELTA = 40
POWER_RTOL = 1e-6
BLOCK = 8                  # vectors per sweep of the block power iteration


def spectral_norm(matmat, rmatmat, shape, backend, dtype, v0=None, iters=POWER_ITERS_DELTA,
                  rtol=POWER_RTOL, block=BLOCK):
    """Largest singular value of an operator by block power (subspace) iteration.

    ``matmat(V)`` = M V and ``rmatmat(U)`` = Mᵀ U for blocks of ``block``
    vectors: reading M once per sweep serves every vector, so a block costs
    about what one vector does on a bandwidth-bound machine, and convergence
    goes like (σ_{k+1}/σ_1)^{2·sweeps} instead of (σ_2/σ_1)^{2·sweeps}.
    The estimate ‖M V‖_2 (V orthonormal, Rayleigh–Ritz) approaches ‖M‖_* from
    below.  Returns (sigma, V) so the next call can warm-start from V.
    """
    xp = backend.xp
    k = min(block, shape[1])
    if v0 is None:
        v0 = xp.asarray(np.random.default_rng(12345).standard_normal((shape[1], k)), dtype=dtype)
    V, _ = xp.linalg.qr(v0)
    sigma = 0.0
    for _ in range(iters):
        U = matmat(V)
        new = float(np.sqrt(max(float(xp.linalg.eigvalsh(backend.matmul(U.T, U))[-1]), 0.0)))
        if new == 0.0:
            return 0.0, V
        W = rmatmat(U)
        V, _ = xp.linalg.qr(W)
        if abs(new - sigma) <= rtol * new:
            return new, V
        sigma = new
    return sigma, V


def frobenius_distance(A, B, backend, block=None) -> float:
    """‖A - B‖_F of two 2-D arrays of one shape, by row blocks of about ``block`` entries
    (default ``backend.scratch_entries``).

    Each block's difference goes into one reused float64 buffer, is squared
    in place and summed, so the pass reads A and B once; on the host the
    buffer stays in cache and nothing else is written to memory, where
    forming A - B block by block and squaring it wrote and re-read two
    temporaries.  No BLAS call: NumPy's BLAS
    would compete for the cores with the SciPy BLAS pool that the backend's
    products use (engine/backend.py).  The float64 buffer also keeps a float32
    network's differences and their sum of squares in double precision.
    """
    xp = backend.xp
    rows = max(1, (block or backend.scratch_entries) // max(A.shape[1], 1))
    buf = xp.empty((min(rows, A.shape[0]), A.shape[1]), dtype=np.float64)
    total = 0.0
    for i in range(0, A.shape[0], rows):
        j = min(i + rows, A.shape[0])
        d = buf[: j - i]
        xp.subtract(A[i:j], B[i:j], out=d, dtype=np.float64)
        xp.square(d, out=d)
        total = total + d.sum()              # stays on the device until the end
    return float(np.sqrt(float(total)))


def lanczos_norm(matvec, rmatvec, shape, backend, dtype, rtol=LANCZOS_RTOL,
                 steps=LANCZOS_STEPS, seed=12345) -> float:
    """Largest singular value by Golub-Kahan-Lanczos bidiagonalization.

    From a random unit v_1: α_j u_j = M v_j - β_{j-1} u_{j-1} and
    β_j v_{j+1} = Mᵀ u_j - α_j v_j, each vector reorthogonalized (twice,
    classical Gram-Schmidt) against the earlier ones, so U and V stay
    orthonormal and M V_k = U_k B_k with B_k upper bidiagonal (α on the
    diagonal, β above it).  σ_max(B_k) rises to ‖M‖_* from below; the
    Krylov space holds Chebyshev polynomials of MᵀM, so the error falls like
    exp(-2k·√gap) instead of power iteration's exp(-2k·gap).  Stops when
    σ_max(B_k) changes by less than ``rtol`` (relative; at least 10·eps of
    ``dtype``) or when β_k = 0 (an invariant subspace: σ_max(B_k) is exact).
    ``matvec``/``rmatvec`` take and return 1-D vectors (docs/theory.md §7.4).
    """
    xp = backend.xp
    mm = backend.matmul                  # the backend's BLAS pool only (engine/backend.py)

    def orthogonalize(w, Q):
        for _ in range(2):
            w -= mm(Q.T, mm(Q, w[:, None]))[:, 0]
        return w

    def norm(w):
        return float(xp.sqrt(xp.sum(w * w)))

    m, n = shape
    k = min(steps, m, n)
    rtol = max(rtol, 10 * float(np.finfo(dtype).eps))
    U, V = xp.zeros((k, m), dtype=dtype), xp.zeros((k + 1, n), dtype=dtype)
    v = xp.asarray(np.random.default_rng(seed).standard_normal(n), dtype=dtype)
    V[0] = v / norm(v)
    alphas, betas, sigma, beta = [], [], 0.0, 0.0

    for j in range(k):
        u = matvec(V[j])
        if j:
            u -= beta * U[j - 1]
        u = orthogonalize(u, U[:j])
        alpha = norm(u)
        if alpha == 0.0:
            break
        alphas.append(alpha)
        U[j] = u / alpha
        w = orthogonalize(rmatvec(U[j]) - alpha * V[j], V[: j + 1])
        beta = norm(w)
        new = float(np.linalg.svd(np.diag(alphas) + np.diag(betas, 1), compute_uv=False)[0])
        if beta == 0.0 or abs(new - sigma) <= rtol * new:
            return new
        sigma = new
        betas.append(beta)
        V[j + 1] = w / beta
    return sigma


def _thin_norm(M, backend) -> float:
    xp = backend.xp
    mm = backend.matmul
    g = mm(M.T, M) if M.shape[0] >= M.shape[1] else mm(M, M.T)
    return float(np.sqrt(max(float(xp.linalg.eigvalsh(g)[-1]), 0.0)))


class StatsRecorder:
    """Fills the arrays of the module docstring from evaluation forward passes."""

    def __init__(self, network: FiniteNetwork, T: int, E: int, coordinates: bool = True,
                 spectral: bool = True):
        L = network.net.L
        self.nw, self.coordinates, self.spectral = network, coordinates, spectral
        self.stats = {}
        if coordinates:
            for k in ("h_rms", "x_rms", "dh_rms", "dx_rms"):
                self.stats[k] = np.zeros((T + 1, L))
            self.stats["dWx_rms"] = np.zeros((T + 1, L + 1))
            self.stats["feature_kernel"] = np.zeros((T + 1, E, E))
            self.stats["feature_kernel_change"] = np.zeros(T + 1)
        if spectral:
            self.stats["spectral_ratio"] = np.zeros((T + 1, L + 1))
        if coordinates or spectral:
            self.stats["frobenius_ratio"] = np.zeros((T + 1, L + 1))
        self._h0 = self._x0 = None
        xp = network.b.xp
        self._fro0 = [float(xp.linalg.norm(w)) for w in network.W0]
        self._spec0 = self._spec_vectors = None

    def truncate(self, upto: int) -> dict:
        return {k: v[:upto] for k, v in self.stats.items()}

    def record(self, t: int, hs, xs, f) -> None:
        nw = self.nw
        L = nw.net.L
        if t == 0:
            self._h0, self._x0 = hs, xs
            self._spec0 = [self._norm_init(l) for l in range(L + 1)] if self.spectral else None
            self._spec_vectors = [None] * (L + 1)
        if self.coordinates:
            self._record_coordinates(t, hs, xs, f)
        self._record_norms(t)

    def _record_coordinates(self, t, hs, xs, f) -> None:
        nw, b = self.nw, self.nw.b
        xp, mm, tonp = b.xp, b.matmul, b.to_numpy
        rms = lambda a: float(xp.sqrt(xp.mean(a * a)))  # noqa: E731
        L, s = nw.net.L, self.stats
        for l in range(L):
            s["h_rms"][t, l] = rms(hs[l])
            s["x_rms"][t, l] = rms(xs[l + 1])
            s["dh_rms"][t, l] = rms(hs[l] - self._h0[l])
            s["dx_rms"][t, l] = rms(xs[l + 1] - self._x0[l + 1])
            s["dWx_rms"][t, l] = rms(hs[l] - mm(xs[l], nw.W0[l].T))
        s["dWx_rms"][t, L] = rms(f / nw.alpha - mm(xs[L], nw.W0[L].T))
        xL = xs[L]
        K = tonp(mm(xL, xL.T)) / nw.n
        s["feature_kernel"][t] = K
        dK = K - s["feature_kernel"][0]
        s["feature_kernel_change"][t] = float(np.sqrt(np.mean(dK * dK)))

    def _record_norms(self, t) -> None:
        nw, xp, s = self.nw, self.nw.b.xp, self.stats
        L = nw.net.L
        for l in range(L + 1):
            d = nw.W[l] - nw.W0[l] if l in (0, L) else None
            fro = float(xp.linalg.norm(d)) if d is not None else self._delta_fro(l)
            s["frobenius_ratio"][t, l] = fro / self._fro0[l] if self._fro0[l] else np.inf
            if self.spectral:
                s["spectral_ratio"][t, l] = (self._norm_delta(l, d) / self._spec0[l]
                                             if self._spec0[l] else np.inf)

    def _delta_fro(self, l) -> float:
        """‖W_t - W_0‖_F of an n x n layer (see frobenius_distance)."""
        return frobenius_distance(self.nw.W[l], self.nw.W0[l], self.nw.b)

    def _norm_init(self, l) -> float:
        nw = self.nw
        M = nw.W0[l]
        if min(M.shape) <= THIN:
            return _thin_norm(M, nw.b)
        mm = nw.b.matmul
        return lanczos_norm(lambda v: mm(M, v[:, None])[:, 0], lambda u: mm(M.T, u[:, None])[:, 0],
                            M.shape, nw.b, nw.dtype)

    def _norm_delta(self, l, d) -> float:
        nw = self.nw
        if d is not None and min(d.shape) <= THIN:
            return _thin_norm(d, nw.b)
        W, W0, mm = nw.W[l], nw.W0[l], nw.b.matmul
        sigma, v = spectral_norm(lambda V: mm(W, V) - mm(W0, V),
                                 lambda U: mm(W.T, U) - mm(W0.T, U),
                                 W.shape, nw.b, nw.dtype, v0=self._spec_vectors[l])
        self._spec_vectors[l] = v
        return sigma
