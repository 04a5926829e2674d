"""The nearest fix of a parametrization: the smallest change of its learning-rate
exponents c_l and of its readout's initialization exponent b_{L+1} that makes it stable
and feature learning with every layer updated maximally (docs/theory.md §1.5).

These are the knobs a practitioner turns (each layer's rate, the readout's initial
scale), and they separate: c_{L+1} and b_{L+1} set the readout's exponents q and p, hence
the backward signal m = min(p, q); then each c_l (l <= L) moves its own r_l and nothing
else, one for one (r_l = m + k a_l + c_l − 1 + [l = 1], and the same without m for an
entrywise-normalized update; exponents.py).  So c_{L+1} is set to make q = 1 (q moves one
for one with it), b_{L+1} is searched in steps of 1/2 up to ``RADIUS`` steps either way,
every c_l is set to make r_l = 0, and the fix with the smallest total change,
Σ_l |Δc_l| + |Δb_{L+1}|, is kept.  Every candidate is
classified exactly, so a fix it reports is a theorem, not a heuristic.  Keeping a and the
other b fixed loses nothing: the symmetry (a + θ, b − θ, c − 2θ) reaches every other member
of a fix's class (docs/theory.md §1.3).  The initial-scale conditions (a_1 + b_1 = 0,
a_l + b_l = 1/2) are not knobs here: a parametrization that breaks one has no fix, and
its violations say what to change.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace

from .exponent_values import fmt

STEP = Fraction(1, 2)
#: the most half-unit steps of b_{L+1} searched either way
RADIUS = 8


@dataclass(frozen=True)
class Fix:
    """A nearest fix: ``changes`` as (exponent name, old, new), consecutive layers with the
    same change merged ("c_2..c_4"); ``a``, ``b``, ``c`` the fixed exponents (Fractions)."""

    changes: tuple
    a: tuple
    b: tuple
    c: tuple

    def __str__(self) -> str:
        return (", ".join(f"{name} {fmt(old)} → {fmt(new)}" for name, old, new in self.changes)
                + ": feature learning, every layer updated maximally")


def _fraction(x):
    """A classification's exponent (SymPy) as a Fraction; None when infinite."""
    if not x.is_Rational:
        return None
    return Fraction(int(x.p), int(x.q))


def _changes(old_b, new_b, old_c, new_c) -> tuple:
    L = len(old_c) - 1
    out, l = [], 0
    while l <= L:
        if old_c[l] == new_c[l]:
            l += 1
            continue
        m = l
        while (m + 1 < L and l >= 1 and old_c[m + 1] == old_c[l]
               and new_c[m + 1] == new_c[l]):
            m += 1                       # a run of hidden layers with the same change
        out.append((f"c_{l + 1}" if m == l else f"c_{l + 1}..c_{m + 1}", old_c[l], new_c[l]))
        l = m + 1
    if old_b[L] != new_b[L]:
        out.append((f"b_{L + 1}", old_b[L], new_b[L]))
    return tuple(out)


def nearest_fix(k, classify) -> Fix | None:
    """The nearest fix of the parametrization that ``k`` (a Classification) classifies,
    each candidate judged by ``classify`` (classify.py's, passed in: the verdicts live
    there); None when it needs none (feature learning with every layer updated
    maximally), when it is symbolic, or when no fix is within reach (see the module
    docstring)."""
    P = k.parametrization
    if P.is_symbolic or (k.regime == "feature_learning" and all(k.updated_maximally)):
        return None
    a, b, c = P._fractions
    L = len(a) - 1

    def verdict(b_, c_):
        return classify(SimpleNamespace(_fractions=(a, tuple(b_), tuple(c_)), L=L,
                                        optimizer=P.optimizer))

    # the readout updates maximally iff q = 1, and q moves one for one with c_{L+1}
    q = _fraction(k.q)
    if q is None:
        return None
    c_last = c[L] + 1 - q
    best = None
    for db in [0] if math.isinf(b[L]) else range(-RADIUS, RADIUS + 1):
        b1 = b[:L] + (b[L] + db * STEP,)
        c1 = c[:L] + (c_last,)
        r = [_fraction(x) for x in verdict(b1, c1).r_layers]
        if any(x is None for x in r):
            continue
        c2 = tuple(c1[l] - r[l] for l in range(L)) + (c_last,)
        got = verdict(b1, c2)
        if got.regime != "feature_learning" or not all(got.updated_maximally):
            continue
        moved = [abs(x - y) for x, y in zip(c2, c)] + [abs(b1[L] - b[L])]
        rank = (sum(moved), sum(x != 0 for x in moved), abs(db), db)
        if best is None or rank < best[0]:
            best = (rank, b1, c2)
    if best is None:
        return None
    _, b1, c2 = best
    return Fix(_changes(b, b1, c, c2), a, b1, c2)
