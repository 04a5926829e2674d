"""Z-variables as particles: the Monte Carlo representation of the transformer's limit
(docs/theory.md §17.4).

A set of c scalar variables per coordinate (a word's embedding coordinate, say) is an array
(N, c); m width-n vectors are rows (m, N), one value per particle.  An expectation is a
mean over the particles.  A hidden matrix is :class:`LimitMatrix`: the deep engine's two hat
families (docs/theory.md §4.2), with Stein's Ż.
"""
from __future__ import annotations

import numpy as np

from ..errors import DivergenceError
from ..limit.montecarlo.families import Family, NonFiniteLaw
from ..limit.montecarlo.passes import ArrayPasses
from .hidden_matrix import HiddenMatrix
from .model import BLOCKS
from .network import LastAxisAverages


class LimitMatrix(HiddenMatrix):
    """A hidden matrix in the limit on particles: its families are the deep engine's
    (sampled hats, Stein's Ż; docs/theory.md §4.2)."""

    def __init__(self, name: str, N: int, capacity: int, sigma: float, eta: float, draws):
        passes = ArrayPasses(np)           # BLAS products: a few dozen rows per family
        self.F = Family(N, capacity, sigma ** 2, passes=passes)
        self.G = Family(N, capacity, sigma ** 2, passes=passes)
        self.passes, self.eta, self.draws, self.N = passes, eta, draws, N
        self.name = name

    def _product(self, own, other, x, stored):
        try:
            hat, info = own.sample(x, self.draws, store_rows=stored)
        except (NonFiniteLaw, np.linalg.LinAlgError):
            raise DivergenceError(self.t, int(self.name[1:]),
                                  f"W_{self.name[0]}'s product (its Gaussian law)",
                                  BLOCKS) from None
        out = hat.copy()
        if other.k:
            coef = other.stein_coefficients(x)                    # Ż (Stein's lemma)
            if self.pairs:                                        # ΔW: −η E[own_j x]
                coef[:self.pairs] -= self.eta * self.passes.rows_times(
                    own.vec[:self.pairs], x) / self.N
            self.passes.times_rows(coef, other.vec[:other.k], out=out)
        if stored:
            own.store(x, hat, info, stored)
        return out


class ParticleSpace(LastAxisAverages):
    """N particles: variables (N, c), vectors (m, N), expectations as particle means (the
    averages of :class:`~.network.LastAxisAverages`, over the particles)."""

    name = "montecarlo"

    def __init__(self, N: int, draws, capacity: int):
        self.N, self.draws, self.capacity = N, draws, capacity

    def gaussian(self, std: float, count: int):
        """``count`` independent N(0, std²) variables, (N, count)."""
        return std * self.draws.normal((self.N, count))

    def moments(self, a, b):
        """E[Z^{a_i} Z^{b_j}], (…, m, k), for rows a (…, m, N) and b (…, k, N)."""
        return a @ np.swapaxes(b, -1, -2) / self.N

    def matrix(self, name: str, sigma: float, eta: float) -> LimitMatrix:
        return LimitMatrix(name, self.N, self.capacity, sigma, eta, self.draws)
