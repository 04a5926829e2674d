"""The optimizer half of a training routine: :class:`SGD` and :class:`Adam` (docs/theory.md §10).

The parametrization's ``optimizer`` field ("sgd" or "adam") is the source of
the width exponents; these objects hold the width-free hyperparameters, stated
once and read by the finite and the limit engines alike:

* ``SGD(momentum=μ, weight_decay=λ)``: heavy-ball momentum with coupled
  (L2) decay, per layer l with learning rate η_l n^{-c_l} on w^l
  (η_l = η · lr_mult_l) and decay coefficient λ n^{c_l}:

      buf ← μ buf + ∇_w + λ n^{c_l} w,      w ← w − η_l n^{-c_l} buf.

  λ carries the width exponent c_l so that the per-step shrink factor
  η_l n^{-c_l} · λ n^{c_l} = η_l λ is width-free (docs/theory.md §10.1): a
  smaller exponent makes decay vanish as n → ∞, a larger one blow up.
* ``Adam(betas, eps, weight_decay=λ)``: Adam with decoupled (AdamW) decay
  w ← (1 − η_l λ) w − η_l n^{-c_l} m̂/(√v̂ + ε_l(n)).  ``eps`` is width-free:
  ε_l(n) = ε n^{-g_l}, with n^{-g_l} the size of layer l's gradient entries in
  w-units (:meth:`~tp_limits.MLP.eps_exponents`), so ε is measured in
  units of the Θ(1)-rescaled gradient entry, at every width and in the limit.

:func:`momentum_schedule` turns (μ, η_l λ) into the scalar recursions the
limit engines use: W_t = ρ_t W_0 − Σ_{s<t} C[t, s] γ G_s.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import SpecError
from .checks import finite_non_negative, unit_interval


@dataclass(frozen=True)
class SGD:
    """Stochastic gradient descent with heavy-ball momentum and coupled weight decay.

    ``momentum`` μ ∈ [0, 1); ``weight_decay`` λ >= 0 in width-free units: layer
    l decays by the factor 1 − η lr_mult_l λ per step at every width
    (docs/theory.md §10.1).  ``SGD()`` is plain SGD.
    """

    momentum: float = 0.0
    weight_decay: float = 0.0

    kind = "sgd"

    def __post_init__(self):
        object.__setattr__(self, "momentum", unit_interval(self.momentum, "momentum"))
        object.__setattr__(self, "weight_decay",
                           finite_non_negative(self.weight_decay, "weight_decay"))

    @property
    def plain(self) -> bool:
        """No momentum and no decay: the update is −γ ∇_W itself."""
        return self.momentum == 0.0 and self.weight_decay == 0.0

    def shrinks(self, lr_layers) -> tuple:
        """δ_l = η_l λ, the per-step shrink of each layer (η_l = η · lr_mult_l)."""
        return tuple(lr * self.weight_decay for lr in lr_layers)

    def __str__(self):
        return f"SGD(momentum={self.momentum:g}, weight_decay={self.weight_decay:g})"


@dataclass(frozen=True)
class Adam:
    """Adam with bias correction and decoupled (AdamW) weight decay.

    ``betas`` (β₁, β₂) ∈ [0, 1)²; ``eps`` >= 0 width-free (in units of the
    Θ(1)-rescaled gradient entry, docs/theory.md §10.3); ``weight_decay`` λ >= 0:
    w ← (1 − η_l λ) w before each Adam step (η_l = η · lr_mult_l).
    """

    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    kind = "adam"

    @property
    def momentum(self) -> float:
        """No heavy-ball momentum (β₁ plays that part): W_0 only decays."""
        return 0.0

    def __post_init__(self):
        try:
            b1, b2 = self.betas
        except (TypeError, ValueError):
            raise SpecError(f"betas = {self.betas!r} must be two numbers in [0, 1), "
                            "e.g. (0.9, 0.999)") from None
        object.__setattr__(self, "betas", (unit_interval(b1, "betas[0] (β₁)"),
                                           unit_interval(b2, "betas[1] (β₂)")))
        object.__setattr__(self, "eps", finite_non_negative(self.eps, "eps"))
        object.__setattr__(self, "weight_decay",
                           finite_non_negative(self.weight_decay, "weight_decay"))

    @property
    def plain(self) -> bool:
        return False

    shrinks = SGD.shrinks          # δ_l = η_l λ, the decoupled per-step shrink of each layer

    def __str__(self):
        return (f"Adam(betas=({self.betas[0]:g}, {self.betas[1]:g}), eps={self.eps:g}, "
                f"weight_decay={self.weight_decay:g})")


OPTIMIZER_TYPES = (SGD, Adam)


def default_optimizer(kind: str):
    """The optimizer a parametrization's ``optimizer`` field means when none is given."""
    return SGD() if kind == "sgd" else Adam()


