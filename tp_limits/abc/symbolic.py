"""The classification conditions as SymPy booleans, and their solution sets.

Each exponent is a minimum of affine terms (:class:`~.exponents.MinOf`), so
every condition is a finite combination of linear (in)equalities in the
exponents; ``min(x, y) >= k`` becomes ``x >= k & y >= k`` and
``min(x, y) = k`` becomes ``x >= k & y >= k & (x = k | y = k)``.
:func:`region` hands the result to SymPy: a univariate condition becomes a
``Set`` (e.g. SP with symbolic c: stable iff c in [1, oo)).
"""
from __future__ import annotations

import sympy

from ..errors import InvalidParametrizationError
from .exponents import exponents

HALF = sympy.Rational(1, 2)


def conditions(param) -> dict:
    """Return the conditions of docs/theory.md §1.2 as SymPy booleans.

    Keys: the six stability conditions (``input_init``, ``hidden_init``,
    ``readout_init``, ``features``, ``readout_update``, ``readout_features``)
    and the derived ``stable``, ``nontrivial``, ``feature_learning``,
    ``kernel_regime``.  ``nontrivial`` and the regimes include stability.
    """
    a, b, c = param.a, param.b, param.c
    e = exponents(a, b, c, param.optimizer)
    L = param.L
    pr = e.p + e.r
    out = {
        "input_init": sympy.Eq(a[0] + b[0], 0),
        "hidden_init": sympy.And(*[sympy.Eq(a[l] + b[l], HALF) for l in range(1, L)]),
        "readout_init": e.p.ge(HALF),
        "features": e.r.ge(0),
        "readout_update": e.q.ge(1),
        "readout_features": pr.ge(1),
    }
    stable = sympy.And(*out.values())
    nontrivial = sympy.And(stable, sympy.Or(pr.eq(1), e.q.eq(1)))
    out["stable"] = stable
    out["nontrivial"] = nontrivial
    out["feature_learning"] = sympy.And(nontrivial, e.r.eq(0))
    out["kernel_regime"] = sympy.And(nontrivial, e.r.gt(0))
    return out


def region(param, *symbols) -> dict:
    """Solve stability, nontriviality and the regimes for free symbols.

    With one free symbol, each entry is a SymPy ``Set`` of the real values for
    which the property holds (``sp(2, c=c).region(c)["stable"]`` is
    ``Interval(1, oo)``).  With several, each entry is the simplified SymPy
    boolean in those symbols.
    """
    free = param.free_symbols
    if not symbols:
        symbols = tuple(sorted(free, key=str))
    unknown = [s for s in symbols if s not in free]
    if unknown:
        raise InvalidParametrizationError(
            f"{unknown} are not free symbols of this parametrization "
            f"(free symbols: {sorted(map(str, free)) or 'none'})")
    if set(symbols) != free:
        raise InvalidParametrizationError(
            f"region() needs every free symbol solved for; missing "
            f"{sorted(map(str, free - set(symbols)))}. Fix them first with p.subs(...)")
    conds = conditions(param)
    keys = ("stable", "nontrivial", "feature_learning", "kernel_regime")
    if len(symbols) == 1:
        (s,) = symbols
        return {k: _as_set(conds[k], s) for k in keys}
    return {k: sympy.simplify(conds[k]) for k in keys}


def _as_set(cond, symbol):
    if cond is sympy.true:
        return sympy.S.Reals
    if cond is sympy.false:
        return sympy.S.EmptySet
    real = sympy.Symbol(symbol.name, real=True)
    return cond.subs(symbol, real).as_set()
