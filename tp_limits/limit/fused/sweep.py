"""The fused particle kernel of the one-hidden-layer limit (docs/theory.md §2): the driver.

One call = one sweep over particle memory = one step of the limit, on the record
:class:`~.contract.SweepArgs` (its docstring says what a sweep computes).  Per
block of particles (blocks.py), in parallel over blocks:

1. update.py moves the block with the batch (the optimizer's rule, rule.py);
2. forward.py adds the block's weighted sums for the next batch and the eval
   inputs to the block's row of the output (columns.py), and the statistics.

With the plain rule and B <= FUSE_MAX_B the step of Z^U is taken inside the
forward pass's first tile (tiles.update_preact_tile), so the block is read from
memory, moved and used for the forward inputs in one pass (step 1 then moves
Z^{nV} only).  With a φ cache (phi.py) the next batch's φ(Z^U ξ) stay in memory
for the next sweep's update.  Each block writes its own row of ``out`` (no
atomics), so results do not depend on the thread count.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .blocks import BLAS_MIN_D, Block, block_of, part, store_block
from .contract import SweepArgs, SweepData, sweep_args
from .forward import forward_sums, preacts, stats_block, sums_of_rows
from .rule import rule_plain
from .tiles import PREFETCH_AHEAD
from .tiling import FUSE_MAX_B
from .update import update_block

#: without the φ cache, the fused path runs the update and the forward pass chunk by
#: chunk, the forward tiles prefetching the next chunk, which the update's pass over
#: the batch then finds in cache (docs/performance.md)
UPDATE_CHUNK = 512
#: ... from this input dimension on; below it the pass over the batch moves too little
#: data for the chunks' extra passes to pay (docs/performance.md)
CHUNKED_UPDATE_MIN_D = 8


def sweep(args: SweepArgs, out) -> None:
    """One fused step; ``out`` must be zeroed, shape (nblocks, K) (columns.py).

    U, V, U0, SU and SV share one storage dtype (float64, or float32 copied into
    float64 scratch per block, blocks.block_of); U and U0 are C-contiguous.
    """
    a = args.data
    dtypes = [x.dtype for x in (a.U, a.V, a.U0, a.SU, a.SV)]
    if len(set(dtypes)) != 1:
        # One dtype means one copy-or-in-place choice, so one block offset for all
        # (block_of).  Checked here, before Numba is asked for a kernel: a mixed call
        # would otherwise compile a whole specialization only to refuse it.
        raise TypeError("sweep: U, V, U0, SU and SV must share one storage dtype, got "
                        + ", ".join(map(str, dtypes)))
    if not (a.U.flags.c_contiguous and a.U0.flags.c_contiguous):
        # the register tiles read rows of particles as contiguous vectors (tiles.py)
        raise TypeError("sweep: U and U0 must be C-contiguous (d, N) arrays, one row per "
                        "coordinate of the particles")
    sweep_kernel(*args, out)


@njit(parallel=True, fastmath=True, error_model="numpy", cache=True)
def sweep_kernel(a, phi, rule, hyper_u, hyper_v, build, out):
    """The compiled sweep behind :func:`sweep` (which checks the storage dtypes first):
    ``a`` the SweepData, then the compile-time choices of SweepArgs."""
    U, V, w, Xb, Xn, Xe = a.U, a.V, a.w, a.Xb, a.Xn, a.Xe
    d, N = U.shape
    do = V.shape[0]
    Bn, E = Xn.shape[0], Xe.shape[0]
    nb = (N + a.block - 1) // a.block
    uniform = w.shape[0] == 1
    use_blas = d >= BLAS_MIN_D
    keep = a.cache.shape[1] >= Bn > 0
    with_stats = a.stats and E > 0
    # the next batch and, unless their statistics are asked for, the eval inputs share
    # one set of tiles: their columns of ``out`` follow one another
    Xf = Xn if with_stats else np.concatenate((Xn, Xe))
    nkeep = Bn if keep else 0
    # the plain rule: the Z^U step rides on the forward pass's tiles (one pass over the
    # block for both) where the block is worked on in place; it needs a forward input
    fuse = (rule_plain(rule) and not use_blas and a.scale_u != 0.0
            and 0 < Xb.shape[0] <= FUSE_MAX_B and Xf.shape[0] > 0)
    moves = Xb.shape[0] > 0
    for bi in prange(nb):
        # what is compiled in, and this run's choice (made in the loop: a parallel loop
        # takes no nested tuple from outside it)
        tiles = (build, a.tiles)
        a0 = bi * a.block
        m = min(N, a0 + a.block) - a0
        Ub, pa, copied = block_of(U, a0, m, use_blas)
        Vb = block_of(V, a0, m, use_blas)[0]      # the same dtype: the same offset pa
        # the optimizer's state: read only when the block moves (else a stand-in of the type)
        Su = block_of(a.SU, a0, m, use_blas)[0] if moves else Ub
        Sv = block_of(a.SV, a0, m, use_blas)[0] if moves else Vb
        b = Block(Ub, Vb, pa, m, w[a0:a0 + m] if not uniform else w[:1], a0)
        acc = out[bi]
        Xu = Xb if fuse and not copied else Xb[:0]
        no_g = np.empty((0, 0))         # G when there is no batch (the forward ignores it)
        # without the cache the fused update goes chunk by chunk: the forward tiles of one
        # chunk prefetch the next, which the update's pass over the batch reads first
        step = (UPDATE_CHUNK if Xu.shape[0] > 0 and not a.cached and d >= CHUNKED_UPDATE_MIN_D
                else m)
        ahead = UPDATE_CHUNK if step < m else PREFETCH_AHEAD
        for c0 in range(0, m, step):
            c = part(b, c0, min(m, c0 + step) - c0)
            G = no_g
            if moves:
                G = update_block(a, phi, rule, hyper_u, hyper_v, tiles, c, Su, Sv,
                                 Xu.shape[0] > 0)
            forward_sums(a, phi, tiles, c, Xf, use_blas, nkeep, acc, Xu, G, ahead)
        if copied and moves:
            store_block(Ub, U, a0)
            store_block(Vb, V, a0)
            store_block(Su, a.SU, a0)
            store_block(Sv, a.SV, a0)
        if with_stats:                  # the eval pre-activations serve both sums
            ph, D = np.empty(m), np.empty(m)      # φ(h) and φ′ scratch rows
            He = preacts(tiles, Ub, pa, m, Xe, use_blas)
            sums_of_rows(He, Vb, pa, b.w, uniform, phi, ph, acc, Bn * do)
            U0b, u0a, _ = block_of(a.U0, a0, m, use_blas)
            H0 = preacts(tiles, U0b, u0a, m, Xe, use_blas)
            stats_block(He, H0, b.w, uniform, phi, D, acc, (Bn + E) * do)


def warm_up(phi: str, optimizer, dtype) -> None:
    """Compile (or load from the disk cache) the sweep for this φ, optimizer rule and
    storage dtype, on arrays of one particle: the types, not the sizes, select the
    compiled code."""
    one = np.zeros((1, 1), dtype)
    f64 = np.zeros((1, 1))
    _, h = optimizer.coordinate(0.0, 1.0, 0.0, 1)
    a = sweep_args(SweepData(one, one.copy(), np.ones(1), one.copy(), f64, f64, 0.0, 0.0, f64,
                             f64, False, 1), optimizer, h, h, phi)
    sweep(a, np.zeros((1, 2)))
