"""Per-example losses ℓ(f, y) and their gradients ∇_f ℓ (docs/theory.md §0).

* ``mse``:  ℓ = ½‖f − y‖²,                     ∇ = f − y
* ``xent``: ℓ = logsumexp(f) − ⟨y, f⟩,         ∇ = softmax(f) − y   (y one-hot)

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


LOSSES = {
    "mse": Loss("mse", lambda f, y, xp: 0.5 * ((f - y) ** 2).sum(axis=1),
                lambda f, y, xp: f - y),
    "xent": Loss("xent", _xent_value, lambda f, y, xp: _softmax(f, xp) - y),
}


def get_loss(name: str) -> Loss:
    try:
        return LOSSES[name]
    except (KeyError, TypeError):
        raise SpecError(f"unknown loss {name!r}; choose one of {sorted(LOSSES)}") from None
