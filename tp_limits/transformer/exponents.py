"""The attention logits' width exponents, exact (docs/theory.md §17.3).

With μP's matrices the queries and keys have Θ(1) coordinates.  At initialization W_Q and
W_K are independent, so q·k is a sum of n uncorrelated terms, Θ(n^{½}), and the logit
ℓ = c q·k/d_head^{a} is Θ(n^{½−a}) (exactly 0 with a zero query).  The first step moves
W_Q along Σ dℓ k aᵀ, so Δq is *correlated with the keys*, and Δq·k is a coherent sum:

    Adam:  Δq has Θ(1) coordinates (the step is normalized)        Δℓ_1 = Θ(n^{1−a})
    SGD:   ∂loss/∂ℓ is Θ(n^{−½}) at initialization (δo = W_Oᵀδh and v are independent),
           so Δq = Θ(n^{½−a})                                       Δℓ_1 = Θ(n^{3/2−2a})

and the same for Δk against q.  So a = 1 ("1/d", μP) keeps the logits' change Θ(1)
under Adam and vanishing at the first SGD step, while a = ½ ("1/sqrt(d)") makes it grow
like n^{½} under both: the logits blow up, and the softmax saturates.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..errors import UnsupportedError
from .model import Transformer
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
    name = check_optimizer(optimizer)
    if model.attention == "none":
        raise UnsupportedError("the model has no attention (attention='none'): no logits")
    if model.param != "mup":
        raise UnsupportedError(
            f"param = {model.param!r}: with one width-free rate the hidden updates of "
            "standard practice already blow up (like n^(1/2) under SGD and n under Adam, "
            "the MLP classifier's verdict), so the logits' exponents are derived for "
            "param = 'mup' only")
    a = model.attention_exponent
    initial = None if model.zero_query else Fraction(1, 2) - a
    step_one = 1 - a if name == "adam" else Fraction(3, 2) - 2 * a
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
