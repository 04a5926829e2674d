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

from ..engine.budget import particles_within
from ..engine.normals import HostNormals


class Draws:
    """Standard normals (float64) on the backend; index sets on the host."""

    def __init__(self, backend, rng: np.random.Generator, source: str = "backend"):
        self.host = rng
        # the backend's generator is asked for only when used: seeding one draws from rng
        gen = rng if source == "host" else backend.generator(rng)
        self._gen = HostNormals(rng) if gen is rng else gen
        self._xp = backend.xp

    def normal(self, shape):
        return self._xp.asarray(self._gen.standard_normal(shape))

    def sobol_normals(self, dims: int, n: int):
        """(dims, n) standard normals from a scrambled Sobol' sequence: randomized
        quasi-Monte Carlo.  The scrambling is drawn from the host generator, so
        replicates are independent randomizations of the same point set and their
        spread is an honest error bar.  ``n`` must be a power of two (the points'
        balance holds for such n)."""
        from scipy.special import ndtri
        from scipy.stats import qmc
        u = qmc.Sobol(dims, scramble=True, seed=self.host).random_base2(int(np.log2(n)))
        tiny = np.finfo(float).eps / 2                     # keep ndtri finite at 0
        # C-ordered (dims, n), as the kernels take particle arrays
        return self._xp.asarray(np.ascontiguousarray(ndtri(np.clip(u, tiny, 1.0 - tiny)).T))

    def subset(self, n: int, k: int) -> np.ndarray:
        """k of range(n), sorted: the first k of one host permutation (nested in k)."""
        return np.sort(self.host.permutation(n)[:k])


class SobolPrefix:
    """Draws whose first ``dims`` Gaussian coordinates per particle form one scrambled
    Sobol' point (randomized quasi-Monte Carlo, docs/theory.md §4.8).

    ``normal(shape)`` with the particle axis (length ``n``) first or last hands out
    the next rows of a (dims, n) Sobol' normal array, in the order they are asked
    for; once those are spent (or for any other shape) it draws from the wrapped
    :class:`Draws`.  A run asks in a fixed order, so particle α's i-th coordinate
    is always the same quantity of the Tensor Program: the point set is spread
    over the joint law of everything drawn first.
    """

    def __init__(self, draws: Draws, dims: int, n: int):
        self.host, self._draws, self._n = draws.host, draws, n
        self._rows = draws.sobol_normals(dims, n)
        self._used = 0

    @property
    def spent(self) -> bool:
        return self._used >= len(self._rows)

    def normal(self, shape):
        shape = tuple(shape)
        if len(shape) == 2 and self._n in shape:
            m = shape[0] if shape[1] == self._n else shape[1]       # rows asked for
            if self._used + m <= len(self._rows):
                rows = self._rows[self._used:self._used + m]
                self._used += m
                return rows if shape[1] == self._n else rows.T.copy()
        return self._draws.normal(shape)

    def subset(self, n: int, k: int) -> np.ndarray:
        return self._draws.subset(n, k)


def choose_sampler(asked: str | None, replicates: int) -> str:
    """The sampler a Monte Carlo run uses: the one asked for, else 'qmc' when replicates
    give its error bar (it wins by far there, docs/performance.md), else 'antithetic'."""
    return asked or ("qmc" if replicates > 1 else "antithetic")


def fitting_count(fit: int, sampler: str) -> int:
    """The largest particle count at most ``fit`` that ``sampler`` uses as given
    (:func:`sampler_count` leaves it unchanged): a power of two for Sobol' points, an even
    count for antithetic pairs; 0 when none fits.  A memory refusal advises this count,
    not ``fit`` itself, which the sampler might round up past the memory again."""
    if sampler == "qmc":
        return 1 << (fit.bit_length() - 1) if fit >= 4 else 0
    return max(0, fit - fit % 2) if sampler == "antithetic" else max(0, fit)


def fitting_particles_advice(price, particles: int, budget, sampler: str) -> str:
    """A time refusal's concrete advice: the largest particle count the sampler runs as
    given whose price (``price(count)``, seconds) fits ``budget``; empty when none does."""
    k = particles_within(price, particles, budget, lambda n: fitting_count(n, sampler))
    return (f"particles={k:,} fits it at these steps and replicates"
            if 2 <= k < particles else "")


def sampler_count(particles: int, sampler: str) -> int:
    """The count a sampler uses (the one rule of every Monte Carlo engine): even for
    antithetic pairs, the next power of two for Sobol' points (N/2 one too, for pairs),
    ``particles`` itself for plain Monte Carlo."""
    if sampler == "qmc":
        return 1 << max(2, (particles - 1).bit_length())
    return particles + particles % 2 if sampler == "antithetic" else particles
