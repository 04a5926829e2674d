"""Scalar functions written once for NumPy arrays, Numba kernels and CUDA source.

A nonlinearity's kernel form (nonlinearities.py) and an optimizer's per-coordinate
rule (spec/optimizers/) are plain Python functions of floats built from ``+ - * /``,
comparisons, the helpers below and a few ``math`` functions.  Written that way, one
definition runs

* on NumPy (or CuPy) arrays, elementwise (the whole-array twin of the sweep);
* inside Numba kernels, where it is inlined and vectorizes;
* on a GPU, translated into a CUDA device function (engine/cuda_source.py).

The helpers:

* :func:`where` — ``cond ? a : b``: ``numpy.where`` on arrays, a select in Numba;
* :func:`fast_tanh` — a vectorizable tanh (≤ 4 ulp).  Without SVML,
  ``math.tanh``/``math.exp`` inside ``@njit`` are scalar libm calls (~20 ns each)
  that block SIMD vectorization of the particle loops; this one uses only
  ``+ - * /``, selects and a bit cast:

      expm1(y) = (2^k - 1) + 2^k q(r),   y = k ln2 + r,  |r| <= ln2/2,
      q(r)     = r + r²/2! + ... + r^13/13!   (truncation < 5e-18 relative),
      2^k      = the float64 whose bits are (k + 1023) << 52,
      tanh(x)  = sign(x) · e / (e + 2),  e = expm1(2|x|)   (|x| clipped at 20),

  with ln2 split into a high part exact in 32 bits and a low correction
  (Cody–Waite), so k·ln2_hi is exact for the k that occur.  Accuracy is tested
  against NumPy (≤ 4 ulp).  Called on an array outside Numba it is
  ``numpy.tanh``.  A general-purpose exp is deliberately absent: with ``fastmath``
  LLVM may reassociate the Cody–Waite reduction, which costs hundreds of ulp at
  |y| ~ 700.
"""
from __future__ import annotations

import math

import llvmlite.ir as lir
import numpy as np
from numba import njit, types
from numba.extending import intrinsic, overload

LOG2E = 1.4426950408889634
LN2_HI = 0.693145751953125            # ln 2 rounded to 17 bits: k * LN2_HI is exact
LN2_LO = 1.4286068203094173e-06       # ln 2 - LN2_HI


def where(cond, a, b):
    """``a`` where ``cond`` holds, else ``b`` (elementwise on arrays, a select in Numba,
    ``cond ? a : b`` in CUDA)."""
    return np.where(cond, a, b)


@overload(where, jit_options=dict(fastmath=True, error_model="numpy"))
def _where_scalar(cond, a, b):
    if isinstance(cond, types.Boolean):
        return lambda cond, a, b: a if cond else b
    return None


@intrinsic
def _bits_to_float(typingctx, bits):
    """Reinterpret an int64 as a float64 (a free bit cast in LLVM)."""
    if isinstance(bits, types.Integer) and bits.bitwidth == 64:
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], lir.DoubleType())
        return types.float64(bits), codegen
    return None


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def pow2(k):
    """2^k for an integer-valued float k in [-1022, 1023]."""
    return _bits_to_float((int(k) + 1023) << 52)


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def expm1_poly(r):
    """r + r²/2! + ... + r^13/13! by Horner's rule."""
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    return p * r


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def fast_expm1(y):
    """expm1(y) for y in [-40, 40] (the range tanh needs; callers clip)."""
    k = float(int(y * LOG2E + (0.5 if y >= 0.0 else -0.5)))
    r = (y - k * LN2_HI) - k * LN2_LO
    s = pow2(k)
    return (s - 1.0) + s * expm1_poly(r)


@njit(inline="always", fastmath=True, error_model="numpy", cache=True)
def _fast_tanh(x):
    a = min(abs(x), 20.0)                 # tanh(20) rounds to 1 in float64
    e = fast_expm1(2.0 * a)
    return math.copysign(e / (e + 2.0), x)    # llvm.copysign: no branch, vectorizes


def fast_tanh(x):
    """tanh: the vectorizable version in Numba (see the module docstring), ``numpy.tanh``
    on arrays."""
    return np.tanh(x)


@overload(fast_tanh, inline="always")
def _fast_tanh_scalar(x):
    if isinstance(x, types.Float):
        return lambda x: _fast_tanh(x)
    return None
