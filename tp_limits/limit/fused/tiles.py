"""Register-tiled pre-activations of the one-hidden-layer sweep, written as LLVM IR
(docs/performance.md); tiling.py chooses between these and the plain ones.

For the rows x_i of an input matrix X and a block of particles (columns of Z^U),

    H[i, j] = Σ_k Z^U[k, a + j] · X[i, k]        (k = 0 .. d-1, j = 0 .. m-1),

the pre-activations h_i = Z^U x_i of docs/theory.md §2 for several inputs at once,
and optionally, in the same pass, the SGD step of Z^U before them.

Why a hand-built loop nest: LLVM vectorizes only innermost loops, so a loop
over particles written in Numba keeps its running sums h in memory and reloads
them for every group of rows of Z^U; each multiply-add then costs about one
load, and such passes ran at about half the dgemm rate.  Here the loops are
emitted as LLVM IR with explicit vectors: a tile of 16 particles (two vectors
of 8 float64) keeps the running sums of up to MAX_Q inputs in registers while
k runs over the d rows, so each load of Z^U serves q fused multiply-adds and H
is written once.  Every sum is the chain

    h ← fma(Z^U[k, j], x_k, h),  k = 0, 1, .., d-1,  from h = 0,

the same for a particle in a vector tile and in the scalar tail past the last
whole tile, and independent of q and of how the inputs are grouped: the update
and the next sweep's forward pass get the same bits for the same input (the φ
cache relies on that).
"""
from __future__ import annotations

import llvmlite.ir as ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

LANES = 8        # float64 per vector: one 512-bit register (LLVM splits it where narrower)
WIDE = 2         # vectors per tile: 16 particles
MAX_Q = 6        # inputs per tile: 2·MAX_Q running sums and 2 rows fit the registers
#: particles ahead of the tile whose lines of the same row are prefetched.  Each
#: tile touches 128 bytes of each of the d rows, d streams too many and too short
#: for the hardware prefetchers: without it the update fused with the forward pass
#: does not pay (docs/performance.md, "One-hidden-layer limit")
PREFETCH_AHEAD = 64


def _matrices(*tys):
    return all(isinstance(t, types.Array) and t.ndim == 2 and t.dtype == types.float64
               for t in tys)


