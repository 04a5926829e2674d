"""How the sweep cuts the particles into blocks and reads them.

Particles are stored feature-major (U[d, N], V[d_out, N], the optimizer's state
beside them) and processed in blocks (:func:`block_size`) small enough to stay in
L2 while the block is visited once per input.  A block of a (rows, N) array is the
pair (A, a): its row k is the slice ``A[k, a:a + m]``, a 1-d contiguous view that
Numba types as C-ordered, so loops over it vectorize; the 2-d slice
``A[:, a:a + m]`` would not (its rows get run-time strides and lose SIMD).
Float64 particles are worked on in place this way (a = the block's first column):
the first pass over a block pulls it from memory while it computes, and modified
lines go back as the cache evicts them.  Float32 storage (and the gemm path) is
copied into float64 scratch per block and written back (:func:`block_of`; a = 0).
Each block writes its own row of the output (no atomics; the host sums rows in a
fixed order), so results do not depend on the thread count, and the per-block sums
double as batch means for the Monte Carlo standard error.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import overload

_FAST = dict(fastmath=True, error_model="numpy", cache=True)

# With contiguous rows, plain vectorized passes beat small BLAS gemms up to d = 64
# (docs/performance.md); BLAS takes over only for wide inputs.
BLAS_MIN_D = 128     # from this input dimension on, pre-activations come from BLAS gemm
BLAS_MIN_B = 4       # ... and the Z^U update too, from this batch size on
L2_BUDGET = 768 * 1024   # bytes of per-block scratch meant to stay in a core's L2
MIN_BLOCK, MAX_BLOCK = 256, 8192


def block_size(d: int, d_out: int, B: int, E: int, N: int, stats: bool = False) -> int:
    """Particles per block: the largest power of two whose scratch fits ``L2_BUDGET``.

    Per particle a block holds in L2 (in place, or as a float64 copy) Z^U and
    Z^{nV}, and in float64 scratch the batch's pre-activations, φ′-weighted errors
    and φ values (3B), two scratch rows (the forward pass's chunk of pre-activation
    rows is a fixed 12 KB), on the gemm path the pre-activation rows of the inputs
    and the Z^U increment, and with statistics the (h, h_0, x) rows of the eval
    inputs.  A fixed block too large for L2 runs several times slower
    (docs/performance.md).  The block is kept between 256 and 8192 particles and
    small enough that N holds at least 32 blocks, so the batch-means error bar has
    degrees of freedom.
    """
    per = 8 * (d + d_out + 3 * B + 2 + (max(B, E) + d if d >= BLAS_MIN_D else 0)
               + (3 * E if stats else 0))
    b = MIN_BLOCK
    while b < MAX_BLOCK and 2 * b * per <= L2_BUDGET and 2 * b * 32 <= max(N, 1):
        b *= 2
    return b


class Block(NamedTuple):
    """Particles a sweep works on at once: rows ``U[k, a:a + m]`` of Z^U, ``V[o, a:a + m]``
    of Z^{nV} (in place, or a float64 copy with a = 0), their weights ``w`` (one entry
    for equal weights, else m) and ``col``, the particles' first column in the
    run's arrays (the φ cache is indexed by it)."""

    U: object
    V: object
    a: int
    m: int
    w: object
    col: int


@njit(inline="always", **_FAST)
def part(b, c0, mc):
    """The particles c0 .. c0+mc of block b."""
    w = b.w if b.w.shape[0] == 1 else b.w[c0:c0 + mc]
    return Block(b.U, b.V, b.a + c0, mc, w, b.col + c0)


@njit(**_FAST)
def load_block(A, a0, m):
    """float64 C-ordered copy of the columns a0 .. a0+m of A (rows copied as 1-d C slices)."""
    Ab = np.empty((A.shape[0], m))
    for k in range(A.shape[0]):
        Ab[k, :] = A[k, a0:a0 + m]
    return Ab


@njit(**_FAST)
def store_block(Ab, A, a0):
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
                return load_block(A, a0, m), 0, True
            return A, a0, False
        return in_place
    return lambda A, a0, m, copy: (load_block(A, a0, m), 0, True)
