"""Per-example losses ℓ(f, y) and their gradients ∇_f ℓ (docs/theory.md §0).

* ``mse``:  ℓ = ½‖f − y‖²,                     ∇ = f − y
* ``xent``: ℓ = logsumexp(f) − ⟨y, f⟩,         ∇ = softmax(f) − y   (y one-hot)
* ``sgns``: ℓ = Σ_j |y_j| log(1 + e^{f_j}) − y_j⁺ f_j,  ∇_j = |y_j| σ(f_j) − y_j⁺:
  the logistic loss of negative sampling (docs/theory.md §15.1).  y_j > 0 marks a
  positive output (weight y_j: −y_j log σ(f_j)), y_j < 0 a negative sample drawn |y_j|
  times (−|y_j| log σ(−f_j)), y_j = 0 an output the example ignores.

Arrays have shape (B, d_out); ``value`` returns shape (B,).  The training
loss is the batch *mean*, so the engines use χ = ∇ / B.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .errors import SpecError


@dataclass(frozen=True)
class Loss:
    name: str
    value: Callable      # (f, y, xp) -> (B,)
    grad: Callable       # (f, y, xp) -> (B, d_out)


def _softmax(f, xp):
    z = f - f.max(axis=1, keepdims=True)
    e = xp.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _xent_value(f, y, xp):
    mx = f.max(axis=1, keepdims=True)
    lse = (mx + xp.log(xp.exp(f - mx).sum(axis=1, keepdims=True)))[:, 0]
    return lse - (f * y).sum(axis=1)


def _sgns_value(f, y, xp):
    return (xp.abs(y) * xp.logaddexp(0.0, f) - xp.maximum(y, 0.0) * f).sum(axis=1)


def _sgns_grad(f, y, xp):
    # σ(f) = (1 + tanh(f/2))/2 does not overflow for any f
    return xp.abs(y) * (0.5 + 0.5 * xp.tanh(0.5 * f)) - xp.maximum(y, 0.0)


LOSSES = {
    "mse": Loss("mse", lambda f, y, xp: 0.5 * ((f - y) ** 2).sum(axis=1),
                lambda f, y, xp: f - y),
    "xent": Loss("xent", _xent_value, lambda f, y, xp: _softmax(f, xp) - y),
    "sgns": Loss("sgns", _sgns_value, _sgns_grad),
}


def get_loss(name: str) -> Loss:
    try:
        return LOSSES[name]
    except (KeyError, TypeError):
        raise SpecError(f"unknown loss {name!r}; choose one of {sorted(LOSSES)}") from None
