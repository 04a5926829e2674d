"""Step 2 of a sweep on one block of particles: the forward sums and the statistics.

For each input x_i (the next batch, then the eval inputs) the block adds
Σ_j w_j Z^{nV}_j φ(Z^U_j x_i) to its row of the sweep's output (columns.py), and,
with statistics, the eval inputs' second moments.  The pre-activations come from
tiles of tiling.py (the register tiles of tiles.py — 16 particles, up to six
inputs, the running sums in registers — or their plain twin), the block in chunks
of FORWARD_CHUNK particles whose rows stay in L1; from BLAS_MIN_D on, from one BLAS
gemm per block.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .blocks import part
from .phi import dphi_from_value, phi_arrays, phi_dot, phi_values, piecewise_linear
from .tiles import MAX_Q
from .tiling import pre_tile, preacts_into, tile_count, tile_size, update_pre_tile

#: particles per chunk of the forward pass: a tile's pre-activation rows (at most MAX_Q
#: rows of 2 KB) stay in L1 while φ and the readout sums take them
FORWARD_CHUNK = 256


@njit(fastmath=True, error_model="numpy", cache=True)
def preacts(tiles, Ub, ua, m, X, use_blas):
    """H[i, j] = Ub[:, ua + j] · X[i]: one gemm (Ub is then a copy, ua = 0), or the
    pre-activation ``tiles`` (tiling.pre_tile)."""
    n = X.shape[0]
    if use_blas and n > 0:
        return np.dot(X, Ub)
    H = np.empty((n, m))
    preacts_into(tiles, Ub, ua, m, X, H)
    return H


@njit(fastmath=True, error_model="numpy", cache=True)
def forward_sums(a, tag, tiles, b, X, use_blas, nkeep, acc, Xu, G, ahead):
    """acc[i*d_out + o] += Σ_j w_j V[o, j] φ(U[:, j] · X[i]) over the particles of block b
    (blocks.Block), for each input i, in the sweep ``a`` (contract.SweepData) with the φ
    of ``tag`` and the pre-activation ``tiles`` (tiling.pre_tile).

    The block goes in chunks of FORWARD_CHUNK particles; in each, the inputs
    go in register tiles of up to MAX_Q (tiles.py) whose pre-activation rows
    (at most MAX_Q × FORWARD_CHUNK float64) stay in L1 while φ is applied to
    them in place and the readout sums are taken (_rows_into_sums).  From
    BLAS_MIN_D on (``use_blas``) the pre-activations of the whole block come
    from one gemm.  For piecewise-linear φ (id, relu) with equal weights, φ is
    fused with the dot product in one pass; LLVM does not vectorize that
    reduction around a longer φ body, so the other φ first fill the row (a
    vectorized loop) and then take the dot product (docs/performance.md).

    The first ``nkeep`` inputs (the next batch, when the sweep keeps a cache)
    also leave φ(U·X[i]) (and φ′, unless it follows from φ: see phi.cache_planes)
    in the cache's columns b.col.. of row i: the next sweep's update reads them
    instead of recomputing.

    With a batch ``Xu`` (plain rule, float64 in place, B <= FUSE_MAX_B) the step of
    Z^U that update.update_block left undone is taken here, Z^U −= scale_u Xuᵀ G,
    by the first tile of each chunk (tiles.update_preact_tile), which reads each
    row of the chunk once, moves it, writes it back and uses it for its inputs:
    the update's memory traffic overlaps the forward arithmetic; it prefetches
    ``ahead`` particles past itself.
    """
    if use_blas:
        H = preacts(tiles, b.U, b.a, b.m, X, True)
        _rows_into_sums(tag, a.cache, b, H, X.shape[0], 0, nkeep, acc)
        return
    n = X.shape[0]
    count = tile_count(n)
    H = np.empty((MAX_Q, min(b.m, FORWARD_CHUNK)))
    for c0 in range(0, b.m, FORWARD_CHUNK):
        c = part(b, c0, min(b.m, c0 + FORWARD_CHUNK) - c0)
        i0 = 0
        for t in range(count):
            q = tile_size(n, i0, t, count)
            if t == 0 and Xu.shape[0] > 0:
                update_pre_tile(tiles, c.U, c.a, c.m, Xu, G[:, c0:], a.scale_u, X, i0, q,
                                H, ahead)
            else:
                pre_tile(tiles, c.U, c.a, c.m, X, i0, q, H)
            _rows_into_sums(tag, a.cache, c, H, q, i0, nkeep, acc)
            i0 += q


@njit(fastmath=True, error_model="numpy", cache=True)
def _rows_into_sums(tag, cache, b, H, q, i0, nkeep, acc):
    """acc[i*d_out + o] += Σ_j w_j V[o, j] φ(H[r, j]) over the particles of block b, for
    the inputs i = i0 + r held in the rows r < q of H (overwritten); inputs below
    ``nkeep`` leave φ (and φ′) in the cache's columns b.col.. (see forward_sums)."""
    Vb, va, m, wb, ca = b.V, b.a, b.m, b.w, b.col
    uniform = wb.shape[0] == 1
    do = Vb.shape[0]
    for r in range(q):
        i = i0 + r
        h = H[r, :m]
        if i >= nkeep:
            _row_sums(h, Vb, va, wb, uniform, tag, h, acc, i * do)
            continue
        Pi = cache[0, i, ca:ca + m]
        if dphi_from_value(tag):      # φ′ follows from φ: the next update recovers it
            phi_values(tag, h, Pi)
        else:
            phi_arrays(tag, h, Pi, cache[1, i, ca:ca + m])
        for o in range(do):
            s = 0.0
            Vo = Vb[o, va:va + m]
            if uniform:
                for j in range(m):
                    s += Vo[j] * Pi[j]
                s *= wb[0]
            else:
                for j in range(m):
                    s += wb[j] * Vo[j] * Pi[j]
            acc[i * do + o] += s


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
def sums_of_rows(H, Vb, va, wb, uniform, tag, ph, acc, col):
    """_row_sums for every row of the pre-activations H (H is left as it is)."""
    for i in range(H.shape[0]):
        _row_sums(H[i], Vb, va, wb, uniform, tag, ph, acc, col + i * Vb.shape[0])


@njit(fastmath=True, error_model="numpy", cache=True)
def stats_block(H, H0, wb, uniform, tag, D, acc, col):
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
