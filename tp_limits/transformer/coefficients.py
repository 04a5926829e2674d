"""Z-variables as coefficient vectors: the exact representation of a linear (φ = id)
transformer's limit (docs/theory.md §17.4).

With φ = id, every Z-variable is a linear combination of zero-mean Gaussian primitives:
the embeddings' and the readout's initial coordinates, and one primitive per hat a hidden
matrix draws.  A variable is its coefficient vector c (length P, the primitives' count,
fixed in advance); with S the primitives' covariance,

    E Z = 0,     E[Z^a Z^b] = aᵀ S b,     ∂Z^a/∂ẑ_p = a[p]     (exactly).

LayerNorm is then a deterministic rescaling, the softmax weights deterministic, and every
product of a hidden matrix follows docs/theory.md §4.2 exactly: a new primitive per row,
with covariance σ² E[x x'] against the family's stored vectors; Ż = σ² Σ_j g_j x[p_j]; and
the SGD pairs −η Σ_j g_j E[x_j x].  No sampling: the Monte Carlo engine's twin.
"""
from __future__ import annotations

import numpy as np

from ..errors import TPError
from .hidden_matrix import HiddenMatrix


class CoefficientSpace:
    """P primitives with covariance S: variables (P, c), vectors (m, P)."""

    name = "exact"

    def __init__(self, capacity: int):
        self.N = capacity
        self.S = np.zeros((capacity, capacity))
        self.count = 0

    def new(self, m: int):
        """Indices of m new primitives."""
        if self.count + m > self.N:
            raise TPError(f"the exact engine sized {self.N} primitives and needs more: the "
                          "count in transformer/limit.py is wrong")
        idx = np.arange(self.count, self.count + m)
        self.count += m
        return idx

    def gaussian(self, std: float, count: int):
        """``count`` new independent N(0, std²) variables, (P, count)."""
        idx = self.new(count)
        self.S[idx, idx] = 1.0
        out = np.zeros((self.N, count))
        out[idx, np.arange(count)] = std
        return out

    @staticmethod
    def mean(x):
        return np.zeros(x.shape[:-1] + (1,))

    def row_moment(self, a, b):
        return ((a @ self.S) * b).sum(axis=-1, keepdims=True)

    def moments(self, a, b):
        return (a @ self.S) @ np.swapaxes(b, -1, -2)

    def hats(self, s2: float, x, family):
        """New primitives for the rows x, jointly Gaussian with the hats of ``family``'s
        stored vectors: covariance σ² E[x x'] (docs/theory.md §4.2)."""
        idx = self.new(len(x))
        xs = x @ self.S
        self.S[np.ix_(idx, idx)] = s2 * xs @ x.T
        if family.k:
            c = s2 * xs @ family.vec.T
            self.S[np.ix_(idx, family.prim)] = c
            self.S[np.ix_(family.prim, idx)] = c.T
        return idx

    def matrix(self, name: str, sigma: float, eta: float) -> "ExactMatrix":
        return ExactMatrix(self, sigma, eta)


class _Family:
    """Stored coefficient rows and the primitives of their hats."""

    def __init__(self, P: int):
        self.vec, self.prim = np.zeros((0, P)), np.zeros(0, dtype=np.int64)

    @property
    def k(self) -> int:
        return len(self.prim)

    def store(self, x, idx) -> None:
        self.vec, self.prim = np.vstack([self.vec, x]), np.concatenate([self.prim, idx])


class ExactMatrix(HiddenMatrix):
    """The exact twin of :class:`~.particles.LimitMatrix`: a hat is a new primitive, Ż is
    exact."""

    def __init__(self, space: CoefficientSpace, sigma: float, eta: float):
        self.space, self.s2, self.eta = space, sigma ** 2, eta
        self.F, self.G = _Family(space.N), _Family(space.N)

    def _product(self, own, other, x, stored):
        idx = self.space.hats(self.s2, x, own)
        out = np.zeros_like(x)
        out[np.arange(len(x)), idx] = 1.0                         # the hat
        if other.k:
            coef = self.s2 * x[:, other.prim].T                   # Ż: ∂x/∂ĝ_j = x[p_j]
            if self.pairs:                                        # ΔW: −η E[own_j x]
                coef[:self.pairs] -= self.eta * self.space.moments(own.vec[:self.pairs], x)
            out += coef.T @ other.vec
        if stored:
            own.store(x[:stored], idx[:stored])
        return out
