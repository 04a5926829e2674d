"""The attention logits' width exponents, exact (docs/theory.md §17.3).

With hidden matrices of entries Θ(n^{−½}) the queries and keys have Θ(1) coordinates.  At
initialization W_Q and W_K are independent, so q·k is a sum of n uncorrelated terms,
Θ(n^{½}), and the logit ℓ = c q·k/d_head^{a} is Θ(n^{½−a}) (exactly 0 with a zero query).
The first step moves W_Q along Σ dℓ k aᵀ, so Δq is *correlated with the keys*, and Δq·k is a
coherent sum.  With the hidden rate η n^{−c} and the readout's entries Θ(n^{−b_out}):

    Adam:  Δq has Θ(n^{1−c}) coordinates (the step is normalized)   Δℓ_1 = Θ(n^{2−c−a})
    SGD:   ∂loss/∂ℓ is Θ(n^{½−b_out−a}) at initialization (δo = W_Oᵀδh and v are
           independent), so Δq = Θ(n^{3/2−c−b_out−a})               Δℓ_1 = Θ(n^{5/2−c−b_out−2a})

and the same for Δk against q.  Under μP (c = 1 for Adam, c = 0 and b_out = 1 for SGD)
a = 1 ("1/d") keeps the logits' change Θ(1) under Adam and vanishing at the first SGD step,
while a = ½ ("1/sqrt(d)") makes it grow like n^{½} under both: the logits blow up, and the
softmax saturates.  Under the NTK parametrization (SGD, c = 1, b_out = ½) the change is
Θ(n^{1−2a}): n^{−1} with 1/d — the kernel regime, where attention stays uniform.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..errors import UnsupportedError
from .model import Transformer
from .parametrization import init_exponent, rate_exponent
from .train import check_optimizer


@dataclass(frozen=True)
class AttentionClass:
    """``initial``: the exponent of the logits at initialization (None: exactly zero);
    ``step_one``: the exponent of their change in the first step; ``stable``: whether
    step_one ≤ 0; ``verdict`` in words, with the reason."""

    attention: str
    optimizer: str
    initial: Fraction | None
    step_one: Fraction
    stable: bool
    verdict: str


def classify_attention(model: Transformer, optimizer) -> AttentionClass:
    """The exponents of the module docstring for ``model`` trained by ``optimizer``."""
    name = check_optimizer(optimizer, model)
    if model.attention == "none":
        raise UnsupportedError("the model has no attention (attention='none'): no logits")
    if model.param == "sp":
        raise UnsupportedError(
            f"param = {model.param!r}: with one width-free rate the hidden updates of "
            "standard practice already blow up (like n^(1/2) under SGD and n under Adam, "
            "the MLP classifier's verdict), so the logits' exponents are derived for "
            "param = 'mup' and 'ntk'")
    a = model.attention_exponent
    initial = None if model.zero_query else Fraction(1, 2) - a
    c = rate_exponent(model.param, name, "hidden")
    if name == "adam":
        step_one = 2 - c - a
    else:
        step_one = Fraction(5, 2) - c - init_exponent(model.param, "readout") - 2 * a
    stable = step_one <= 0
    at_init = ("exactly 0 at initialization (zero query)" if initial is None
               else f"{_theta(initial)} at initialization")
    if stable:
        verdict = (f"stable: the logits are {at_init} and change by {_theta(step_one)} in the "
                   f"first {'SGD' if name == 'sgd' else 'Adam'} step")
    else:
        verdict = (f"unstable: attention logits blow up like n^{_power(step_one)} after the "
                   f"first step (the query's update is correlated with the keys, so q·k "
                   f"grows like a coherent sum while {model.attention} divides by only "
                   f"n^{_power(a)}); they are {at_init}")
    return AttentionClass(model.attention, name, initial, step_one, stable, verdict)


def _power(x: Fraction) -> str:
    return f"({x})" if x.denominator != 1 or x < 0 else f"{x}"


def _theta(x: Fraction) -> str:
    return "Θ(1)" if x == 0 else f"Θ(n^{_power(x)})"