def _tiles_codegen(update):
    """The loop nests of preact_tile (``update`` False) or update_preact_tile (True): one
    per q = 1 .. MAX_Q behind a switch, so each has its running sums in registers."""

    def codegen(context, builder, signature, args):
        tys = signature.args
        if update:
            Uv, av, mv, Cv, Gv, lrv, Xv, i0v, qv, Hv, aheadv = args
            tU, ta, tm, tC, tG, tlr, tX, ti0, tq, tH, tahead = tys
        else:
            Uv, av, mv, Xv, i0v, qv, Hv = args
            tU, ta, tm, tX, ti0, tq, tH = tys
        intp = context.get_value_type(types.intp)
        i32 = ir.IntType(32)
        dbl = ir.DoubleType()
        vec = ir.VectorType(dbl, LANES)
        i8p = ir.IntType(8).as_pointer()
        vfma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fma.v{LANES}f64")
        sfma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(dbl, [dbl] * 3), "llvm.fma.f64")
        prefetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
            "llvm.prefetch.p0i8")

        def const(v):
            return ir.Constant(intp, v)

        def matrix(ty, val):
            """(array, address of [r, c]) of a 2-d float64 array, any strides."""
            arr = context.make_array(ty)(context, builder, val)
            rs, cs = (builder.sdiv(s, const(8))
                      for s in cgutils.unpack_tuple(builder, arr.strides, 2))
            return arr, lambda r, c: builder.gep(
                arr.data, [builder.add(builder.mul(r, rs), builder.mul(c, cs))])

        def index(v, t):
            return context.cast(builder, v, t, types.intp)

        Ua, U_at = matrix(tU, Uv)
        _, X_at = matrix(tX, Xv)
        _, H_at = matrix(tH, Hv)
        av, mv, i0v, qv = index(av, ta), index(mv, tm), index(i0v, ti0), index(qv, tq)
        ahead = index(aheadv, tahead) if update else const(PREFETCH_AHEAD)
        d = cgutils.unpack_tuple(builder, Ua.shape, 2)[0]
        if update:
            Ca, C_at = matrix(tC, Cv)
            _, G_at = matrix(tG, Gv)
            nb = cgutils.unpack_tuple(builder, Ca.shape, 2)[0]
            neg_lr = builder.fneg(context.cast(builder, lrv, tlr, types.float64))

        def x_of(r, k):                       # X[i0 + r, k]
            return builder.load(X_at(builder.add(i0v, const(r)), k))

        def coef(b, k):                       # −lr C[b, k]
            return builder.fmul(neg_lr, builder.load(C_at(b, k)))

        def vptr(ptr, w):
            return builder.bitcast(builder.gep(ptr, [const(w * LANES)]), vec.as_pointer())

        undef = ir.Constant(vec, ir.Undefined)
        splat_mask = ir.Constant(ir.VectorType(i32, LANES), [0] * LANES)

        def splat(x):
            return builder.shuffle_vector(
                builder.insert_element(undef, x, ir.Constant(i32, 0)), undef, splat_mask)

        tile = const(LANES * WIDE)
        n_tiles = builder.sdiv(mv, tile)
        first = builder.mul(n_tiles, tile)
        # the row being moved and the running sums live in allocas that LLVM
        # promotes to registers
        rows = [cgutils.alloca_once(builder, vec) for _ in range(WIDE)]
        sums = [[cgutils.alloca_once(builder, vec) for _ in range(WIDE)] for _ in range(MAX_Q)]
        srow = cgutils.alloca_once(builder, dbl)
        ssum = [cgutils.alloca_once(builder, dbl) for _ in range(MAX_Q)]

        def moved_row(k, base, slots, load, store, fma, g_at, prefetch_ahead):
            """Row k at ``base`` into ``slots`` (vectors, or one scalar), moved by the update
            and stored back."""
            if prefetch_ahead:
                for w in range(WIDE):
                    line = builder.gep(base, [builder.add(ahead, const(w * LANES))])
                    builder.call(prefetch, [builder.bitcast(line, i8p), ir.Constant(
                        i32, int(update)), ir.Constant(i32, 3), ir.Constant(i32, 1)])
            for w, slot in enumerate(slots):
                builder.store(load(base, w), slot)
            if not update:
                return
            with cgutils.for_range(builder, nb) as bl:
                c = coef(bl.index, k)
                for w, slot in enumerate(slots):
                    builder.store(fma(c, g_at(bl.index, w), builder.load(slot)), slot)
            for w, slot in enumerate(slots):
                store(builder.load(slot), base, w)

        def nest(Q):
            with cgutils.for_range(builder, n_tiles) as tl:      # whole tiles, in vectors
                j = builder.mul(tl.index, tile)
                for r in range(Q):
                    for s in sums[r]:
                        builder.store(ir.Constant(vec, [0.0] * LANES), s)
                with cgutils.for_range(builder, d) as kl:
                    k = kl.index
                    moved_row(
                        k, U_at(k, builder.add(av, j)), rows,
                        lambda p, w: builder.load(vptr(p, w), align=8),
                        lambda v, p, w: builder.store(v, vptr(p, w), align=8),
                        lambda c, g, u: builder.call(vfma, [splat(c), g, u]),
                        lambda b, w: builder.load(vptr(G_at(b, j), w), align=8), True)
                    us = [builder.load(s) for s in rows]
                    for r in range(Q):
                        xv = splat(x_of(r, k))
                        for w in range(WIDE):
                            s = sums[r][w]
                            builder.store(builder.call(vfma, [us[w], xv, builder.load(s)]), s)
                for r in range(Q):
                    for w in range(WIDE):
                        builder.store(builder.load(sums[r][w]), vptr(H_at(const(r), j), w),
                                      align=8)
            # the particles past the last whole tile: the same chains, one at a time
            with cgutils.for_range(builder, builder.sub(mv, first)) as jl:
                j = builder.add(first, jl.index)
                for r in range(Q):
                    builder.store(ir.Constant(dbl, 0.0), ssum[r])
                with cgutils.for_range(builder, d) as kl:
                    k = kl.index
                    moved_row(
                        k, U_at(k, builder.add(av, j)), [srow],
                        lambda p, w: builder.load(p),
                        lambda v, p, w: builder.store(v, p),
                        lambda c, g, u: builder.call(sfma, [c, g, u]),
                        lambda b, w: builder.load(G_at(b, j)), False)
                    u = builder.load(srow)
                    for r in range(Q):
                        builder.store(builder.call(sfma, [u, x_of(r, k), builder.load(ssum[r])]),
                                      ssum[r])
                for r in range(Q):
                    builder.store(builder.load(ssum[r]), H_at(const(r), j))

        done = builder.append_basic_block("tiles.done")
        switch = builder.switch(qv, done)
        for Q in range(1, MAX_Q + 1):
            block = builder.append_basic_block(f"tiles.q{Q}")
            switch.add_case(const(Q), block)
            builder.position_at_end(block)
            nest(Q)
            builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()

    return codegen


@intrinsic
def preact_tile(typingctx, U, a, m, X, i0, q, H):
    """H[r, j] = Σ_k U[k, a + j] X[i0 + r, k] for r < q (1 .. MAX_Q; other q do nothing),
    j < m; see the module docstring.  U and H are C-ordered float64 matrices (H at
    least q × m), X any float64 matrix."""
    if not (_matrices(U, X, H) and U.layout == "C" and H.layout == "C"):
        return None
    return types.void(U, a, m, X, i0, q, H), _tiles_codegen(False)


@intrinsic
def update_preact_tile(typingctx, U, a, m, C, G, lr, X, i0, q, H, ahead):
    """First U[k, a + j] −= lr Σ_b C[b, k] G[b, j] for j < m (the SGD step of Z^U,
    docs/theory.md §2, with C the batch ξ and G its φ′-weighted errors), then
    preact_tile with the moved particles.  Each row of the block is read once, moved,
    written back and used at once for the q inputs, so the update's memory traffic and
    the forward pass's arithmetic overlap.  U[k, j] moves by the chain
    u ← fma(−lr C[b, k], G[b, j], u), b = 0 .. B-1.  The lines of each row ``ahead``
    particles past the tile are prefetched (with write intent): PREFETCH_AHEAD where
    this tile is the first to read the block, the chunk width where the update's
    first pass reads the next chunk (see the sweep's UPDATE_CHUNK)."""
    if not (_matrices(U, C, G, X, H) and U.layout == "C" and H.layout == "C"):
        return None
    return types.void(U, a, m, C, G, lr, X, i0, q, H, ahead), _tiles_codegen(True)
