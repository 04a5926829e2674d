"""Residual blocks: skip connections with a depth exponent on the branch and on the rate
(docs/theory.md §12).

With L hidden layers there are K = L − 1 blocks, one per hidden matrix W^2..W^L:

    h^1 = W^1 ξ,   h^{l+1} = h^l + K^{−α} W^{l+1} φ(h^l)  (l = 1..K),   f = α_out W^{L+1} φ(h^L),

and the learning rate of W^2..W^L is multiplied by K^{−γ}.  With ``block_depth=2`` a block
has two matrices, h ← h + K^{−α} W_b φ(W_a φ(h)), and L = 1 + 2K: the hidden layers
alternate between a branch's inner pre-activation (no skip) and the block's output.
With ``phi_inside=True`` (blocks of two) φ acts only inside the branches, as in a
transformer's MLP block: the stream is never passed through φ, every branch reads it
(normalized, with a norm) and the readout reads its last value,

    x^1 = N(h^1),   h ← h + K^{−α} W_b φ(W_a N(h)),   f = α_out W^{L+1} N(h^L)

(docs/theory.md §12.7).  Width exponents are those of the parametrization, untouched: at
a fixed K the branch multiplier and the rate factor are width-free constants, so the width
classification, the finite networks and every limit engine follow the residual network
with the same rules as a plain one (a skip adds h^s to a block's output; the backward pass
hands that output's δh back to layer s).  What the exponents do as K grows is the depth
question of §12.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..abc.depth import BRANCH_POWERS, classify_depth
from ..errors import SpecError
from .checks import _number, check_bool, check_int

def _finite(value, name: str) -> float:
    x = _number(value, name)
    if not math.isfinite(x):
        raise SpecError(f"{name} = {value!r} must be a finite number")
    return x


@dataclass(frozen=True, init=False)
class Residual:
    """Skip connections with branch multiplier K^{−alpha} and hidden-layer rate factor
    K^{−gamma}, K = L − 1 blocks of ``block_depth`` layers (docs/theory.md §12); with
    ``phi_inside`` (blocks of two) φ only between a branch's two matrices (module
    docstring)."""

    alpha: float
    gamma: float
    block_depth: int
    phi_inside: bool

    def __init__(self, alpha: float = 0.5, gamma: float = 0.0, block_depth: int = 1,
                 phi_inside: bool = False):
        object.__setattr__(self, "alpha", _finite(alpha, "alpha"))
        object.__setattr__(self, "gamma", _finite(gamma, "gamma"))
        object.__setattr__(self, "block_depth", check_int(block_depth, "block_depth", 1, 2))
        object.__setattr__(self, "phi_inside", check_bool(phi_inside, "phi_inside"))
        if self.phi_inside and self.block_depth != 2:
            raise SpecError(f"phi_inside=True puts φ between a branch's two matrices, "
                            f"h + K^(−alpha) W_b φ(W_a N(h)): it needs block_depth=2, got "
                            f"block_depth = {self.block_depth}")

    @classmethod
    def depth_mup(cls, optimizer: str = "sgd", block_depth: int = 1) -> "Residual":
        """Depth-μP: α = ½ with γ = 1 − p·α for an update rule that carries the branch
        multiplier p times (SGD: γ = 0; Adam and Muon: γ = ½)."""
        return cls._summed_update_constant(0.5, optimizer, block_depth)

    @classmethod
    def completep(cls, optimizer: str = "adam", block_depth: int = 2) -> "Residual":
        """α = 1 with the same rule for γ (Adam and Muon: γ = 0; SGD: γ = −1), on branches
        of two layers by default."""
        return cls._summed_update_constant(1.0, optimizer, block_depth)

    @classmethod
    def _summed_update_constant(cls, alpha: float, optimizer: str,
                                block_depth: int) -> "Residual":
        if optimizer not in BRANCH_POWERS:
            raise SpecError(f"optimizer = {optimizer!r}; choose one of {tuple(BRANCH_POWERS)}")
        return cls(alpha, 1.0 - BRANCH_POWERS[optimizer] * alpha, block_depth)

    def classify(self, optimizer: str = "sgd"):
        """The depth class of (α, γ) under the update rule ``optimizer`` ('sgd', 'adam',
        'muon'): abc/depth.py, docs/theory.md §12.6."""
        return classify_depth(self.alpha, self.gamma, optimizer, self.block_depth)

    def check_depth(self, L: int) -> None:
        """L = 1 + K·block_depth hidden layers with K >= 1 blocks, or a SpecError."""
        b = self.block_depth
        if L < 1 + b or (L - 1) % b:
            raise SpecError(f"residual blocks of {b} layer{'s' if b > 1 else ''} wrap the hidden "
                            f"matrices W^2..W^L in groups of {b}: they need L = 1 + K·{b} "
                            f"hidden layers with K >= 1 blocks, got L = {L}")
        self.check_blocks(self.blocks(L))

    @staticmethod
    def of(value) -> "Residual | None":
        """``value`` if it is a Residual or None, else a SpecError naming ``residual`` (every
        network that takes a residual rule checks it here)."""
        if value is not None and not isinstance(value, Residual):
            raise SpecError(f"residual must be a tp.Residual(...) or None, got {value!r}")
        return value

    def check_blocks(self, K: int) -> None:
        """K^(−α) and K^(−γ) representable in float64 for K blocks, or a SpecError naming
        the exponent."""
        for name, power in (("alpha", self.alpha), ("gamma", self.gamma)):
            try:
                value = float(K) ** -power
            except OverflowError:
                value = math.inf
            if not 0.0 < value < math.inf:
                raise SpecError(f"{name} = {power!r} with K = {K} blocks gives the factor "
                                f"K^(−{name}) = {K}^{-power:g}, which is "
                                f"{'0' if value == 0 else 'infinite'} in float64")

    def blocks(self, L: int) -> int:
        """K = (L − 1)/block_depth blocks."""
        return (L - 1) // self.block_depth

    def skips(self, L: int) -> tuple:
        """For each layer 0..L (0-based, W^1..W^{L+1}), the 0-based index of the
        pre-activation its skip adds (−1: none): a block's last matrix adds the
        pre-activation block_depth layers below."""
        b = self.block_depth
        return tuple(l - b if 0 < l < L and l % b == 0 else -1 for l in range(L + 1))

    def multipliers(self, L: int) -> tuple:
        """For each layer 0..L, the multiplier of its product: K^{−α} on a block's last
        matrix (the branch), 1 elsewhere."""
        c = self.branch(L)
        return tuple(c if s >= 0 else 1.0 for s in self.skips(L))

    def branch(self, L: int) -> float:
        """K^{−α}, the multiplier of every block's branch."""
        return self.branch_of(self.blocks(L))

    def lr_factor(self, L: int) -> float:
        """K^{−γ}, the factor on the learning rate of every block matrix W^2..W^L."""
        return self.lr_factor_of(self.blocks(L))

    def branch_of(self, K: int) -> float:
        """K^{−α} for a network of K blocks (an MLP's, or a transformer's)."""
        return float(K) ** -self.alpha

    def lr_factor_of(self, K: int) -> float:
        """K^{−γ} for a network of K blocks."""
        return float(K) ** -self.gamma

    def to_json(self) -> dict:
        out = {"alpha": self.alpha, "gamma": self.gamma, "block_depth": self.block_depth}
        if self.phi_inside:             # absent: φ on the stream, as before the option
            out["phi_inside"] = True
        return out

    def linear_layers(self, L: int) -> tuple:
        """For each layer 0..L, whether its x is its normalized pre-activation without φ:
        with ``phi_inside``, the stream's layers (the input layer and every block's output);
        otherwise none."""
        skips = self.skips(L)
        return tuple(self.phi_inside and l < L and (l == 0 or skips[l] >= 0)
                     for l in range(L + 1))


class Carried:
    """What residual skips hand back on the way down: a block output's δh (or gradient
    kernel) joins the δh of the layer its skip starts from (docs/theory.md §12.1).  The
    backward loops of every engine hold one, hand at a block's output and receive at each
    layer below."""

    def __init__(self):
        self._held = {}

    def hand(self, layer: int, value) -> None:
        """Add ``value`` to what ``layer`` will receive."""
        self._held[layer] = self._held[layer] + value if layer in self._held else value

    def receive(self, layer: int, value):
        """``value`` plus whatever was handed to ``layer`` (``value`` itself if nothing)."""
        return value + self._held.pop(layer) if layer in self._held else value
