"""Biases: a bias is a weight whose input is the constant 1 (docs/theory.md §13).

With biases the network reads

    h^1 = W^1 ξ + b^1,   h^l = W^l x^{l−1} + b^l  (2 <= l <= L),   f = α (W^{L+1} x^L + b^{L+1}),

and inside a residual block the bias belongs to the branch: h^l = h^s + c (W^l x + b^l).

**Exponents.** A hidden bias b^l ∈ R^n is an n × 1 matrix with fan-in 1, the same kind of
matrix as the input layer W^1 (n × d, d fixed): it takes the input layer's exponents,
b^l = n^{−a_1} β^l, β^l ~ N(0, σ_{b,l}² n^{−2b_1}), learning rate η m_{b,l} n^{−c_1}.  Its
update is then Θ(n^{−r_1}) coordinatewise, where r_1 is the input layer's exponent: a bias
moves exactly as much as the input layer does, so the classification of the weights is
unchanged (ρ_l and r only take minima over r_1 again) and a bias is updated maximally iff
the input layer is.  The readout's bias b^{L+1} ∈ R^{d_o} has no width at all: it starts at
zero (a random Θ(1) offset of f_0 would make the limit depend on the draw) and moves by the
optimizer's step at the width-free rate η m_{b,L+1}.

**Constants.** ``sigma``: σ_{b,l} for the L hidden biases (a number or L numbers; default 0:
biases start at zero, which is also where PyTorch's default bias initialization,
uniform(±1/√fan_in), goes for hidden layers as n → ∞); ``lr_mult``: m_{b,l} for the L hidden
biases and the readout's (a number or L + 1 numbers; default 1); ``readout``: whether the
readout has a bias (default True).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

from ..errors import SpecError
from .checks import (check_bool, finite_non_negative, finite_positive, per_layer,
                     repeat_hidden)


def _per_bias(values, name: str, count: int, check) -> tuple:
    """One constant per bias from a number or a sequence."""
    what = "hidden biases" if name.endswith("sigma") else "hidden biases and the readout"
    return per_layer(values, name, count, check, f"bias (the {what})")


def _given(value, name: str, check):
    """A number, checked, or a sequence of them as a tuple (its length fixes the depth)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return check(value, name)
    try:
        count = len(list(value))
    except TypeError:
        raise SpecError(f"{name} = {value!r} must be a number or one number per bias") from None
    return _per_bias(value, name, count, check)


@dataclass(frozen=True, init=False)
class Bias:
    """Biases on every hidden layer and (``readout=True``) on the readout (docs/theory.md
    §13): init constants ``sigma`` (hidden biases, default 0), rate multipliers ``lr_mult``
    (hidden biases then the readout's, default 1).  Constants given as sequences fix the
    depth; numbers apply to every layer."""

    sigma: object
    lr_mult: object
    readout: bool

    def __init__(self, sigma=0.0, lr_mult=1.0, readout: bool = True):
        object.__setattr__(self, "sigma", _given(sigma, "Bias sigma", finite_non_negative))
        object.__setattr__(self, "lr_mult", _given(lr_mult, "Bias lr_mult", finite_positive))
        object.__setattr__(self, "readout", check_bool(readout, "Bias readout"))

    def sigmas(self, L: int) -> tuple:
        """σ_{b,l} for the L hidden biases."""
        return _per_bias(self.sigma, "Bias sigma", L, finite_non_negative)

    def lr_mults(self, L: int) -> tuple:
        """m_{b,l} for the L hidden biases and the readout's (L + 1 values; the readout's is
        unused without a readout bias)."""
        return _per_bias(self.lr_mult, "Bias lr_mult", L + 1, finite_positive)

    def check_depth(self, L: int) -> None:
        """The per-bias constants fit L hidden layers, or a SpecError."""
        self.sigmas(L)
        self.lr_mults(L)

    def with_depth(self, L: int) -> "Bias":
        """The same biases for ``L`` hidden layers: the hidden biases' constants (which must
        agree) repeated."""
        out = {name: repeat_hidden(v, L, tail, f"the hidden biases' {name}")
               if isinstance(v, tuple) else v
               for name, v, tail in (("sigma", self.sigma, 0), ("lr_mult", self.lr_mult, 1))}
        return Bias(out["sigma"], out["lr_mult"], self.readout)

    def to_json(self) -> dict:
        return {"sigma": self.sigma, "lr_mult": self.lr_mult, "readout": self.readout}

    @classmethod
    def of(cls, bias) -> "Bias | None":
        """None (no biases), a Bias, or True (the defaults)."""
        if bias is None or bias is False:
            return None
        if bias is True:
            return cls()
        if isinstance(bias, cls):
            return bias
        raise SpecError(f"bias must be True, False, None or a tp.Bias(...), got {bias!r}")
