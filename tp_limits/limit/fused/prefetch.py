"""A software prefetch for the plain tiles (tiles_plain.py): one LLVM intrinsic call.

The update fused into the forward pass reads each of the d rows of a chunk of
particles in short pieces, streams too many and too short for the hardware
prefetchers; asking for the lines ahead of time is what made the fused pass pay in
tiles.py (docs/performance.md).  ``llvm.prefetch`` is a hint: it never faults and
changes no result.
"""
from __future__ import annotations

import llvmlite.ir as ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

LINE = 8            # float64 per 64-byte cache line


@intrinsic
def _prefetch(typingctx, A, r, c):
    """Prefetch the line of A[r, c] (a C-ordered float64 matrix), for writing."""
    if not (isinstance(A, types.Array) and A.ndim == 2 and A.dtype == types.float64):
        return None

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        rs = cgutils.unpack_tuple(builder, arr.strides, 2)[0]
        intp = context.get_value_type(types.intp)
        row = context.cast(builder, args[1], signature.args[1], types.intp)
        col = context.cast(builder, args[2], signature.args[2], types.intp)
        offset = builder.add(builder.mul(row, builder.sdiv(rs, ir.Constant(intp, 8))), col)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
            "llvm.prefetch.p0i8")
        ptr = builder.bitcast(builder.gep(arr.data, [offset]), i8p)
        builder.call(fn, [ptr, ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(A, r, c), codegen


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def prefetch_row(A, r, start, count):
    """Prefetch the lines of A[r, start:start + count] that lie inside the row."""
    stop = min(start + count, A.shape[1])
    for c in range(start, stop, LINE):
        _prefetch(A, r, c)
