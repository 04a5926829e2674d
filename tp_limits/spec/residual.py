"""Residual blocks: skip connections with a depth exponent on the branch and on the rate
(docs/theory.md §12).

With L hidden layers there are K = L − 1 blocks, one per hidden matrix W^2..W^L:

    h^1 = W^1 ξ,   h^{l+1} = h^l + K^{−α} W^{l+1} φ(h^l)  (l = 1..K),   f = α_out W^{L+1} φ(h^L),

and the learning rate of W^2..W^L is multiplied by K^{−γ}.  Width exponents are those of
the parametrization, untouched: at a fixed K the branch multiplier and the rate factor are
width-free constants, so the width classification, the finite networks and every
feature-learning limit engine follow the residual network with the same rules as a plain
one (the skip adds h^l to the next pre-activation; the backward pass adds δh^{l+1} to
δh^l).  What the exponents do as K grows is the depth question of §12.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecError
from .checks import _number, check_int

#: how the per-block update scales with K for each update rule: an SGD step carries the
#: branch multiplier twice (in the gradient and in the forward product), a normalized one
#: (Adam, Muon) once; the presets below put the K blocks' summed update at Θ(1)
BRANCH_POWERS = {"sgd": 2, "adam": 1, "muon": 1, "muon_adam": 1}


def _finite(value, name: str) -> float:
    x = _number(value, name)
    if not math.isfinite(x):
        raise SpecError(f"{name} = {value!r} must be a finite number")
    return x


@dataclass(frozen=True, init=False)
class Residual:
    """Skip connections with branch multiplier K^{−alpha} and hidden-layer rate factor
    K^{−gamma}, K = L − 1 blocks of ``block_depth`` layers (docs/theory.md §12)."""

    alpha: float
    gamma: float
    block_depth: int

    def __init__(self, alpha: float = 0.5, gamma: float = 0.0, block_depth: int = 1):
        object.__setattr__(self, "alpha", _finite(alpha, "alpha"))
        object.__setattr__(self, "gamma", _finite(gamma, "gamma"))
        depth = check_int(block_depth, "block_depth", 1, 2)
        if depth != 1:
            raise SpecError("block_depth = 2 (branches W_b φ(W_a φ(h))) is not built yet: "
                            "residual blocks have one layer (block_depth=1)")
        object.__setattr__(self, "block_depth", depth)

    @classmethod
    def depth_mup(cls, optimizer: str = "sgd") -> "Residual":
        """Depth-μP: α = ½ with γ = 1 − p·α for an update rule that carries the branch
        multiplier p times (SGD: γ = 0; Adam and Muon: γ = ½)."""
        return cls._summed_update_constant(0.5, optimizer)

    @classmethod
    def completep(cls, optimizer: str = "adam") -> "Residual":
        """α = 1 with the same rule for γ (Adam and Muon: γ = 0; SGD: γ = −1)."""
        return cls._summed_update_constant(1.0, optimizer)

    @classmethod
    def _summed_update_constant(cls, alpha: float, optimizer: str) -> "Residual":
        if optimizer not in BRANCH_POWERS:
            raise SpecError(f"optimizer = {optimizer!r}; choose one of {tuple(BRANCH_POWERS)}")
        return cls(alpha, 1.0 - BRANCH_POWERS[optimizer] * alpha)

    def blocks(self, L: int) -> int:
        """K = L − 1: one block per hidden matrix."""
        return L - 1

    def branch(self, L: int) -> float:
        """K^{−α}, the multiplier of every block's branch."""
        return float(self.blocks(L)) ** -self.alpha

    def lr_factor(self, L: int) -> float:
        """K^{−γ}, the factor on the learning rate of W^2..W^L."""
        return float(self.blocks(L)) ** -self.gamma

    def to_json(self) -> dict:
        return {"alpha": self.alpha, "gamma": self.gamma, "block_depth": self.block_depth}
