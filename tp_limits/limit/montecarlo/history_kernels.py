"""Register-tiled passes over a family's stored rows, with float64 sums (docs/theory.md §4.6).

The deep engine's time goes into three products between a family's history
R (k stored vectors or hats of length N, float32 or float64) and a few
particle rows (m = B training rows, plus E evaluation rows in the forward pass):

    rows_dot(R, V)               = R Vᵀ                      (k, m)   V: (m, N)
    combine_rows(C, R)           = Cᵀ R                      (m, N)   C: (k, m)
    mean_and_cross(C, R, Z, r)   : Z <- round(Z + Cᵀ R) in place, and
                                   R Z[:r]ᵀ (k, r) in the same pass     (new hats and
                                   the cross products of the r that will be stored)

``round`` rounds to the storage dtype (the particles use exactly the values
that are stored).  Sums over particles are float64 whatever the storage:
single-precision sums of 10⁵ terms lose about five digits, and the
ill-conditioned Gram inverses of long runs turn that into a visible bias.

**Why tiles.** With m ≤ 16 these are skinny products that BLAS runs at a
fraction of its square-dgemm speed (docs/performance.md, "Deep limit"), and a
plain loop spends two loads, or two loads
and a store, per multiply-add.  Here every inner loop over particles updates
a tile of independent sums held in registers: 4 stored rows x 4 query rows
for the dot products (8 loads per 16 multiply-adds), 8 stored rows per load
and store of an output row for the combinations, 4 output rows per tile.
LLVM vectorizes each loop over particles.

Particles are split into a fixed number of chunks (not one per thread), each
chunk writes its own partial sums and the host adds them in order, so results
do not depend on the thread count.  tests/test_limit_deep_mc.py checks every
kernel against its float64 NumPy twin.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit, prange

CHUNKS = 16        # fixed particle chunks: partial sums independent of the thread count
BLOCK = 512        # particles per block of a combination: a tile of rows stays in L1

_JIT = dict(cache=True, fastmath=True, error_model="numpy")


@lru_cache(maxsize=8)
def _bounds(N: int):
    edges = np.linspace(0, N, CHUNKS + 1).astype(np.int64)
    return edges[:-1], edges[1:]


# -- dot products: acc[i.., j..] += R[i.., b0:b1] V[j.., b0:b1]ᵀ ---------------------------
@njit(inline="always", **_JIT)
def _dot4x4(R, V, i, j, b0, b1, acc):
    r0, r1, r2, r3 = R[i, b0:b1], R[i + 1, b0:b1], R[i + 2, b0:b1], R[i + 3, b0:b1]
    v0, v1, v2, v3 = V[j, b0:b1], V[j + 1, b0:b1], V[j + 2, b0:b1], V[j + 3, b0:b1]
    s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = 0.0
    s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = 0.0
    for p in range(b1 - b0):
        a0, a1 = np.float64(r0[p]), np.float64(r1[p])
        a2, a3 = np.float64(r2[p]), np.float64(r3[p])
        w0, w1, w2, w3 = v0[p], v1[p], v2[p], v3[p]
        s00 += a0 * w0
        s01 += a0 * w1
        s02 += a0 * w2
        s03 += a0 * w3
        s10 += a1 * w0
        s11 += a1 * w1
        s12 += a1 * w2
        s13 += a1 * w3
        s20 += a2 * w0
        s21 += a2 * w1
        s22 += a2 * w2
        s23 += a2 * w3
        s30 += a3 * w0
        s31 += a3 * w1
        s32 += a3 * w2
        s33 += a3 * w3
    acc[i, j] += s00
    acc[i, j + 1] += s01
    acc[i, j + 2] += s02
    acc[i, j + 3] += s03
    acc[i + 1, j] += s10
    acc[i + 1, j + 1] += s11
    acc[i + 1, j + 2] += s12
    acc[i + 1, j + 3] += s13
    acc[i + 2, j] += s20
    acc[i + 2, j + 1] += s21
    acc[i + 2, j + 2] += s22
    acc[i + 2, j + 3] += s23
    acc[i + 3, j] += s30
    acc[i + 3, j + 1] += s31
    acc[i + 3, j + 2] += s32
    acc[i + 3, j + 3] += s33


@njit(inline="always", **_JIT)
def _dot4x1(R, V, i, j, b0, b1, acc):
    r0, r1, r2, r3 = R[i, b0:b1], R[i + 1, b0:b1], R[i + 2, b0:b1], R[i + 3, b0:b1]
    v = V[j, b0:b1]
    s0 = s1 = s2 = s3 = 0.0
    for p in range(b1 - b0):
        w = v[p]
        s0 += np.float64(r0[p]) * w
        s1 += np.float64(r1[p]) * w
        s2 += np.float64(r2[p]) * w
        s3 += np.float64(r3[p]) * w
    acc[i, j] += s0
    acc[i + 1, j] += s1
    acc[i + 2, j] += s2
    acc[i + 3, j] += s3


@njit(inline="always", **_JIT)
def _dot1x1(R, V, i, j, b0, b1, acc):
    r, v = R[i, b0:b1], V[j, b0:b1]
    s = 0.0
    for p in range(b1 - b0):
        s += np.float64(r[p]) * v[p]
    acc[i, j] += s


@njit(**_JIT)
def _block_dot(R, V, rows, b0, b1, acc):
    """acc[:k, :rows] += R[:, b0:b1] V[:rows, b0:b1]ᵀ: 4 x 4 tiles, then the edges."""
    k = R.shape[0]
    k4, m4 = k - k % 4, rows - rows % 4
    for i in range(0, k4, 4):
        for j in range(0, m4, 4):
            _dot4x4(R, V, i, j, b0, b1, acc)
        for j in range(m4, rows):
            _dot4x1(R, V, i, j, b0, b1, acc)
    for i in range(k4, k):
        for j in range(rows):
            _dot1x1(R, V, i, j, b0, b1, acc)


# -- combinations: out[j.., b0:b1] += C[i.., j..]ᵀ R[i.., b0:b1] ---------------------------
@njit(inline="always", **_JIT)
def _comb8x4(C, R, i, j, b0, b1, out):
    """Eight stored rows into four output rows: each converted row value serves 4 sums."""
    r0, r1, r2, r3 = R[i, b0:b1], R[i + 1, b0:b1], R[i + 2, b0:b1], R[i + 3, b0:b1]
    r4, r5, r6, r7 = R[i + 4, b0:b1], R[i + 5, b0:b1], R[i + 6, b0:b1], R[i + 7, b0:b1]
    o0, o1, o2, o3 = out[j, b0:b1], out[j + 1, b0:b1], out[j + 2, b0:b1], out[j + 3, b0:b1]
    c = C[i:i + 8, j:j + 4]
    c00, c01, c02, c03 = c[0, 0], c[0, 1], c[0, 2], c[0, 3]
    c10, c11, c12, c13 = c[1, 0], c[1, 1], c[1, 2], c[1, 3]
    c20, c21, c22, c23 = c[2, 0], c[2, 1], c[2, 2], c[2, 3]
    c30, c31, c32, c33 = c[3, 0], c[3, 1], c[3, 2], c[3, 3]
    c40, c41, c42, c43 = c[4, 0], c[4, 1], c[4, 2], c[4, 3]
    c50, c51, c52, c53 = c[5, 0], c[5, 1], c[5, 2], c[5, 3]
    c60, c61, c62, c63 = c[6, 0], c[6, 1], c[6, 2], c[6, 3]
    c70, c71, c72, c73 = c[7, 0], c[7, 1], c[7, 2], c[7, 3]
    for p in range(b1 - b0):
        a0, a1 = np.float64(r0[p]), np.float64(r1[p])
        a2, a3 = np.float64(r2[p]), np.float64(r3[p])
        a4, a5 = np.float64(r4[p]), np.float64(r5[p])
        a6, a7 = np.float64(r6[p]), np.float64(r7[p])
        o0[p] += (c00 * a0 + c10 * a1 + c20 * a2 + c30 * a3
                  + c40 * a4 + c50 * a5 + c60 * a6 + c70 * a7)
        o1[p] += (c01 * a0 + c11 * a1 + c21 * a2 + c31 * a3
                  + c41 * a4 + c51 * a5 + c61 * a6 + c71 * a7)
        o2[p] += (c02 * a0 + c12 * a1 + c22 * a2 + c32 * a3
                  + c42 * a4 + c52 * a5 + c62 * a6 + c72 * a7)
        o3[p] += (c03 * a0 + c13 * a1 + c23 * a2 + c33 * a3
                  + c43 * a4 + c53 * a5 + c63 * a6 + c73 * a7)


@njit(inline="always", **_JIT)
def _comb8(C, R, i, j, b0, b1, out):
    """Eight stored rows into one output row: one load and one store per 8 multiply-adds."""
    r0, r1, r2, r3 = R[i, b0:b1], R[i + 1, b0:b1], R[i + 2, b0:b1], R[i + 3, b0:b1]
    r4, r5, r6, r7 = R[i + 4, b0:b1], R[i + 5, b0:b1], R[i + 6, b0:b1], R[i + 7, b0:b1]
    c0, c1, c2, c3 = C[i, j], C[i + 1, j], C[i + 2, j], C[i + 3, j]
    c4, c5, c6, c7 = C[i + 4, j], C[i + 5, j], C[i + 6, j], C[i + 7, j]
    o = out[j, b0:b1]
    for p in range(b1 - b0):
        o[p] += (c0 * np.float64(r0[p]) + c1 * np.float64(r1[p])
                 + c2 * np.float64(r2[p]) + c3 * np.float64(r3[p])
                 + c4 * np.float64(r4[p]) + c5 * np.float64(r5[p])
                 + c6 * np.float64(r6[p]) + c7 * np.float64(r7[p]))


@njit(inline="always", **_JIT)
def _comb1(C, R, i, j, b0, b1, out):
    r, c, o = R[i, b0:b1], C[i, j], out[j, b0:b1]
    for p in range(b1 - b0):
        o[p] += c * np.float64(r[p])


@njit(**_JIT)
def _block_combine(C, R, b0, b1, out):
    """out[:, b0:b1] += Cᵀ R[:, b0:b1] in 8 x 4 tiles (an 8-row tile of R stays in L1)."""
    k, m = C.shape
    k8, m4 = k - k % 8, m - m % 4
    for i in range(0, k8, 8):
        for j in range(0, m4, 4):
            _comb8x4(C, R, i, j, b0, b1, out)
        for j in range(m4, m):
            _comb8(C, R, i, j, b0, b1, out)
    for i in range(k8, k):
        for j in range(m):
            _comb1(C, R, i, j, b0, b1, out)


# -- the three passes ------------------------------------------------------------------------
@njit(parallel=True, **_JIT)
def _rows_dot(R, V, lo, hi):
    part = np.zeros((len(lo), R.shape[0], V.shape[0]))
    for c in prange(len(lo)):           # a whole chunk per tile: the sums stay in registers
        _block_dot(R, V, V.shape[0], lo[c], hi[c], part[c])
    return part


@njit(parallel=True, **_JIT)
def _combine_rows(C, R, out, lo, hi):
    for c in prange(len(lo)):
        for b0 in range(lo[c], hi[c], BLOCK):
            _block_combine(C, R, b0, min(b0 + BLOCK, hi[c]), out)


@njit(parallel=True, **_JIT)
def _mean_and_cross(C, R, Z, lo, hi, rows, single):
    k, m = C.shape
    part = np.zeros((len(lo), k, rows))
    for c in prange(len(lo)):
        for b0 in range(lo[c], hi[c], BLOCK):
            b1 = min(b0 + BLOCK, hi[c])
            _block_combine(C, R, b0, b1, Z)     # Z += Cᵀ R on this block
            if single:                          # the stored values are float32
                for j in range(m):
                    zb = Z[j, b0:b1]
                    for p in range(b1 - b0):
                        zb[p] = np.float64(np.float32(zb[p]))
            if rows:                            # R Hᵀ while the block of R is still in cache
                _block_dot(R, Z, rows, b0, b1, part[c])
    return part


def rows_dot(R, V):
    """R Vᵀ (k, m) in float64 for rows R (k, N) (float32 or float64) and V (m, N)."""
    lo, hi = _bounds(R.shape[1])
    return _rows_dot(R, np.ascontiguousarray(V, np.float64), lo, hi).sum(axis=0)


def combine_rows(C, R, out=None):
    """Cᵀ R (m, N) in float64 for rows R (k, N) and coefficients C (k, m); with ``out``
    (m, N), C-contiguous float64, the product is added into it in place."""
    if out is None:
        out = np.zeros((C.shape[1], R.shape[1]))
    lo, hi = _bounds(R.shape[1])
    _combine_rows(np.ascontiguousarray(C, np.float64), R, out, lo, hi)
    return out


def mean_and_cross(C, R, Z, rows: int):
    """Z <- round(Z + Cᵀ R) in place (round: to R's dtype); returns R Z[:rows]ᵀ (k, rows)
    when ``rows`` > 0, else None.  Z must be C-contiguous float64."""
    lo, hi = _bounds(R.shape[1])
    part = _mean_and_cross(np.ascontiguousarray(C, np.float64), R, Z, lo, hi, rows,
                           R.dtype == np.float32)
    return part.sum(axis=0) if rows else None


def warm_up() -> None:
    """Compile (or load from the disk cache) the three passes for both storage dtypes."""
    for dt in (np.float32, np.float64):
        R = np.zeros((1, 1), dt)
        V, C = np.zeros((1, 1)), np.zeros((1, 1))
        rows_dot(R, V)
        combine_rows(C, R)
        mean_and_cross(C, R, V.copy(), 1)
