"""Plain vectorized NumPy twin of the fused kernel in sweep.py.

Same inputs, same outputs (per-block sums, same columns, see columns.py), written as
whole-array NumPy expressions over all particles.  It is the reference the
tests check the Numba kernel against, the baseline of the benchmark, and a
fallback (``kernel="numpy"``) where Numba is unwanted.
"""
from __future__ import annotations

import numpy as np

from ...engine.backend import numpy_backend
from ...nonlinearities import get_nonlinearity

_NP = numpy_backend()


def _block_sums(values, block: int, nb: int) -> np.ndarray:
    """(..., N) per-particle values -> (nb, ...) sums over consecutive blocks."""
    starts = np.arange(0, nb * block, block)
    return np.moveaxis(np.add.reduceat(values, starts, axis=-1), -1, 0)


def sweep_numpy(U, V, w, U0, phi: str, Xb, chi, step_u, step_v, Xn, Xe, stats: bool,
                block: int) -> np.ndarray:
    """Update U, V in place with the batch (Xb, chi), then return the block sums."""
    nl = get_nonlinearity(phi)
    d, N = U.shape
    nb = (N + block - 1) // block
    if len(Xb):
        H = Xb @ U                                   # (B, N)
        S = chi @ V                                  # (B, N): χ_iᵀ Z^{nV}
        G = S * nl.dphi(H, _NP)
        P = nl.phi(H, _NP)
        if step_u != 0.0:
            U -= step_u * (Xb.T @ G)
        if step_v != 0.0:
            V -= step_v * (chi.T @ P)
    ww = w if len(w) == N else np.full(N, w[0])
    cols = []
    for X in (Xn, Xe):
        if len(X):
            Ph = nl.phi(X @ U, _NP) * ww             # (n, N)
            cols.append((Ph[:, None, :] * V[None, :, :]).reshape(-1, N))
    if stats and len(Xe):
        H, H0 = Xe @ U, Xe @ U0
        Xv, X0 = nl.phi(H, _NP), nl.phi(H0, _NP)
        cols += [ww * H * H, ww * (H - H0) ** 2, ww * Xv * Xv, ww * (Xv - X0) ** 2,
                 (ww * Xv[:, None, :] * Xv[None, :, :]).reshape(-1, N)]
    if not cols:
        return np.zeros((nb, 0))
    return _block_sums(np.concatenate(cols, axis=0), block, nb)
