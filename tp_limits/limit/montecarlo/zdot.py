"""The Ż estimators of the deep Monte Carlo engine, as objects (docs/theory.md §4).

The forward product W^l x gets Ż^{W^l x} = σ_l² Σ_j Z^{δh^l_j} E[∂Z^x/∂ĝ_j] over the
backward hats ĝ_j of G^l; the backward product W^lᵀ δh gets
σ_l² Σ_e Z^{x_e} E[∂Z^{δh}/∂f̂_e] over the forward hats f̂_e of F^l (the
current step's included).  An estimator returns these coefficients
σ_l² E[∂Z/∂ĥ] (k, m) for the m new rows:

* :class:`NoZdot` — zero: the partially decoupled dynamics (docs/theory.md §3);
* :class:`SteinZdot` — Stein's lemma: the least-squares coefficients of Z on
  the family's sampled hats (time ∝ T², no extra memory; the default);
* :class:`TangentZdot` — forward-mode derivatives carried by every particle
  (tangent.py): exact given the particles, time ∝ T³, memory ∝ (BT)².

The tangent estimator must follow every variable through the step, so every
estimator exposes the same propagation hooks; for the first two they carry
nothing (``None``) and cost nothing; the engine asks only ``carries_tangents``, to skip
the φ′ and φ″ they would ignore.
"""
from __future__ import annotations

import numpy as np

from ...errors import SpecError
from .tangent import Tangents, tangent_bytes_per_particle

NAMES = ("stein", "tangent")


class NoZdot:
    """No Ż terms: every coefficient is zero; no tangents are tracked."""

    name = "none (decoupled)"
    #: whether a step's evaluation rows may share its training forward pass (only the
    #: tangent estimator, whose unit columns belong to stored rows, needs them apart)
    fuses_eval = True
    #: whether the tangent hooks below carry anything: the engine skips computing φ′ and
    #: φ″ of every row for them when they do not (half the φ work of a Stein step)
    carries_tangents = False

    def __init__(self, xp=np):
        self.xp = xp                 # the array module of the run's particles

    @staticmethod
    def bytes_per_particle(L, d, do, B, T, E) -> float:
        return 0.0

    # -- coefficients (k, m) on the other family's stored vectors ------------------------
    def forward(self, l, x, t_x, other):
        return self.xp.zeros((other.k, len(x)))

    def backward(self, l, dh, t_dh, other):
        return self.xp.zeros((other.k, len(dh)))

    # -- tangent propagation: nothing to carry -------------------------------------------
    def input(self, X):
        return None

    def activation(self, t_h, dphi):
        return None

    def forward_tangent(self, l, coef, k, m, new_index):
        return None

    def backward_tangent(self, l, coef, k, m, new_index):
        return None

    def keep_forward(self, l, k0, t_x) -> None:
        pass

    def keep_backward(self, l, k0, t_dh) -> None:
        pass

    def readout(self, alpha, chi):
        return None

    def backprop(self, t_dx, dphi, dx, d2phi, t_h):
        return None

    def update(self, eta_in, Xb, t_dh1, eta_out, alpha, chi, t_xL) -> None:
        pass


class SteinZdot(NoZdot):
    """Regression on the sampled hats (families.Family.stein_coefficients)."""

    name = "stein"

    def forward(self, l, x, t_x, other):
        return other.stein_coefficients(x)

    def backward(self, l, dh, t_dh, other):
        return other.stein_coefficients(dh)


class TangentZdot(NoZdot):
    """Particle means of forward-mode derivatives (tangent.Tangents).

    The derivative of δh = δx φ′(h) contains δx φ″(h) J_h; for a φ with kinks
    φ″ has point masses that particles never see, so the estimator is refused
    for such φ (relu) before any work: Stein has no such restriction.
    """

    name = "tangent"
    fuses_eval = False
    carries_tangents = True
    bytes_per_particle = staticmethod(tangent_bytes_per_particle)

    def __init__(self, N, L, d, do, cap, sigma, B, xp=np):
        super().__init__(xp)
        self.tan = Tangents(N, L, d, do, cap, sigma, B, xp)

    def forward(self, l, x, t_x, other):
        return self.tan.forward_zdot(l, t_x, other.k)

    def backward(self, l, dh, t_dh, other):
        return self.tan.backward_zdot(l, t_dh, other.k)

    def input(self, X):
        return self.tan.input(X)

    def activation(self, t_h, dphi):
        return self.tan.times(t_h, dphi)

    def forward_tangent(self, l, coef, k, m, new_index):
        return self.tan.forward_J(l, coef, k, m, new_index)

    def backward_tangent(self, l, coef, k, m, new_index):
        return self.tan.backward_J(l, coef, k, m, new_index)

    def keep_forward(self, l, k0, t_x) -> None:
        self.tan.store_forward(l, k0, t_x)

    def keep_backward(self, l, k0, t_dh) -> None:
        self.tan.store_backward(l, k0, t_dh)

    def readout(self, alpha, chi):
        return self.tan.readout(alpha, chi)

    def backprop(self, t_dx, dphi, dx, d2phi, t_h):
        return self.tan.product(t_dx, dphi, dx, d2phi, t_h)

    def update(self, eta_in, Xb, t_dh1, eta_out, alpha, chi, t_xL) -> None:
        self.tan.update(eta_in, Xb, t_dh1, eta_out, alpha, chi, t_xL)


def estimator_class(zdot: str, decoupled: bool, nonlinearity):
    """The estimator class for the options; refuses tangents through a φ with kinks."""
    if decoupled:
        return NoZdot
    if zdot == "tangent":
        if not nonlinearity.smooth:
            raise SpecError(
                f"zdot='tangent' needs a smooth nonlinearity: {nonlinearity.name}'s φ″ has a "
                "point mass at its kink that particles never sample, which biases the "
                "tangent estimator. Use zdot='stein' (the default), which has no such bias")
        return TangentZdot
    return SteinZdot


def make_estimator(cls, N, L, d, do, cap, sigma, B, xp=np):
    return cls(N, L, d, do, cap, sigma, B, xp) if cls is TangentZdot else cls(xp)
