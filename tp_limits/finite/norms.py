"""Matrix norms of a finite network's weights, without an SVD of an n x n matrix
(docs/theory.md §7.4).

Spectral norms of n x n matrices are iterative.  ‖W_0‖_* of a Gaussian matrix,
whose top singular values are only ~n^{-2/3} apart, comes from Golub-Kahan-Lanczos
bidiagonalization, which converges in ~50 steps where power iteration needs
thousands.  A low-rank ΔW (rank <= t·B) takes warm-started block power iteration,
which converges in a few sweeps.  Thin matrices (input layer, readout) use the
exact Gram eigenvalue.  Both the coordinate statistics (stats.py) and the
spectral-norm initialization (spec/initializations.py) use them.
"""
from __future__ import annotations

import numpy as np

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


def thin_norm(M, backend) -> float:
    """‖M‖_* of a matrix with a side of at most ``THIN``: the top eigenvalue of its small Gram."""
    xp = backend.xp
    mm = backend.matmul
    g = mm(M.T, M) if M.shape[0] >= M.shape[1] else mm(M, M.T)
    return float(np.sqrt(max(float(xp.linalg.eigvalsh(g)[-1]), 0.0)))


def operator_norm(M, backend, dtype=None, rtol=LANCZOS_RTOL) -> float:
    """‖M‖_* of a dense matrix: exact through the small Gram for thin shapes, Lanczos (to a
    relative change below ``rtol``) otherwise."""
    if min(M.shape) <= THIN:
        return thin_norm(M, backend)
    mm = backend.matmul
    return lanczos_norm(lambda v: mm(M, v[:, None])[:, 0], lambda u: mm(M.T, u[:, None])[:, 0],
                        M.shape, backend, dtype or M.dtype, rtol=rtol)
