"""Exact classification of an abc-parametrization (docs/theory.md §1.2, §1.8).

The verdicts are TP4's theorems, evaluated on exact rationals:

* **stable** iff  a_1+b_1 = 0,  a_l+b_l = 1/2 (2 <= l <= L),  p >= 1/2,
  r >= 0,  q >= 1,  p + r >= 1                                   (Thm 3.3);
* **nontrivial** (given stability) iff  p + r = 1  or  q = 1;
* a stable nontrivial parametrization **learns features** iff r = 0 and is
  in the **kernel regime** iff r > 0                    (Thms 3.6/3.8, Cor 3.9);
* W^l (l <= L) is **updated maximally** iff r_l = 0; the readout iff q = 1;
  the readout is **initialized maximally** iff p + r = 1       (Prop 5.3);
* f_0 converges to the NNGP when p = 1/2 and to 0 when p > 1/2 (Cor 3.10).

For Adam the same statements hold with q^A and r^A (docs/theory.md §1.7).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from fractions import Fraction

import sympy

from .exponent_values import fmt
from .exponents import exponents
from .fix import nearest_fix
from .update_rules import update_rule

HALF = Fraction(1, 2)


def _sym(x):
    """Fraction / float inf -> SymPy number (the public type of exponents)."""
    if isinstance(x, float):
        return sympy.oo if x > 0 else -sympy.oo
    return sympy.Rational(x.numerator, x.denominator)


def _power(k) -> str:
    """'n^1', 'n^(1/2)', 'n^(-1)' for an exponent k."""
    t = fmt(k)
    return f"n^{t}" if isinstance(k, Fraction) and k.denominator == 1 and k >= 0 else f"n^({t})"


def _grows(k, what: str) -> str:
    """'<what> blows up like n^k' for k > 0, '<what> vanishes like n^k' for k < 0."""
    return f"{what} blows up like {_power(k)}" if k > 0 else f"{what} vanishes like {_power(k)}"


def _layers(ls) -> str:
    ls = list(ls)
    if len(ls) == 1:
        return f"layer {ls[0]}"
    return "layers " + ", ".join(map(str, ls[:-1])) + f" and {ls[-1]}"


@dataclass(frozen=True)
class Condition:
    """One of TP4's six stability conditions, with its truth value.

    ``value`` is the exact left-hand side (for the hidden-layer condition, the
    tuple of a_l + b_l), ``consequence`` is empty when the condition holds.
    """

    key: str
    statement: str
    value: object
    holds: bool
    consequence: str = ""

    def __str__(self) -> str:
        mark = "ok  " if self.holds else "FAIL"
        tail = f"  -> {self.consequence}" if self.consequence else ""
        return f"[{mark}] {self.statement}{tail}"


@dataclass(frozen=True)
class LimitSwitches:
    """Switches of the general feature-learning limit (docs/theory.md §5.1).

    ``train_layers[l-1]`` is e_l = [r_l = 0] (the ΔW^l term survives),
    ``readout_init`` is e_omega = [p = 1] (Z^{nV_0} is nonzero) and
    ``readout_update`` is e_V = [q = 1] (the readout moves in the limit).
    """

    train_layers: tuple
    readout_init: bool
    readout_update: bool


@dataclass(frozen=True)
class Classification:
    """Everything the theory says about one abc-parametrization.

    Exponents are exact SymPy numbers (``sympy.oo`` for a zero readout).
    ``kernel_components`` lists the layers whose NTK term K_l enters the
    limiting kernel (L+1 is the readout term), empty outside the kernel
    regime.  ``violations`` holds one sentence per failed stability condition.

    ``weight_decay_exponents[l-1]`` = c_l: the decay coefficient of layer l
    must scale like λ n^{c_l} for its per-step shrink η_l n^{-c_l} λ n^{c_l}
    to stay Θ(1) (docs/theory.md §10.1).  For Adam, ``eps_exponents[l-1]`` =
    g_l: gradient entries of w^l are Θ(n^{-g_l}) (g_l = a_l + m for l <= L,
    a_{L+1} for the readout), so ε n^{-g_l} is the width-free ε (§10.3).
    """

    parametrization: object      # the tp.ABC classified
    p: object
    q: object
    m: object
    r: object
    r_layers: tuple
    rho_layers: tuple
    conditions: tuple
    stable: bool
    nontrivial: bool
    feature_learning: bool
    kernel_regime: bool
    regime: str
    updated_maximally: tuple
    readout_initialized_maximally: bool
    f0_law: str
    kernel_components: tuple
    limit_switches: LimitSwitches | None
    violations: tuple
    weight_decay_exponents: tuple = ()
    eps_exponents: tuple = ()

    @property
    def L(self) -> int:
        return len(self.r_layers)

    def to_dict(self) -> dict:
        """A JSON-ready summary (exponents as strings like '-1/2' or 'oo')."""
        s = str
        return {
            "name": self.parametrization.name,
            "optimizer": self.parametrization.optimizer,
            "L": self.L,
            "a": [s(x) for x in self.parametrization.a],
            "b": [s(x) for x in self.parametrization.b],
            "c": [s(x) for x in self.parametrization.c],
            "p": s(self.p), "q": s(self.q), "m": s(self.m), "r": s(self.r),
            "r_layers": [s(x) for x in self.r_layers],
            "rho_layers": [s(x) for x in self.rho_layers],
            "conditions": {c.key: {"statement": c.statement, "holds": c.holds,
                                   "consequence": c.consequence} for c in self.conditions},
            "stable": self.stable, "nontrivial": self.nontrivial,
            "feature_learning": self.feature_learning, "kernel_regime": self.kernel_regime,
            "regime": self.regime, "reason": self.reason,
            "fix": None if self.fix is None else {
                "changes": {name: str(new) for name, _, new in self.fix.changes},
                "text": str(self.fix)},
            "updated_maximally": list(self.updated_maximally),
            "readout_initialized_maximally": self.readout_initialized_maximally,
            "f0_law": self.f0_law,
            "kernel_components": list(self.kernel_components),
            "limit_switches": None if self.limit_switches is None else {
                "train_layers": list(self.limit_switches.train_layers),
                "readout_init": self.limit_switches.readout_init,
                "readout_update": self.limit_switches.readout_update},
            "violations": list(self.violations),
            "weight_decay_exponents": [s(x) for x in self.weight_decay_exponents],
            "eps_exponents": [s(x) for x in self.eps_exponents],
        }

    def __str__(self) -> str:
        P = self.parametrization
        L = self.L
        rule = update_rule(P.optimizer)
        sup = rule.label
        yes = lambda b: "yes" if b else "no"  # noqa: E731
        lines = [f"{P.label} (L = {L}, {P.optimizer})", f"  {P}",
                 f"  p = {self.p}, q{sup} = {self.q}, m = {self.m}, r{sup} = {self.r}",
                 f"  r{sup}_l = ({', '.join(map(str, self.r_layers))}),"
                 f"  rho_l = ({', '.join(map(str, self.rho_layers))})",
                 "  stability conditions (TP4 Thm 3.3):"]
        lines += [f"    {c}" for c in self.conditions]
        verdict = {"unstable": "UNSTABLE: no infinite-width limit",
                   "trivial": "stable but TRIVIAL: f_t = f_0 in the limit",
                   "kernel": "stable, nontrivial, KERNEL regime (features frozen)",
                   "feature_learning": "stable, nontrivial, FEATURE LEARNING"}[self.regime]
        lines.append(f"  verdict: {verdict}")
        if self.reason:
            lines.append(f"  why: {self.reason}")
        if self.fix is not None:
            lines.append(f"  nearest fix: {self.fix}")
        if self.stable:
            ups = ", ".join(f"W^{l + 1} {yes(u)}" for l, u in enumerate(self.updated_maximally))
            lines.append(f"  updated maximally: {ups}")
            lines.append(f"  readout initialized maximally: {yes(self.readout_initialized_maximally)}")
            lines.append("  f_0 in the limit: " + ("Gaussian process (NNGP)" if self.f0_law == "gp"
                                                    else "0"))
        if self.kernel_components:
            terms = " + ".join(f"K_{l}" for l in self.kernel_components)
            lines.append(f"  limiting kernel: K = {terms}")
        if self.limit_switches is not None:
            sw = self.limit_switches
            frozen = [l + 1 for l, e in enumerate(sw.train_layers) if not e]
            lines.append("  limit: " + ("every hidden layer trains" if not frozen else
                                        f"{_layers(frozen)} frozen at init")
                         + f"; readout init {'kept' if sw.readout_init else 'zero'}"
                         + f"; readout {'trains' if sw.readout_update else 'fixed'}")
        if self.stable:
            lines.append("  weight decay λ_l ∝ n^c_l: ("
                         + ", ".join(map(str, self.weight_decay_exponents)) + ")")
            if rule.has_eps:
                lines.append("  ε_l ∝ n^-g_l (gradient-entry size): g_l = ("
                             + ", ".join(map(str, self.eps_exponents)) + ")")
        return "\n".join(lines)

    @cached_property
    def fix(self):
        """The nearest fix (a :class:`~tp_limits.abc.fix.Fix`): the smallest change of the
        learning-rate exponents c_l and the readout's initialization exponent b_{L+1} that
        makes the parametrization stable and feature learning with every layer updated
        maximally; None when it needs none or none is within reach (fix.py)."""
        return nearest_fix(self, classify)

    @property
    def reason(self) -> str:
        """Why a stable parametrization is in its regime, from the exponents of the
        nontriviality and feature-learning theorems (docs/theory.md §1.5): feature
        learning needs r = 0; a nontrivial limit needs p + r = 1 (the initial readout
        reads Θ(1) of the feature change) or q = 1 (the readout's own update is Θ(1)).
        Empty for an unstable one, whose failed conditions say why."""
        if not self.stable:
            return ""
        x = update_rule(self.parametrization.optimizer).label     # Adam's exponents: r^A, q^A
        r, pr, q = self.r, self.p + self.r, self.q
        moving = [l + 1 for l, v in enumerate(self.r_layers) if v == 0]
        if self.regime == "feature_learning":
            return f"r{x} = 0: the features of {_layers(moving)} move by Θ(1) (r{x}_l = 0 there)"
        if self.regime == "kernel":
            through = [f"p + r{x} = 1 (the initial readout reads the feature change)"
                       if pr == 1 else "", f"q{x} = 1 (the readout's own update)" if q == 1 else ""]
            return (f"r{x} = {fmt(r)} > 0: every hidden layer's features move like n^(-r{x}_l) "
                    f"({_power(-r)} at the fastest) and freeze as n → ∞, while f moves by "
                    f"Θ(1) through {' and '.join(t for t in through if t)}; feature learning "
                    f"needs r{x} = 0 (tp.mup)")
        return (f"p + r{x} = {fmt(pr)} > 1 and q{x} = {fmt(q)} > 1: "
                + _grows(1 - pr, "the output's response to feature updates")
                + " and " + _grows(1 - q, "the readout's own update")
                + f", so f_t = f_0; a nontrivial limit needs p + r{x} = 1 or q{x} = 1")

    def _repr_pretty_(self, printer, cycle):  # IPython
        printer.text(str(self))


def classify(param) -> Classification:
    """Classify ``param`` exactly (see the module docstring for the theorems)."""
    a, b, c = param._fractions
    L = param.L
    rule = update_rule(param.optimizer)
    e = exponents(a, b, c, param.optimizer)
    p, q, m, r = e.p.value(), e.q.value(), e.m.value(), e.r.value()
    r_l = [x.value() for x in e.r_layers]
    rho_l = [x.value() for x in e.rho_layers]
    pr = p + r
    sA = rule.label
    q_def = rule.q_formula()

    conds = []
    v1 = a[0] + b[0]
    conds.append(Condition("input_init", "a_1 + b_1 = 0", v1, v1 == 0,
                           "" if v1 == 0 else
                           f"a_1 + b_1 = {fmt(v1)} != 0: " + _grows(-v1, "h^1 at initialization")))
    hid = [a[l] + b[l] for l in range(1, L)]
    bad = [(l + 1, v) for l, v in zip(range(1, L), hid) if v != HALF]
    conds.append(Condition(
        "hidden_init", "a_l + b_l = 1/2 for 2 <= l <= L", tuple(hid), not bad,
        "; ".join(f"a_{l} + b_{l} = {fmt(v)} != 1/2: " + _grows(HALF - v, f"h^{l} at initialization")
                  for l, v in bad)))
    conds.append(Condition("readout_init", f"p = a_{{L+1}} + b_{{L+1}} = {fmt(p)} >= 1/2", p,
                           p >= HALF, "" if p >= HALF else
                           f"p = {fmt(p)} < 1/2: " + _grows(HALF - p, "f_0 at initialization")))
    blow = [l + 1 for l, x in enumerate(r_l) if x < 0]
    conds.append(Condition("features", f"r{sA} = {fmt(r)} >= 0", r, r >= 0, "" if r >= 0 else
                           f"r{sA} = {fmt(r)} < 0: features blow up like {_power(-r)} after one "
                           f"step ({_layers(blow)})"))
    conds.append(Condition("readout_update", f"q{sA} = {q_def} = {fmt(q)} >= 1", q, q >= 1,
                           "" if q >= 1 else
                           f"q{sA} = {fmt(q)} < 1: the readout update ΔW^{{L+1}} x^L blows up like "
                           f"{_power(1 - q)} after one step"))
    conds.append(Condition("readout_features", f"p + r{sA} = {fmt(pr)} >= 1", pr, pr >= 1,
                           "" if pr >= 1 else
                           f"p + r{sA} = {fmt(pr)} < 1: W^{{L+1}}_0 Δx^L, the output's response to "
                           f"feature updates, blows up like {_power(1 - pr)} after one step"))

    stable = all(cd.holds for cd in conds)
    nontrivial = stable and (pr == 1 or q == 1)
    feature_learning = nontrivial and r == 0
    kernel_regime = nontrivial and r > 0
    regime = ("unstable" if not stable else "trivial" if not nontrivial
              else "feature_learning" if feature_learning else "kernel")

    kernel_components = ()
    if kernel_regime:
        comps = [l + 1 for l, x in enumerate(r_l) if x == r] if pr == 1 else []
        if q == 1:
            comps.append(L + 1)
        kernel_components = tuple(sorted(comps))
    switches = None
    if feature_learning:
        switches = LimitSwitches(tuple(x == 0 for x in r_l), p == 1, q == 1)

    return Classification(
        parametrization=param, p=_sym(p), q=_sym(q), m=_sym(m), r=_sym(r),
        r_layers=tuple(map(_sym, r_l)), rho_layers=tuple(map(_sym, rho_l)),
        conditions=tuple(conds), stable=stable, nontrivial=nontrivial,
        feature_learning=feature_learning, kernel_regime=kernel_regime, regime=regime,
        updated_maximally=tuple(x == 0 for x in r_l) + (q == 1,),
        readout_initialized_maximally=(pr == 1),
        f0_law="gp" if p == HALF else ("zero" if p > HALF else "divergent"),
        kernel_components=kernel_components, limit_switches=switches,
        violations=tuple(cd.consequence for cd in conds if not cd.holds),
        weight_decay_exponents=tuple(map(_sym, c)),
        eps_exponents=((tuple(_sym(a[l] + m) for l in range(L)) + (_sym(a[L]),))
                       if rule.has_eps else ()))

