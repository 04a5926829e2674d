"""Adam with bias correction and decoupled (AdamW) weight decay (docs/theory.md §10.3,
§10.5, §10.6).

Per entry of a weight, with g its gradient in the units of ε and t the update count,

    m ← β₁ m + (1 − β₁) g,    v ← β₂ v + (1 − β₂) g²,
    ψ = (m / (1 − β₁ᵗ)) / (√(v / (1 − β₂ᵗ)) + ε),    w ← (1 − η_l λ) w − η_l n^{-c_l} ψ.

``eps`` is width-free: the finite net uses ε n^{-g_l}, with n^{-g_l} the size of layer
l's gradient entries in w-units (the classifier's ``eps_exponents``), so ε is measured
in units of the Θ(1)-rescaled gradient entry at every width and in the limit.  An
entry that has seen only zero gradients with ε = 0 does not move (0/0 read as 0: a
zero-initialized readout gives exactly zero hidden gradients at step 0).

The update is not linear in the gradients: a particle's own coordinates move by the
rule below (one-hidden-layer limit, §10.5), and a deep hidden matrix's entries are
followed through partner particles with :meth:`Adam.direction` (§10.6).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...elementwise import where
from ...errors import SpecError
from ..checks import check_sequence, finite_non_negative, unit_interval
from .base import Optimizer, coordinate_rule, decay_field, hyperparameter


def _adam(z, g, m, v, h):
    m = h.beta1 * m + (1.0 - h.beta1) * g
    v = h.beta2 * v + (1.0 - h.beta2) * g * g
    den = np.sqrt(v / h.bias2) + h.eps
    psi = where(den > 0.0, (m / h.bias1) / where(den > 0.0, den, 1.0), 0.0)
    return (1.0 - h.shrink) * z - h.lr * psi, m, v


class AdamHyper(NamedTuple):
    beta1: float
    beta2: float
    eps: float
    bias1: float           # 1 − β₁ᵗ
    bias2: float           # 1 − β₂ᵗ
    lr: float
    shrink: float


ADAM = coordinate_rule("adam", ("m", "v"), AdamHyper, _adam)


def _betas(value, name):
    values = check_sequence(value, name, "two numbers in [0, 1)")
    try:
        b1, b2 = values
    except ValueError:
        raise SpecError(f"{name} = {value!r} must be two numbers in [0, 1), e.g. (0.9, 0.999)"
                        ) from None
    return unit_interval(b1, f"{name}[0] (β₁)"), unit_interval(b2, f"{name}[1] (β₂)")


@dataclass(frozen=True)
class Adam(Optimizer):
    """Adam with bias correction and decoupled (AdamW) weight decay.

    ``betas`` (β₁, β₂) ∈ [0, 1)²; ``eps`` >= 0 width-free (in units of the
    Θ(1)-rescaled gradient entry, docs/theory.md §10.3); ``weight_decay`` λ >= 0:
    w ← (1 − η_l λ) w before each Adam step (η_l = η · lr_mult_l).
    """

    betas: tuple = hyperparameter((0.9, 0.999), _betas, "Adam's (β₁, β₂)", toml="adam_betas",
                                  kind="numbers")
    eps: float = hyperparameter(1e-8, finite_non_negative,
                                "Adam's ε in width-free units (docs/theory.md §10.3)",
                                toml="adam_eps")
    weight_decay: float = decay_field()

    name = "adam"
    exponents = "adam"

    @property
    def linear(self) -> bool:
        return False

    @property
    def rule(self):
        return ADAM

    def coordinate(self, lr, alpha, shrink, t, rate=1.0):
        """Fed the gradient ĝ = α Σ in the units of ε; the rate and bias corrections of
        the t-th update in the hyperparameters (the schedule's factor scales the step and
        the decoupled decay, as PyTorch's AdamW does)."""
        b1, b2 = self.betas
        return alpha, ADAM.Hyper(b1, b2, self.eps, 1 - b1 ** t, 1 - b2 ** t, lr * rate,
                                 shrink * rate)

    def direction(self, state, g, t, xp, eps=None):
        """ψ = m̂/(√v̂ + ε) after folding g into the moments (m, v) = ``state``, in place.

        Everything goes through one scratch array the size of g, which is returned
        as ψ: for an n × n layer that is one temporary instead of about ten (each a
        full pass over memory).  ``eps`` defaults to the width-free ε (the limit's).
        """
        m, v = state
        b1, b2 = self.betas
        eps = self.eps if eps is None else eps
        s = xp.empty_like(g)
        xp.multiply(g, 1 - b1, out=s)
        m *= b1
        m += s
        xp.multiply(g, g, out=s)
        s *= 1 - b2
        v *= b2
        v += s
        xp.divide(v, 1 - b2 ** t, out=s)
        xp.sqrt(s, out=s)
        s += eps                                        # the denominator √v̂ + ε
        if eps > 0:
            xp.divide(m, s, out=s)
        else:
            s = xp.where(s > 0, m / xp.where(s > 0, s, 1.0), 0.0)
        s /= 1 - b1 ** t
        return s

    def finite_step(self, W, state, G, X, const, l, t, backend, rate=1.0):
        """Adam on w = n^{a_l} W: the w-gradient n^{-a_l} Gᵀ X, ε n^{-g_l}, and the step
        mapped back, ΔW = −n^{-a_l} s η_l n^{-c_l} ψ; decoupled decay (1 − s δ) first
        (s: the schedule's factor)."""
        g_w = backend.matmul(G.T, X)
        g_w *= const.w_scale[l]                                 # gradient in w-units
        psi = self.direction(state, g_w, t, backend.xp, self.eps * const.eps_scale[l])
        shrink = self.shrinks(const.decay)[l] * rate
        if shrink:
            W *= 1.0 - shrink                                   # decoupled (AdamW) decay
        psi *= const.w_scale[l] * const.adam_lr[l] * rate       # in place: no temporary
        W -= psi
