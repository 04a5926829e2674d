"""The CBOW step (docs/theory.md §15.2, (15.1)) as one Numba kernel: the fast path of
:func:`~tp_limits.tasks.word2vec.cbow_step`, whose NumPy form is the plain twin the tests
hold it to.

The NumPy step makes about ten passes over the rows a batch touches (gathers into
temporaries, sparse products, fancy-index updates); at V = 5000 that is 15–25× the traffic
floor of reading and writing each touched row once (benchmarks/bench_tasks.py).  Here:

1. per example b: h_b = mean of the context rows of E_in, the logits
   f_bj = α ⟨E_out[idx_bj], h_b⟩ and, after χ is formed, back_b = Σ_j χ_bj E_out[idx_bj];
2. per block of columns (the rows' slices of a block stay in L1 while the whole batch's
   updates are added): E_out[idx_bj] −= η_out α χ_bj h_b and E_in[w] −= η_in α back_b /
   |context_b| for every context word w.

Both updates read only h and back, computed from the old matrices, so the step is the
simultaneous update of (15.1).  The kernel is serial: a parallel version (prange over
examples and column blocks) was 1.6–21× slower than this one while another process kept a
core busy (19 ms against 0.9 ms per step at m = 256, 38 against 23 ms at m = 5000: two
barriers per step wait on a descheduled thread), and the serial kernel is 2–3× faster than
its NumPy twin (benchmarks/bench_tasks.py).
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: columns per block of the update pass (2 KB of float64 per row: the rows of a block stay
#: in L1 while the batch's updates are added)
COLUMN_BLOCK = 256


@njit(cache=True, error_model="numpy")
def forward(E_in, E_out, ctx, weights, idx, alpha, h, f):
    """h (B × m) and f (B × (1+k)) of the batch, from E_in and E_out; ``weights`` the
    1/|context_b| of each example (CBOWBatch.context_weights)."""
    B, C = ctx.shape
    K = idx.shape[1]
    m = E_in.shape[1]
    for b in range(B):
        hb = h[b]
        hb[:] = 0.0
        for c in range(C):
            w = ctx[b, c]
            if w >= 0:
                row = E_in[w]
                for i in range(m):
                    hb[i] += row[i]
        inv = weights[b]
        for i in range(m):
            hb[i] *= inv
        for j in range(K):
            row = E_out[idx[b, j]]
            s = 0.0
            for i in range(m):
                s += row[i] * hb[i]
            f[b, j] = alpha * s


@njit(cache=True, error_model="numpy")
def backward(E_in, E_out, ctx, weights, idx, chi, h, back, lr_in, lr_out, alpha):
    """back = χ E_out (old E_out), then both updates of (15.1), in place."""
    B, C = ctx.shape
    K = idx.shape[1]
    m = E_in.shape[1]
    for b in range(B):
        bb = back[b]
        bb[:] = 0.0
        for j in range(K):
            row = E_out[idx[b, j]]
            x = chi[b, j]
            for i in range(m):
                bb[i] += x * row[i]
    nblocks = (m + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    s_out = lr_out * alpha
    s_in = lr_in * alpha
    for blk in range(nblocks):
        i0 = blk * COLUMN_BLOCK
        i1 = min(m, i0 + COLUMN_BLOCK)
        for b in range(B):
            hb = h[b, i0:i1]
            for j in range(K):
                x = s_out * chi[b, j]
                row = E_out[idx[b, j], i0:i1]
                for i in range(i1 - i0):
                    row[i] -= x * hb[i]
            x = s_in * weights[b]
            bb = back[b, i0:i1]
            for c in range(C):
                w = ctx[b, c]
                if w >= 0:
                    row = E_in[w, i0:i1]
                    for i in range(i1 - i0):
                        row[i] -= x * bb[i]


def buffers(B: int, m: int) -> tuple:
    """The kernel's work arrays h and back (B × m each)."""
    return np.empty((B, m)), np.empty((B, m))
