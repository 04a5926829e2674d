"""The abc-parametrization of an MLP (docs/theory.md §0, §1).

A width-n MLP with L hidden layers is abc-parametrized when

    W^l = n^{-a_l} w^l,   w^l_{ij} ~ N(0, sigma_l^2 n^{-2 b_l}) at init,
    w^l  <-  w^l - eta_l n^{-c_l} grad_{w^l} loss        (SGD),

for layers l = 1..L+1 (TP4 indexing: layer L+1 is the readout).
``b_{L+1} = oo`` initializes the readout to exactly zero.

:class:`ABC` stores the exponents exactly (SymPy ``Rational`` or expressions
with free symbols) and is the entry point of the symbolic layer.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from tokenize import TokenError
from typing import Sequence

import sympy

from ..errors import InvalidParametrizationError, SymbolicParametrizationError
from .update_rules import update_rule

#: Deeper networks than this are refused: the exact classification grows with L (about
#: 1 s at L = 1000) and no engine could simulate them.
MAX_L = 1000
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


def _exponent_tuple(values, name: str, L1: int, infinite_last: bool = False) -> tuple:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        try:
            values = list(values)
        except TypeError:
            raise InvalidParametrizationError(
                f"{name} must be a sequence of L+1 exponents, got {values!r}") from None
    if len(values) != L1:
        raise InvalidParametrizationError(
            f"{name} has {len(values)} entries but a has {L1}: give one exponent per "
            f"layer 1..L+1 (L = {L1 - 1} hidden layers)")
    return tuple(parse_exponent(v, f"{name}_{i + 1}",
                                allow_infinity=infinite_last and i == L1 - 1)
                 for i, v in enumerate(values))


@dataclass(frozen=True, init=False)
class ABC:
    """An abc-parametrization: exponents a_l, b_l, c_l for layers l = 1..L+1.

    Parameters
    ----------
    a, b : sequences of L+1 exponents (ints, strings like ``"-1/2"``,
        Fractions, or SymPy expressions, free symbols allowed).  ``b[L]`` may
        be ``sympy.oo`` (or ``"oo"``): the readout starts at exactly zero.
    c : one exponent (TP4's global learning-rate exponent) or L+1 of them.
    optimizer : the name of the optimizer whose width exponents apply: ``"sgd"`` or
        ``"adam"`` (docs/theory.md §1.7; update_rules.py).
    name : a label used in tables and reports.
    """

    a: tuple
    b: tuple
    c: tuple
    optimizer: str = "sgd"
    name: str = field(default="", compare=False)

    def __init__(self, a, b, c=0, optimizer: str = "sgd", name: str = ""):
        if isinstance(a, (str, bytes)) or not hasattr(a, "__len__"):
            raise InvalidParametrizationError(
                f"a must be a sequence of L+1 exponents (layers 1..L+1), got {a!r}")
        L1 = len(a)
        if L1 < 2:
            raise InvalidParametrizationError(
                f"a has {L1} entr{'y' if L1 == 1 else 'ies'}; an MLP needs L >= 1 hidden "
                "layer, so a, b need L+1 >= 2 entries (input layer .. readout)")
        if L1 - 1 > MAX_L:
            raise InvalidParametrizationError(
                f"L = {L1 - 1} hidden layers exceeds the supported maximum of {MAX_L}")
        update_rule(optimizer)                  # a known optimizer, or a clear error
        a_t = _exponent_tuple(a, "a", L1)
        b_t = _exponent_tuple(b, "b", L1, infinite_last=True)
        if isinstance(c, (str, bytes)) or not hasattr(c, "__len__") or isinstance(c, sympy.Basic):
            c_t = (parse_exponent(c, "c"),) * L1
        else:
            c_t = _exponent_tuple(c, "c", L1)
        object.__setattr__(self, "a", a_t)
        object.__setattr__(self, "b", b_t)
        object.__setattr__(self, "c", c_t)
        object.__setattr__(self, "optimizer", optimizer)
        object.__setattr__(self, "name", str(name))

    # -- basic properties ---------------------------------------------------
    @property
    def L(self) -> int:
        """Number of hidden layers."""
        return len(self.a) - 1

    @property
    def c_global(self):
        """The common learning-rate exponent if every layer shares it, else None."""
        return self.c[0] if all(ci == self.c[0] for ci in self.c) else None

    @property
    def free_symbols(self) -> frozenset:
        return frozenset().union(*(e.free_symbols for e in self.a + self.b + self.c))

    @property
    def is_symbolic(self) -> bool:
        return bool(self.free_symbols)

    @property
    def readout_zero_init(self) -> bool:
        return self.b[-1] == sympy.oo

    def subs(self, *args, **kwargs) -> "ABC":
        """Substitute values for free symbols (``p.subs(c=1)`` or ``p.subs({c: 1})``)."""
        mapping = dict(args[0]) if args else {}
        syms = {s.name: s for s in self.free_symbols}
        for key, val in kwargs.items():
            if key not in syms:
                raise InvalidParametrizationError(
                    f"{key!r} is not a free symbol of this parametrization "
                    f"(free symbols: {sorted(syms) or 'none'})")
            mapping[syms[key]] = val
        mapping = {k: parse_exponent(v, str(k)) for k, v in mapping.items()}
        sub = lambda es: [e.subs(mapping) for e in es]  # noqa: E731
        return ABC(sub(self.a), sub(self.b), sub(self.c), self.optimizer, self.name)

    # -- exact numbers for the fast classifier -----------------------------
    @cached_property
    def _fractions(self):
        if self.is_symbolic:
            raise SymbolicParametrizationError(
                f"{self.label} has free symbols {sorted(map(str, self.free_symbols))}; "
                "a verdict needs numbers. Use p.conditions() or p.region(...) for "
                "symbolic answers, or p.subs(...) to fix the symbols")

        def frac(e):
            if e == sympy.oo:
                return math.inf
            if not e.is_Rational:
                e = sympy.nsimplify(e)
                if not e.is_Rational:
                    raise InvalidParametrizationError(
                        f"exponent {e} is irrational; tp_limits classifies rational exponents")
            return Fraction(int(e.p), int(e.q))

        return tuple(tuple(frac(e) for e in es) for es in (self.a, self.b, self.c))

    @property
    def label(self) -> str:
        return self.name or "abc-parametrization"

    # -- delegations to the modules that do the work -------------------------
    def classify(self):
        """Exact classification (stability, regime, maximal updates); see classify.py."""
        return self._classification

    @cached_property
    def _classification(self):
        from .classify import classify
        return classify(self)

    def conditions(self) -> dict:
        """The stability/nontriviality/regime conditions as SymPy booleans."""
        from .symbolic import conditions
        return conditions(self)

    def region(self, *symbols) -> dict:
        """Solve the conditions for free symbols; see symbolic.region."""
        from .symbolic import region
        return region(self, *symbols)

    def shift(self, theta) -> "ABC":
        """Apply the symmetry (a+theta, b-theta, c-2theta) (SGD) or c-theta (Adam)."""
        from .symmetry import shift
        return shift(self, theta)

    def canonical(self) -> "ABC":
        """The a = 0 representative of this parametrization's symmetry orbit."""
        from .symmetry import canonical
        return canonical(self)

    def equivalent(self, other: "ABC") -> bool:
        """True when ``other`` trains identically at every width (same orbit)."""
        from .symmetry import equivalent
        return equivalent(self, other)

    def predicted_exponents(self, t: int = 2):
        """Width exponents of the coordinate diagnostics at step t (predictions.py)."""
        from .predictions import predicted_exponents
        return predicted_exponents(self, t=t)

    # -- display -------------------------------------------------------------
    def __str__(self) -> str:
        c = self.c_global
        c_txt = fmt(c) if c is not None else fmt_tuple(self.c)
        head = f"{self.name}: " if self.name else ""
        opt = "" if self.optimizer == "sgd" else f", optimizer={self.optimizer}"
        return f"{head}a={fmt_tuple(self.a)}, b={fmt_tuple(self.b)}, c={c_txt}{opt}"

    def __repr__(self) -> str:
        c = self.c_global
        c_txt = repr(str(c)) if c is not None else repr(tuple(str(x) for x in self.c))
        name = f", name={self.name!r}" if self.name else ""
        return (f"ABC(a={tuple(str(x) for x in self.a)!r}, b={tuple(str(x) for x in self.b)!r}, "
                f"c={c_txt}, optimizer={self.optimizer!r}{name})")


def fmt(x) -> str:
    """Exact, compact text for an exponent (Fraction, float inf or SymPy)."""
    if isinstance(x, float) and math.isinf(x):
        return "oo" if x > 0 else "-oo"
    if isinstance(x, Fraction):
        return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    return str(x)


def fmt_tuple(xs) -> str:
    return "(" + ", ".join(fmt(x) for x in xs) + ")"