def check_optimizer(optimizer, param_kind: str):
    """``optimizer`` (None: the default for ``param_kind``) checked against the
    parametrization, whose exponents assume one kind of optimizer."""
    if optimizer is None:
        return default_optimizer(param_kind)
    if not isinstance(optimizer, OPTIMIZER_TYPES):
        raise SpecError(f"optimizer must be tp.SGD(...) or tp.Adam(...), got {optimizer!r}")
    if optimizer.kind != param_kind:
        raise SpecError(
            f"the routine's optimizer is {optimizer.kind} but the parametrization's exponents "
            f"are for {param_kind}: build the parametrization with optimizer="
            f"{optimizer.kind!r} (e.g. tp.mup(L, optimizer={optimizer.kind!r})) so that both "
            "agree")
    return optimizer


def momentum_schedule(momentum: float, decay: float, T: int):
    """(ρ, C) with W_t = ρ_t W_0 − Σ_{s<t} C[t, s] γ G_s for heavy ball with coupled decay.

    The W-space step D_t = μ D_{t−1} + γ G_t + δ W_t and W_{t+1} = W_t − D_t
    (δ = η_l λ) are linear, so writing D_t = π_t W_0 + Σ_{s<=t} E[t, s] γ G_s,

        π_t = μ π_{t−1} + δ ρ_t,           ρ_{t+1} = ρ_t − π_t,
        E[t, s] = μ E[t−1, s] − δ C[t, s] (s < t),   E[t, t] = 1,
        C[t+1, s] = C[t, s] + E[t, s],

    from ρ_0 = 1 (docs/theory.md §10.2).  Plain SGD gives ρ ≡ 1 and C[t, s] = 1.
    Returns ρ (T+1,) and C (T+1, T), lower triangular (C[t, s] = 0 for s >= t).
    """
    rho = np.ones(T + 1)
    C = np.zeros((T + 1, T))
    pi, E = 0.0, np.zeros(T)
    for t in range(T):
        pi = momentum * pi + decay * rho[t]
        E = momentum * E - decay * C[t]
        E[t] = 1.0
        rho[t + 1] = rho[t] - pi
        C[t + 1] = C[t] + E
    return rho, C


def heavy_ball_step(Z, buf, increment, momentum: float, shrink: float):
    """One heavy-ball step with coupled decay on any linear state Z: returns (Z', buf').

        buf' = μ buf + increment + δ Z,     Z' = Z − buf'

    where ``increment`` is what plain SGD would subtract (the gradient step) and
    δ = η_l λ (docs/theory.md §10.1).  Particles, coefficient vectors of the
    exact engines and the kernel regime's function values all move by this rule.
    With μ = δ = 0 it is Z − increment exactly (``buf`` may then be None).
    """
    if momentum == 0.0 and shrink == 0.0:
        return Z - increment, increment
    new = increment if buf is None else momentum * buf + increment
    if shrink:
        new = new + shrink * Z
    return Z - new, new


def adam_direction(m, v, g, betas, eps: float, t: int, xp=np):
    """Adam's step direction ψ = m̂/(√v̂ + ε) after folding the gradient g into the
    moments m, v (updated in place); t counts updates from 1.

        m ← β₁ m + (1 − β₁) g,   v ← β₂ v + (1 − β₂) g²,
        ψ = (m / (√(v / (1 − β₂ᵗ)) + ε)) / (1 − β₁ᵗ)

    Everything goes through one scratch array the size of g, which is returned
    as ψ: for an n x n layer that is one temporary instead of about ten (each a
    full pass over memory).  Entries that have only seen zero gradients with
    ε = 0 get ψ = 0 instead of 0/0 (a zero-initialized readout gives exactly
    zero hidden gradients at step 0).
    """
    b1, b2 = betas
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
