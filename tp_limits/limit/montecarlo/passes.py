"""The three passes over a family's stored rows, on each backend (docs/theory.md §4.6, §4.7).

For stored rows R (k, N) in the storage dtype and float64 particle arrays
(``zeros(shape, dtype)`` allocates such rows; on the host on cache lines and
written once before the run, see engine/aligned.py):

    rows_times(R, V)             = R Vᵀ                      (k, m)
    times_rows(C, R, out)        = Cᵀ R                      (m, N), added into ``out``
                                                             in place when given
    mean_and_cross(C, R, Z, r)   : Z <- round(Z + Cᵀ R) in place; R Z[:r]ᵀ (k, r) if r > 0

``round`` is the storage rounding (the hats that will be stored are the ones
the particles use); ``r`` is the number of new rows that will be stored
(evaluation rows riding along need no cross products).  Sums over the
particle axis are float64 in every case.  The implementation is chosen once
per run from the backend:

* :class:`HostPasses` (NumPy): the register-tiled Numba kernels of
  history_kernels.py for either storage dtype (skinny products are where
  BLAS is slowest; docs/performance.md, "Deep limit");
* :class:`ArrayPasses` (any array module): one library product per pass
  for float64 rows; float32 rows are cast to float64 in large column chunks
  (correct, but the cast costs traffic: float64 storage is the fast path on a
  GPU, where memory is seldom what limits N);

The cross products are taken from the new hats as they are stored, never from the
identity R (Z + Cᵀ R)ᵀ = R Zᵀ + N · Ch C with the family's hat Gram Ch = R Rᵀ/N, which
would let one read of R serve both halves: the identity is exact, but where the history is
nearly collinear the coefficients C are large and cancel, so N · Ch C carries an error
far above the cross products' size; the stored Gram then stops being a Gram matrix and
its factorization fails (a deep run of T = 200 diverged at step 73–84 on a GPU), while
cross products of the stored rows keep it positive semidefinite by construction.
(That one-read kernel was also no faster there: docs/performance.md, "On a GPU".)
"""
from __future__ import annotations

import numpy as np

from ...engine.aligned import zeros_committed
from . import history_kernels
from .gram import triangular_solver

DEVICE_CHUNK = 1 << 24       # float64 elements of one device cast chunk (128 MiB)


def _chunks(rows, elements: int):
    """Column slices of ``rows`` (k, N) of about ``elements`` elements each."""
    k, N = rows.shape
    width = max(256, elements // max(k, 1))
    return [slice(j, min(j + width, N)) for j in range(0, N, width)]


class HostPasses:
    """NumPy: the Numba kernels of history_kernels.py, float32 or float64 rows."""

    xp = np
    #: the histories: on cache lines and written once before the run (engine/aligned.py)
    zeros = staticmethod(zeros_committed)
    rows_times = staticmethod(history_kernels.rows_dot)
    times_rows = staticmethod(history_kernels.combine_rows)
    solve_triangular = staticmethod(triangular_solver(np))

    @staticmethod
    def mean_and_cross(C, R, Z, rows: int):
        return history_kernels.mean_and_cross(C, R, Z, rows)


class ArrayPasses:
    """Any array module (CuPy): whole-array products; float32 rows cast chunk by chunk."""

    def __init__(self, xp):
        self.xp = xp
        self.zeros = xp.zeros                    # a device allocator aligns its blocks
        self.solve_triangular = triangular_solver(xp)

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

    def times_rows(self, C, R, out=None):
        if out is None:
            out = self.xp.zeros((C.shape[1], R.shape[1]))
        for c, Rc in self._cast(R):
            out[:, c] += C.T @ Rc
        return out

    def mean_and_cross(self, C, R, Z, rows: int):
        cross = self.xp.zeros((len(R), rows)) if rows else None
        for c, Rc in self._cast(R):
            Zc = Z[:, c] + C.T @ Rc
            Z[:, c] = Zc.astype(R.dtype)           # round to what will be stored
            if rows:
                cross += Rc @ Z[:rows, c].T
        return cross


def passes_for(backend):
    """The passes of ``backend`` (chosen once per run)."""
    return HostPasses() if backend.name == "numpy" else ArrayPasses(backend.xp)
