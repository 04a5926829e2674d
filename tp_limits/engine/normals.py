"""Standard normals from a host ``numpy.random.Generator``, compiled.

Numba implements NumPy's Generator.standard_normal (the same ziggurat on the
same bit generator), so a compiled draw returns exactly the numbers
``rng.standard_normal(shape)`` would and leaves the generator in the same
state (a test checks both, interleaved with other draws), in less time
(docs/performance.md, "Finite networks"), so fixed-seed runs keep their values
while the largest draws (the finite networks' n x n initial weights, the deep
engine's ~3·10⁶ normals per step at N = 10⁵) cost less.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _standard_normals(gen, n):
    return gen.standard_normal(n)


def standard_normal(rng: np.random.Generator, shape) -> np.ndarray:
    """``rng.standard_normal(shape)`` (float64, C-ordered), drawn by compiled code."""
    shape = (shape,) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    return _standard_normals(rng, int(np.prod(shape))).reshape(shape)


class HostNormals:
    """A host Generator whose ``standard_normal`` runs compiled (same numbers)."""

    def __init__(self, rng: np.random.Generator):
        self._rng = rng

    def standard_normal(self, shape):
        return standard_normal(self._rng, shape)
