"""Random inputs and initial-particle rules shared by the Monte Carlo engines.

Particles come in antithetic pairs that share Z^U and carry opposite Z^{nV}
(docs/theory.md §2): correlated draws from the right initial law (particles
interact only through expectations) that make the Monte Carlo f̊_0 exactly 0.

A run draws from one host ``numpy.random.Generator`` (spawned per replicate
from the seed), through :class:`Draws`, which hands out arrays of the run's
backend.  With ``random="backend"`` (the default) a CuPy run seeds a device
generator from it, so its draws have the same law as a NumPy run's but are
other numbers; with ``random="host"`` every draw is made by the host
generator and copied to the device, so a CuPy run and a NumPy run of one seed
see identical random inputs and agree to rounding (docs/theory.md §4.7).
On NumPy the two are the same.
"""
from __future__ import annotations

import numpy as np

SOURCES = ("backend", "host")


class Draws:
    """Standard normals (float64) on the backend; index sets on the host."""

    def __init__(self, backend, rng: np.random.Generator, source: str = "backend"):
        self.host = rng
        self._gen = rng if source == "host" else backend.generator(rng)
        self._xp = backend.xp

    def normal(self, shape):
        return self._xp.asarray(self._gen.standard_normal(shape))

    def subset(self, n: int, k: int) -> np.ndarray:
        """k of range(n), sorted: the first k of one host permutation (nested in k)."""
        return np.sort(self.host.permutation(n)[:k])


def antithetic_count(particles: int, paired: bool = True) -> int:
    """The particle count actually used: ``particles`` rounded up to even when paired."""
    return particles + particles % 2 if paired else particles
