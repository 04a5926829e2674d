"""Passes over single-precision hat histories with double-precision sums (docs/theory.md §4).

The deep engine can store its histories (k stored vectors or hats of length
N) in float32 to halve memory and memory traffic.  Its products over the
particle axis must still accumulate in float64: single-precision sums of
10⁵ terms lose about five digits, and the ill-conditioned Gram inverses of
long runs amplify that into a visible bias.  BLAS has no mixed-precision
product, so these kernels read the float32 rows once and accumulate in
float64:

    rows_dot(R, V)            = R Vᵀ            (k, m)   R: (k, N) float32, V: (m, N)
    combine_rows(C, R)        = Cᵀ R            (m, N)   C: (k, m)
    mean_and_cross(C, R, Z)   = H = round32(Z + Cᵀ R),  R Hᵀ      (new hats and their
                                                                 cross products, one pass)

Particles are split into a fixed number of chunks (not one per thread), each
chunk writes its own partial sums and the host adds them in order, so results
do not depend on the thread count.  tests/test_limit_deep_mc.py checks every
kernel against its float64 NumPy twin.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

CHUNKS = 16        # fixed particle chunks: partial sums independent of the thread count
BLOCK = 512        # particles per inner block: k x BLOCK float32 rows stay in L2


def _bounds(N: int):
    edges = np.linspace(0, N, CHUNKS + 1).astype(np.int64)
    return edges[:-1], edges[1:]


@njit(cache=True, fastmath=True, error_model="numpy")
def _block_dot(R, V, b0, b1, acc):
    """acc += R[:, b0:b1] V[:, b0:b1]ᵀ, summed in float64."""
    for i in range(R.shape[0]):
        rb = R[i, b0:b1]
        for j in range(V.shape[0]):
            vb = V[j, b0:b1]
            s = 0.0
            for p in range(b1 - b0):
                s += rb[p] * vb[p]
            acc[i, j] += s


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _rows_dot(R, V, lo, hi):
    part = np.zeros((len(lo), R.shape[0], V.shape[0]))
    for c in prange(len(lo)):
        for b0 in range(lo[c], hi[c], BLOCK):
            _block_dot(R, V, b0, min(b0 + BLOCK, hi[c]), part[c])
    return part


@njit(cache=True, fastmath=True, error_model="numpy")
def _block_combine(C, R, b0, b1, out):
    """out[:, b0:b1] += Cᵀ R[:, b0:b1] (each float32 row read once, from L1)."""
    for i in range(R.shape[0]):
        rb = R[i, b0:b1]
        for j in range(C.shape[1]):
            w = C[i, j]
            ob = out[j, b0:b1]
            for p in range(b1 - b0):
                ob[p] += w * rb[p]


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _combine_rows(C, R, out, lo, hi):
    for c in prange(len(lo)):
        for b0 in range(lo[c], hi[c], BLOCK):
            _block_combine(C, R, b0, min(b0 + BLOCK, hi[c]), out)


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _mean_and_cross(C, R, Z, lo, hi, want_cross):
    k, m = C.shape
    part = np.zeros((len(lo), k, m))
    for c in prange(len(lo)):
        for b0 in range(lo[c], hi[c], BLOCK):
            b1 = min(b0 + BLOCK, hi[c])
            _block_combine(C, R, b0, b1, Z)     # Z += Cᵀ R on this block
            for j in range(m):                  # the stored values are float32
                zb = Z[j, b0:b1]
                for p in range(b1 - b0):
                    zb[p] = np.float64(np.float32(zb[p]))
            if want_cross:                      # R Hᵀ while the rows are still in cache
                _block_dot(R, Z, b0, b1, part[c])
    return part


def rows_dot(R, V):
    """R Vᵀ (k, m) in float64 for float32 rows R (k, N) and float64 V (m, N)."""
    lo, hi = _bounds(R.shape[1])
    return _rows_dot(R, np.ascontiguousarray(V, np.float64), lo, hi).sum(axis=0)


def combine_rows(C, R):
    """Cᵀ R (m, N) in float64 for float32 rows R (k, N) and coefficients C (k, m)."""
    out = np.zeros((C.shape[1], R.shape[1]))
    lo, hi = _bounds(R.shape[1])
    _combine_rows(np.ascontiguousarray(C, np.float64), R, out, lo, hi)
    return out


def mean_and_cross(C, R, Z, want_cross: bool):
    """Z <- round32(Z + Cᵀ R) in place; returns R Zᵀ (k, m) when ``want_cross``, else None."""
    lo, hi = _bounds(R.shape[1])
    part = _mean_and_cross(np.ascontiguousarray(C, np.float64), R, Z, lo, hi, want_cross)
    return part.sum(axis=0) if want_cross else None


def warm_up() -> None:
    """Compile (or load from the disk cache) the three passes, on one-element arrays."""
    R = np.zeros((1, 1), np.float32)
    V, C = np.zeros((1, 1)), np.zeros((1, 1))
    rows_dot(R, V)
    combine_rows(C, R)
    mean_and_cross(C, R, V.copy(), True)
