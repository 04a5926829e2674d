"""Host arrays for the compiled kernels: data on a cache line (64 bytes), and, where a
run fills them piecewise, written once before it (``zeros_committed``).

NumPy hands out a large array 16 bytes past a page boundary (its allocator's
header), so on a machine with 64-byte vectors (AVX-512) every vector load of a
particle row straddles two cache lines, and each one costs two line accesses.
The one-hidden-layer sweep reads its particles as rows ``U[k, a0:a0 + m]`` with
block offsets ``a0`` that are multiples of the block size, so once the array
starts on a line, every row does too when N · itemsize is a multiple of 64
(N a multiple of 8 in float64, of 16 in float32).  On the sweep this is worth a
few per cent (docs/performance.md, "One-hidden-layer limit").

A device allocator aligns its blocks anyway; the CuPy backend uses plain
``zeros`` and leaves arrays as they are (engine/backend.py).
"""
from __future__ import annotations

import math

import numpy as np

LINE = 64


def is_aligned(a: np.ndarray) -> bool:
    """Whether ``a`` is C-contiguous with its data on a cache line (an empty one is)."""
    return a.flags.c_contiguous and (a.size == 0 or a.ctypes.data % LINE == 0)


def _on_a_line(alloc, shape, dtype) -> np.ndarray:
    """A byte buffer from ``alloc`` one line longer than needed, viewed from its first
    line boundary as an array of ``shape`` and ``dtype``."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = alloc(nbytes + LINE, np.uint8)
    start = -raw.ctypes.data % LINE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def empty_aligned(shape, dtype=np.float64) -> np.ndarray:
    """``np.empty(shape, dtype)`` whose data start on a cache line."""
    return _on_a_line(np.empty, shape, dtype)


def zeros_aligned(shape, dtype=np.float64) -> np.ndarray:
    """``np.zeros(shape, dtype)`` on a cache line.  Zeroed by the allocator, as np.zeros
    is: a large buffer's pages are committed only when first written.  For arrays the
    first sweep writes whole (the one-hidden-layer φ cache, optimizer state); arrays
    filled a slice at a time by parallel kernels take ``zeros_committed``."""
    return _on_a_line(np.zeros, shape, dtype)


def zeros_committed(shape, dtype=np.float64) -> np.ndarray:
    """Zeros on a cache line, written once now, so that every page of the buffer is in
    memory before the compiled kernels first write it.

    For arrays that a run fills a slice at a time from inside parallel kernels (the
    deep engine's histories): first writes into fresh memory there are slow.  NumPy
    asks the kernel for huge pages on large buffers, and the first write to each is a
    fault that zeroes 2 MB (and may compact memory) inside the parallel call
    (docs/performance.md, "Deep limit")."""
    a = empty_aligned(shape, dtype)
    a.fill(0)
    return a


def as_aligned(a: np.ndarray) -> np.ndarray:
    """``a`` itself if it is C-contiguous on a cache line, else a copy that is."""
    if is_aligned(a):
        return a
    out = empty_aligned(a.shape, a.dtype)
    out[...] = a
    return out
