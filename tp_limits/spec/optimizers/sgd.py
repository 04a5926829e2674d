"""SGD with heavy-ball momentum and coupled weight decay (docs/theory.md §10.1, §10.2).

Per layer l, with learning rate η_l n^{-c_l} on w^l (η_l = η · lr_mult_l) and the
width-free decay λ, in w-space (PyTorch's rule)

    buf ← μ buf + ∇_w + λ n^{c_l} w,      w ← w − η_l n^{-c_l} buf,

which in W-space, with γ_l = η_l n^{-(2a_l+c_l)} the SGD step and δ_l = η_l λ the
per-step shrink, is one buffer per weight:

    D ← μ D + γ_l ∇_W + δ_l W,      W ← W − D.

λ carries the width exponent c_l so that the shrink δ_l = η_l λ is width-free: a
smaller exponent makes decay vanish as n → ∞, a larger one blow up.  Everything is
linear in the gradients, so the deep engines follow it through a schedule
(:meth:`~.base.Optimizer.schedule`), and every coordinate a particle carries alone
moves by the same buffer rule with g the plain-SGD increment:

    m ← (μ m + g) + δ z,      z ← z − m.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..checks import unit_interval
from .base import Optimizer, coordinate_rule, decay_field, hyperparameter


def _heavy_ball(z, g, m, h):
    m = (h.momentum * m + g) + h.shrink * z
    return z - m, m


class PlainHyper(NamedTuple):
    """The plain rule z ← z − g has no hyperparameters."""


class HeavyBallHyper(NamedTuple):
    momentum: float
    shrink: float


PLAIN = coordinate_rule("sgd", (), PlainHyper, None)
HEAVY_BALL = coordinate_rule("heavy_ball", ("buffer",), HeavyBallHyper, _heavy_ball)


@dataclass(frozen=True)
class SGD(Optimizer):
    """Stochastic gradient descent with heavy-ball momentum and coupled weight decay.

    ``momentum`` μ ∈ [0, 1); ``weight_decay`` λ >= 0 in width-free units: layer
    l decays by the factor 1 − η lr_mult_l λ per step at every width
    (docs/theory.md §10.1).  ``SGD()`` is plain SGD.
    """

    momentum: float = hyperparameter(0.0, unit_interval, "SGD heavy-ball momentum μ in [0, 1)")
    weight_decay: float = decay_field()

    name = "sgd"
    exponents = "sgd"

    @property
    def linear(self) -> bool:
        return True

    @property
    def rule(self):
        return PLAIN if self.momentum == 0.0 and self.weight_decay == 0.0 else HEAVY_BALL

    def coordinate(self, lr, alpha, shrink, t):
        """The increment of plain SGD, γ = lr α times the gradient sum; μ and δ."""
        if self.rule.plain:
            return lr * alpha, PLAIN.Hyper()
        return lr * alpha, HEAVY_BALL.Hyper(self.momentum, shrink)

    def finite_step(self, W, state, G, X, const, l, t, backend):
        """W −= γ Gᵀ X as one in-place rank-B update (BLAS ger/gemm: no n × n temporary);
        with momentum or decay the update goes into the buffer D first."""
        lr = const.lr[l]
        if self.rule.plain:
            backend.add_outer(W, -lr, G, X)
            return
        (D,) = state
        shrink = self.shrinks(const.decay)[l]
        D *= self.momentum
        if shrink:
            D += shrink * W                                    # coupled decay, with W_t
        backend.add_outer(D, lr, G, X)
        W -= D
