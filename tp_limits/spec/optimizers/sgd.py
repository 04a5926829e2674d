"""SGD with heavy-ball or Nesterov momentum and coupled weight decay (docs/theory.md
§10.1, §10.2, §10.8).

Per layer l, with learning rate η_l n^{-c_l} on w^l (η_l = η · lr_mult_l) and the
width-free decay λ, in w-space (PyTorch's rule)

    buf ← μ buf + ∇_w + λ n^{c_l} w,      w ← w − η_l n^{-c_l} buf,

which in W-space, with γ_l = η_l n^{-(2a_l+c_l)} the SGD step and δ_l = η_l λ the
per-step shrink, is one buffer per weight:

    D ← μ D + γ_l ∇_W + δ_l W,      W ← W − D.

Nesterov momentum (PyTorch's ``nesterov=True``) steps along the gradient step plus
the new buffer instead: with i = γ_l ∇_W + δ_l W, D ← μ D + i, W ← W − (i + μ D).

λ carries the width exponent c_l so that the shrink δ_l = η_l λ is width-free: a
smaller exponent makes decay vanish as n → ∞, a larger one blow up.  Everything is
linear in the gradients, so the deep engines follow it through a schedule
(:meth:`~.base.Optimizer.schedule`), and every coordinate a particle carries alone
moves by the same buffer rule with g the plain-SGD increment:

    heavy ball:  m ← (μ m + g) + δ z,      z ← z − m;
    Nesterov:    i = g + δ z,  m ← μ m + i,  z ← z − (i + μ m).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ...errors import SpecError
from ..checks import check_bool, unit_interval
from .base import Optimizer, coordinate_rule, decay_field, hyperparameter


def _heavy_ball(z, g, m, h):
    m = (h.momentum * m + g) + h.shrink * z
    return z - h.rate * m, m


def _nesterov(z, g, m, h):
    i = g + h.shrink * z                  # the coupled decay joins the gradient step
    m = h.momentum * m + i
    return z - h.rate * (i + h.momentum * m), m


class PlainHyper(NamedTuple):
    """The plain rule z ← z − g has no hyperparameters."""


class HeavyBallHyper(NamedTuple):
    momentum: float
    shrink: float
    rate: float            # the schedule's factor η_t / η: scales the step, not the buffer


PLAIN = coordinate_rule("sgd", (), PlainHyper, None)
HEAVY_BALL = coordinate_rule("heavy_ball", ("buffer",), HeavyBallHyper, _heavy_ball)
NESTEROV = coordinate_rule("nesterov", ("buffer",), HeavyBallHyper, _nesterov)


@dataclass(frozen=True)
class SGD(Optimizer):
    """Stochastic gradient descent with momentum and coupled weight decay.

    ``momentum`` μ ∈ [0, 1); ``nesterov``: Nesterov's momentum (PyTorch's semantics,
    docs/theory.md §10.8) instead of the heavy ball; ``weight_decay`` λ >= 0 in
    width-free units: layer l decays by the factor 1 − η lr_mult_l λ per step at
    every width (docs/theory.md §10.1).  ``SGD()`` is plain SGD.
    """

    momentum: float = hyperparameter(0.0, unit_interval, "SGD momentum μ in [0, 1)")
    weight_decay: float = decay_field()
    nesterov: bool = hyperparameter(False, check_bool,
                                    "SGD: Nesterov's momentum (steps along i + μ·buffer)",
                                    kind="bool")

    name = "sgd"
    exponents = "sgd"

    def __post_init__(self):
        super().__post_init__()
        if self.nesterov and self.momentum == 0.0:
            raise SpecError("nesterov=True needs a momentum > 0 (with μ = 0 it is plain "
                            "SGD)")

    @property
    def linear(self) -> bool:
        return True

    @property
    def rule(self):
        if self.momentum == 0.0 and self.weight_decay == 0.0:
            return PLAIN
        return NESTEROV if self.nesterov else HEAVY_BALL

    def coordinate(self, lr, alpha, shrink, t, rate=1.0):
        """The increment of plain SGD, γ = lr α times the gradient sum (times the schedule's
        factor for plain SGD; with a buffer the factor scales the step); μ and δ."""
        if self.rule.plain:
            return lr * alpha * rate, PLAIN.Hyper()
        return lr * alpha, HeavyBallHyper(self.momentum, shrink, rate)

    def finite_step(self, W, state, G, X, const, l, t, backend, rate=1.0):
        """W −= s γ Gᵀ X as one in-place rank-B update (BLAS ger/gemm: no n × n temporary);
        with momentum or decay the update goes into the buffer D first and W −= s D, and
        Nesterov's step W ← (1 − s δ) W − s γ Gᵀ X − s μ D is taken from the new D
        (s: the schedule's factor, PyTorch's semantics, docs/theory.md §10.9)."""
        lr = const.lr[l]
        if self.rule.plain:
            backend.add_outer(W, -lr * rate, G, X)
            return
        (D,) = state
        shrink = self.shrinks(const.decay)[l]
        D *= self.momentum
        if shrink:
            D += shrink * W                                    # coupled decay, with W_t
        backend.add_outer(D, lr, G, X)
        if not self.nesterov:
            W -= D if rate == 1.0 else rate * D
            return
        if shrink:
            W *= 1.0 - rate * shrink
        backend.add_outer(W, -lr * rate, G, X)
        W -= (rate * self.momentum) * D
