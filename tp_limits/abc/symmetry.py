"""The symmetry of abc-parametrizations (docs/theory.md §1.4).

For SGD the map  (a_l, b_l, c_l) -> (a_l + θ_l, b_l - θ_l, c_l - 2θ_l)
leaves W_0 in distribution and every update ΔW unchanged, hence the whole
training trajectory at every finite width n: with W = n^{-a-θ} w',
w' = n^θ w, the gradient picks up n^{-a-θ} and the learning rate n^{2θ}.
For Adam (scale-invariant updates) the map is c_l -> c_l - θ_l: in general
c_l -> c_l - k θ_l with k the optimizer's ``a_factor`` (update_rules.py).

With one global c the shift must be the same for every layer, unless the
result is allowed per-layer learning rates; :func:`shift` always returns
per-layer c (a global c is just a per-layer c with equal entries).
"""
from __future__ import annotations

from typing import Sequence

import sympy

from ..errors import InvalidParametrizationError
from .exponent_values import parse_exponent
from .update_rules import update_rule


def _thetas(theta, L1: int) -> tuple:
    if isinstance(theta, Sequence) and not isinstance(theta, str):
        if len(theta) != L1:
            raise InvalidParametrizationError(
                f"theta has {len(theta)} entries; give one number or {L1} (one per layer)")
        return tuple(parse_exponent(t, f"theta_{i + 1}") for i, t in enumerate(theta))
    return (parse_exponent(theta, "theta"),) * L1


def shift(param, theta):
    """Apply the symmetry with shift theta (a number or one per layer)."""
    th = _thetas(theta, param.L + 1)
    k = update_rule(param.optimizer).a_factor
    a = [x + t for x, t in zip(param.a, th)]
    # oo - θ stays oo: a zero readout stays zero.
    b = [x - t for x, t in zip(param.b, th)]
    c = [x - k * t for x, t in zip(param.c, th)]
    return type(param)(a, b, c, param.optimizer, param.name)


def canonical(param):
    """The representative with a = 0 (shift by θ_l = -a_l)."""
    out = shift(param, [-x for x in param.a])
    return type(param)(out.a, out.b, out.c, out.optimizer,
               name=f"{param.name} (a=0 form)" if param.name and
               not param.name.endswith("(a=0 form)") else param.name)


def equivalent(p, q) -> bool:
    """True iff p and q lie in the same symmetry orbit (identical training)."""
    if not isinstance(q, type(p)):
        raise InvalidParametrizationError(
            f"equivalent() compares two parametrizations (tp.ABC), got {type(q).__name__}")
    if p.L != q.L or p.optimizer != q.optimizer:
        return False
    cp, cq = canonical(p), canonical(q)
    return all(sympy.simplify(x - y) == 0 if not (x == sympy.oo or y == sympy.oo) else x == y
               for x, y in zip(cp.b + cp.c, cq.b + cq.c))
