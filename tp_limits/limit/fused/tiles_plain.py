"""The pre-activation tiles of tiles.py in plain Numba: the same API, the same chains.

For the rows x_i of an input matrix X and a block of particles (columns of Z^U),

    H[i, j] = Σ_k Z^U[k, a + j] · X[i, k],   the chain h ← h + Z^U[k, j] x_k from h = 0,

optionally after the SGD step of Z^U (u ← u − lr Σ_b C[b, k] G[b, j], b = 0 .. B−1).
Written as loops over particles, innermost, which LLVM vectorizes and (with
``fastmath``) contracts into the same fused multiply-adds as the hand-built vectors of
tiles.py, in the same order: a particle gets the same bits from either (tested).
The running sums live in the rows of H (L1: a forward chunk of 256 particles) rather
than in registers, so each multiply-add also loads and stores its sum.  With
``prefetch`` the update tile prefetches each row ``ahead`` particles past the chunk
(prefetch.py): the one piece of hand-built code the plain path keeps.
"""
from __future__ import annotations

from numba import njit

from .prefetch import prefetch_row

_FAST = dict(fastmath=True, error_model="numpy", cache=True)


@njit(inline="always", **_FAST)
def _sums(U, a, m, X, i0, q, H):
    """H[r, :m] = Σ_k U[k, a:a+m] X[i0 + r, k] for r < q, k in order."""
    for r in range(q):
        H[r, :m] = 0.0
    for k in range(U.shape[0]):
        Uk = U[k, a:a + m]
        for r in range(q):
            x = X[i0 + r, k]
            Hr = H[r, :m]
            for j in range(m):
                Hr[j] += Uk[j] * x


@njit(**_FAST)
def preact_tile_plain(U, a, m, X, i0, q, H):
    """tiles.preact_tile in plain loops."""
    _sums(U, a, m, X, i0, q, H)


@njit(**_FAST)
def update_preact_tile_plain(U, a, m, C, G, lr, X, i0, q, H, ahead, prefetch):
    """tiles.update_preact_tile in plain loops: every row of the block moved by the
    update (the batch rows in order), then the pre-activations from the moved rows;
    ``prefetch``: each row's lines ``ahead`` particles on are prefetched first."""
    B = C.shape[0]
    for k in range(U.shape[0]):
        if prefetch:
            prefetch_row(U, k, a + ahead, m)
        Uk = U[k, a:a + m]
        for b in range(B):
            c = -lr * C[b, k]
            Gb = G[b, :m]
            for j in range(m):
                Uk[j] += c * Gb[j]
    _sums(U, a, m, X, i0, q, H)
