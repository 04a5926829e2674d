"""Exponents as exact values: parsing user input into SymPy, printing them back.

Shared by the parametrization (parametrization.py) and the modules that compute on
it, which need no more of it than these.
"""
from __future__ import annotations

import math
import numbers
from fractions import Fraction
from tokenize import TokenError

import sympy

from ..errors import InvalidParametrizationError

_INFINITY_WORDS = {"oo", "inf", "infinity", "+inf", "∞"}


def parse_exponent(value, name: str, allow_infinity: bool = False) -> sympy.Expr:
    """Turn an int, Fraction, exact float, string or SymPy expression into SymPy.

    Strings are parsed exactly (``"-1/2"`` is ``Rational(-1, 2)``, ``"0.5"``
    is ``1/2``); names in strings become free symbols.
    """
    if isinstance(value, bool):
        raise InvalidParametrizationError(f"{name} = {value!r}: a bool is not an exponent")
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in _INFINITY_WORDS:
            expr = sympy.oo
        elif any(op in text for op in ("//", "%", "==", "<", ">", "&", "|", "^")):
            raise InvalidParametrizationError(
                f"{name} = {value!r} is not an exponent: use numbers, + - * / ** and names, "
                "e.g. '1/2' or '-1/2 + c'")
        else:
            try:
                expr = sympy.sympify(text, rational=True)
            except (sympy.SympifyError, SyntaxError, TypeError, TokenError) as exc:
                raise InvalidParametrizationError(
                    f"{name} = {value!r} is not a number or a SymPy expression ({exc})") from None
    elif isinstance(value, Fraction):
        expr = sympy.Rational(value.numerator, value.denominator)
    elif isinstance(value, numbers.Integral):
        expr = sympy.Integer(int(value))
    elif isinstance(value, numbers.Real) and not isinstance(value, sympy.Basic):
        x = float(value)
        if math.isnan(x):
            raise InvalidParametrizationError(f"{name} is NaN; exponents must be numbers")
        expr = sympy.oo if x == math.inf else (
            -sympy.oo if x == -math.inf else sympy.Rational(repr(x)))
    elif isinstance(value, sympy.Basic):
        expr = value
    else:
        raise InvalidParametrizationError(
            f"{name} = {value!r} has type {type(value).__name__}; use an int, a "
            "string like '-1/2', a Fraction or a SymPy expression")
    if not isinstance(expr, sympy.Expr) or expr is sympy.nan or expr.has(sympy.nan):
        raise InvalidParametrizationError(f"{name} = {value!r} is not a real exponent")
    if expr.is_extended_real is False:
        raise InvalidParametrizationError(f"{name} = {value!r} is not real")
    if expr in (sympy.oo, -sympy.oo, sympy.zoo):
        if not (allow_infinity and expr == sympy.oo):
            raise InvalidParametrizationError(
                f"{name} = {value!r}: only b_(L+1) may be +oo (a readout initialized to zero)")
    return expr


def fmt(x) -> str:
    """Exact, compact text for an exponent (Fraction, float inf or SymPy)."""
    if isinstance(x, float) and math.isinf(x):
        return "oo" if x > 0 else "-oo"
    if isinstance(x, Fraction):
        return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    return str(x)


def fmt_tuple(xs) -> str:
    return "(" + ", ".join(fmt(x) for x in xs) + ")"
