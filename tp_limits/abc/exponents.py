"""Power-counting exponents of an abc-parametrization (docs/theory.md §1).

Every exponent the theory uses is the minimum of a few affine expressions in
the entries of (a, b, c).  :class:`MinOf` keeps such a minimum *unevaluated*,
so the same formulas serve two purposes:

* with numbers (``fractions.Fraction`` and ``math.inf``) they give the exact
  values used by :func:`tp_limits.abc.classify.classify`;
* with SymPy expressions holding free symbols they give exact conditions
  (``min(x, y) >= k  <=>  x >= k and y >= k``), which SymPy can solve.

Definitions (SGD; TP4 with per-layer learning-rate exponents c_l):

    p    = a_{L+1} + b_{L+1}                      readout entries at init ~ n^-p
    q    = 2 a_{L+1} + c_{L+1}                    readout update entries ~ n^-q
    m    = min(p, q)                              backward signal ~ n^-m
    r_l  = m + 2 a_l + c_l - 1 + [l = 1]          Delta W^l x^{l-1} ~ n^-r_l
    r    = min_l r_l,   rho_l = min_{k<=l} r_k    Delta h^l, Delta x^l ~ n^-rho_l

Other optimizers by their update rule (update_rules.py): with W-space steps
n^{-(k a_l + c_l)} and, for entrywise-normalized updates (Adam, docs/theory.md
§1.7), no backward factor n^-m:

    q = k a_{L+1} + c_{L+1},   r_l = k a_l + c_l - 1 + [l = 1],   m = min(p, q)

The backward signal at step 0 is n^-p, not n^-m: pass ``first_step=True`` to
get the exponents of the very first update (they matter when q < p, e.g. a
zero-initialized readout).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import sympy

from .update_rules import update_rule


class MinOf:
    """The minimum of a finite tuple of affine terms, kept unevaluated."""

    __slots__ = ("terms",)

    def __init__(self, terms):
        seen = []
        for t in terms:
            if not any(t is s or t == s for s in seen):
                seen.append(t)
        self.terms = tuple(seen)

    # -- arithmetic -------------------------------------------------------
    def __add__(self, other):
        if isinstance(other, MinOf):
            return MinOf(x + y for x in self.terms for y in other.terms)
        return MinOf(x + other for x in self.terms)

    __radd__ = __add__

    def __sub__(self, other):
        return self + (-other)

    @staticmethod
    def of(*mins: "MinOf") -> "MinOf":
        """min(m_1, m_2, ...) of several MinOf objects."""
        return MinOf(t for m in mins for t in m.terms)

    # -- evaluation -------------------------------------------------------
    def value(self):
        """The numeric minimum (terms must be comparable numbers)."""
        return min(self.terms)

    # -- exact conditions (SymPy) ----------------------------------------
    def ge(self, k):
        """min(terms) >= k  as a SymPy boolean."""
        return sympy.And(*[sympy.Ge(sympy.sympify(t), k) for t in self.terms])

    def gt(self, k):
        return sympy.And(*[sympy.Gt(sympy.sympify(t), k) for t in self.terms])

    def eq(self, k):
        """min(terms) == k  <=>  every term >= k and some term == k."""
        return sympy.And(self.ge(k), sympy.Or(*[sympy.Eq(sympy.sympify(t), k)
                                                for t in self.terms]))

    def __repr__(self):
        return "min(" + ", ".join(map(str, self.terms)) + ")"


@dataclass(frozen=True)
class Exponents:
    """The exponents of §1.1, each a :class:`MinOf`."""

    p: MinOf
    q: MinOf
    m: MinOf
    r_layers: tuple
    r: MinOf
    rho_layers: tuple


def exponents(a: Sequence, b: Sequence, c: Sequence, optimizer: str = "sgd",
              first_step: bool = False) -> Exponents:
    """Compute p, q, m, r_l, r, rho_l for exponents a, b, c (layers 1..L+1).

    ``a``, ``b``, ``c`` hold numbers or SymPy expressions; ``c`` is per layer.
    """
    L = len(a) - 1
    rule = update_rule(optimizer)
    k = rule.a_factor
    p = MinOf([a[L] + b[L]])
    q = MinOf([k * a[L] + c[L] + rule.entry_exponent(L, L)])
    m = MinOf.of(p, q)
    if rule.normalized:
        # a normalized update does not carry the backward size n^-m; its entries are
        # n^-e_l whatever the gradient (Muon: n^{-1/2} per width-n side)
        r_layers = tuple(MinOf([k * a[l] + c[l] - 1 + (1 if l == 0 else 0)
                                + rule.entry_exponent(l, L)]) for l in range(L))
    else:
        signal = p if first_step else m
        r_layers = tuple(signal + (k * a[l] + c[l] - 1 + (1 if l == 0 else 0))
                         for l in range(L))
    rho = []
    for l in range(L):
        rho.append(MinOf.of(*r_layers[: l + 1]))
    r = rho[-1]
    return Exponents(p=p, q=q, m=m, r_layers=r_layers, r=r, rho_layers=tuple(rho))
