"""The abc-parametrization of an MLP (docs/theory.md §0, §1).

A width-n MLP with L hidden layers is abc-parametrized when

    W^l = n^{-a_l} w^l,   w^l_{ij} ~ N(0, sigma_l^2 n^{-2 b_l}) at init,
    w^l  <-  w^l - eta_l n^{-c_l} grad_{w^l} loss        (SGD),

for layers l = 1..L+1 (TP4 indexing: layer L+1 is the readout).
``b_{L+1} = oo`` initializes the readout to exactly zero.

:class:`ABC` stores the exponents exactly (SymPy ``Rational`` or expressions
with free symbols) and is the entry point of the symbolic layer: its methods
(``classify``, ``conditions``, ``shift``, ...) import the modules that compute them
when called, and those modules take an ABC without importing this one, so the
layer has no import circle.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Sequence

import sympy

from ..errors import InvalidParametrizationError, SymbolicParametrizationError
from .exponent_values import fmt, fmt_tuple, parse_exponent  # noqa: F401  (re-exported)
from .update_rules import update_rule

#: Deeper networks than this are refused: the exact classification grows with L (about
#: 1 s at L = 1000) and no engine could simulate them.
MAX_L = 1000
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

    def with_depth(self, L: int) -> "ABC":
        """The same parametrization with ``L`` hidden layers: the input layer's and the
        readout's exponents kept, the hidden layers' (which must agree) repeated."""
        if self.L < 2:
            raise InvalidParametrizationError(
                f"{self.label} has no hidden matrix to repeat (L = 1): build it at the "
                "depth you need")
        if not isinstance(L, numbers.Integral) or isinstance(L, bool) or not 2 <= L <= MAX_L:
            raise InvalidParametrizationError(f"L = {L!r} must be an integer in 2..{MAX_L}")
        L = int(L)
        rows = []
        for name, e in (("a", self.a), ("b", self.b), ("c", self.c)):
            if any(x != e[1] for x in e[1:-1]):
                raise InvalidParametrizationError(
                    f"{self.label}'s hidden layers have different {name} exponents "
                    f"{[str(x) for x in e[1:-1]]}: no single rule says how to repeat them")
            rows.append((e[0],) + (e[1],) * (L - 1) + (e[-1],))
        return ABC(*rows, optimizer=self.optimizer, name=self.name)

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
