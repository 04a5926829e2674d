"""The three passes over a family's stored rows, on each backend (docs/theory.md §4.6, §4.7).

For stored rows R (k, N) in the storage dtype and float64 particle arrays:

    rows_times(R, V)             = R Vᵀ                      (k, m)
    times_rows(C, R)             = Cᵀ R                      (m, N)
    mean_and_cross(C, R, Z, w)   : Z <- round(Z + Cᵀ R) in place; R Zᵀ (k, m) if w

``round`` is the storage rounding (the hats that will be stored are the ones
the particles use).  Sums over the particle axis are float64 in every case.
The implementation is chosen once per run from the backend:

* :class:`HostPasses` (NumPy): BLAS for float64 rows, the mean and the cross
  products of ``mean_and_cross`` in one pass over cache-sized column blocks;
  the fused Numba kernels of mixed_precision.py for float32 rows;
* :class:`ArrayPasses` (any array module, CuPy): one library product per pass
  for float64 rows; float32 rows are cast to float64 in large column chunks
  (correct, but the cast costs traffic: float64 storage is the fast path on a
  GPU, where memory is seldom what limits N).
"""
from __future__ import annotations

import numpy as np

from .mixed_precision import combine_rows, mean_and_cross, rows_dot

CACHE_ELEMENTS = 1 << 19     # float64 elements of one host block of a history (4 MiB: in cache)
DEVICE_CHUNK = 1 << 24       # float64 elements of one device cast chunk (128 MiB)


def _chunks(rows, elements: int):
    """Column slices of ``rows`` (k, N) of about ``elements`` elements each."""
    k, N = rows.shape
    width = max(256, elements // max(k, 1))
    return [slice(j, min(j + width, N)) for j in range(0, N, width)]


class HostPasses:
    """NumPy: BLAS for float64 rows, the mixed-precision Numba kernels for float32."""

    xp = np

    @staticmethod
    def rows_times(R, V):
        return R @ V.T if R.dtype == np.float64 else rows_dot(R, V)

    @staticmethod
    def times_rows(C, R):
        return C.T @ R if R.dtype == np.float64 else combine_rows(C, R)

    @staticmethod
    def mean_and_cross(C, R, Z, want_cross: bool):
        if R.dtype != np.float64:
            return mean_and_cross(C, R, Z, want_cross)
        cross = np.zeros((len(R), len(Z))) if want_cross else None
        for c in _chunks(R, CACHE_ELEMENTS):   # one pass: mean, then cross while in cache
            Z[:, c] += C.T @ R[:, c]
            if want_cross:
                cross += R[:, c] @ Z[:, c].T
        return cross


class ArrayPasses:
    """Any array module (CuPy): whole-array products; float32 rows cast chunk by chunk."""

    def __init__(self, xp):
        self.xp = xp

    def _cast(self, R):
        """(slice, float64 block of R) over the column chunks (one block for float64 R)."""
        if R.dtype == np.float64:
            return [(slice(None), R)]
        return [(c, R[:, c].astype(np.float64)) for c in _chunks(R, DEVICE_CHUNK)]

    def rows_times(self, R, V):
        out = self.xp.zeros((len(R), len(V)))
        for c, Rc in self._cast(R):
            out += Rc @ V[:, c].T
        return out

    def times_rows(self, C, R):
        out = self.xp.empty((C.shape[1], R.shape[1]))
        for c, Rc in self._cast(R):
            out[:, c] = C.T @ Rc
        return out

    def mean_and_cross(self, C, R, Z, want_cross: bool):
        cross = self.xp.zeros((len(R), len(Z))) if want_cross else None
        for c, Rc in self._cast(R):
            Zc = Z[:, c] + C.T @ Rc
            Z[:, c] = Zc.astype(R.dtype)           # round to what will be stored
            if want_cross:
                cross += Rc @ Z[:, c].T
        return cross


def passes_for(backend):
    """The passes of ``backend`` (chosen once per run)."""
    return HostPasses() if backend.name == "numpy" else ArrayPasses(backend.xp)
