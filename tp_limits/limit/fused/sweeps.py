"""One interface in front of the three sweeps of the one-hidden-layer limit.

Each takes the record of contract.py and returns the host (nb, K) block sums
(columns.py):

* ``"numba"`` — the fused kernel of sweep.py (the host default);
* ``"numpy"`` — its whole-array twin (sweep_numpy.py), on the run's backend: the
  reference, and the sweep for inputs too wide for the CUDA kernel's registers;
* ``"cuda"`` — the generated CUDA kernel (sweep_cuda.py, the GPU default).
"""
from __future__ import annotations

import numpy as np

from ...engine.options import KERNELS  # noqa: F401  (the sweeps' names, declared there)
from .columns import n_columns
from .contract import SweepArgs
from .sweep import sweep, warm_up
from .sweep_cuda import sweep_cuda
from .sweep_numpy import sweep_numpy


class NumbaSweep:
    name = "numba"

    def __init__(self, backend):
        self.b = backend

    def warm_up(self, phi: str, optimizer, dtype) -> None:
        warm_up(phi, optimizer, dtype)

    def __call__(self, a: SweepArgs) -> np.ndarray:
        d = a.data
        nb = (d.U.shape[1] + d.block - 1) // d.block
        out = np.zeros((nb, n_columns(len(d.Xn), len(d.Xe), d.V.shape[0], d.stats)))
        sweep(a, out)
        return out


class ArraySweep(NumbaSweep):
    name = "numpy"

    def warm_up(self, phi, optimizer, dtype) -> None:
        pass                                    # nothing to compile

    def __call__(self, a: SweepArgs) -> np.ndarray:
        return self.b.to_numpy(sweep_numpy(a, self.b))


class CudaSweep(ArraySweep):
    name = "cuda"

    def __call__(self, a: SweepArgs) -> np.ndarray:
        return self.b.to_numpy(sweep_cuda(a, self.b))


def make_sweep(kernel: str, backend):
    """The sweep called ``kernel`` on ``backend`` (an engine.backend.Backend)."""
    return {"numba": NumbaSweep, "numpy": ArraySweep, "cuda": CudaSweep}[kernel](backend)
