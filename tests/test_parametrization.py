"""Parsing, bad input, symmetry properties and predicted exponents."""
from fractions import Fraction

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy import Rational as R
from sympy import oo

import tp_limits as tp
from tp_limits.errors import InvalidParametrizationError, TPError

HALF = R(1, 2)


# ---- parsing -----------------------------------------------------------------
def test_entry_types_parse_exactly():
    p = tp.ABC([Fraction(-1, 2), "0", 0.5], ["1/2", sympy.Rational(1, 2), "0.5"], "0")
    assert p.a == (-HALF, 0, HALF) and p.b == (HALF,) * 3 and p.c == (0,) * 3
    assert p == tp.mup(2)
    assert tp.ABC([0, 0], [0, "oo"], 0).b[-1] == oo
    assert tp.ABC([0, 0], [0, sympy.oo], 0).readout_zero_init


@pytest.mark.parametrize("kwargs, match", [
    (dict(a=[0, 0, 0], b=[0, 0], c=0), "b has 2 entries but a has 3"),
    (dict(a=[0, 0], b=[0, 0], c=[0, 0, 0]), "c has 3 entries"),
    (dict(a=[0], b=[0], c=0), "L >= 1"),
    (dict(a=[], b=[], c=0), "L >= 1"),
    (dict(a=[0, float("nan")], b=[0, 0], c=0), "NaN"),
    (dict(a=[0, "1/2/"], b=[0, 0], c=0), "not a number"),
    (dict(a=[0, "(("], b=[0, 0], c=0), "not a number"),
    (dict(a=[0, 0], b=[0, 0], c=0, optimizer="rmsprop"), "unknown optimizer"),
    (dict(a=[0, "oo"], b=[0, 0], c=0), "only b_\\(L\\+1\\) may be"),
    (dict(a=[0, 0], b=["oo", 0], c=0), "only b_\\(L\\+1\\) may be"),
    (dict(a=[0, 0], b=[0, 0], c=sympy.I), "not real"),
    (dict(a=[0, True], b=[0, 0], c=0), "bool"),
    (dict(a="0,0", b=[0, 0], c=0), "sequence"),
])
def test_bad_input_raises_tperror(kwargs, match):
    with pytest.raises(InvalidParametrizationError, match=match):
        tp.ABC(**kwargs)


@pytest.mark.parametrize("call, match", [
    (lambda: tp.sp(0), "L = 0"),
    (lambda: tp.ntp(-1), "L = -1"),
    (lambda: tp.mup(2.5), "int >= 1"),
    (lambda: tp.mfp(2), "L = 1 only"),
    (lambda: tp.mup(2, form="b0"), "unknown form"),
    (lambda: tp.mup(2, optimizer="lion"), "unknown optimizer"),
    (lambda: tp.mup(2).shift([0, 1]), "theta has 2 entries"),
    (lambda: tp.mup(2).predicted_exponents(t=0), "t >= 1"),
])
def test_bad_preset_arguments(call, match):
    with pytest.raises(TPError, match=match):
        call()


# ---- property tests ------------------------------------------------------------
quarters = st.integers(-8, 8).map(lambda k: R(k, 4))


@st.composite
def abcs(draw, max_L=5):
    L = draw(st.integers(1, max_L))
    a = draw(st.lists(quarters, min_size=L + 1, max_size=L + 1))
    b = draw(st.lists(quarters, min_size=L + 1, max_size=L + 1))
    if draw(st.booleans()):        # bias towards the stable slice
        b = [-a[0]] + [HALF - x for x in a[1:L]] + [b[L]]
    if draw(st.integers(0, 9)) == 0:
        b[L] = oo
    c = draw(st.one_of(quarters, st.lists(quarters, min_size=L + 1, max_size=L + 1)))
    return tp.ABC(a, b, c, optimizer=draw(st.sampled_from(["sgd", "sgd", "adam"])))


def verdicts(k):
    d = k.to_dict()
    # the decay and ε exponents are w-space units and move with (a, c) under the shift
    for key in ("a", "b", "c", "name", "weight_decay_exponents", "eps_exponents"):
        d.pop(key)
    # the nearest fix names exponents, which move too; what it changes by does not
    fix = d.pop("fix")
    d["fix_moves"] = None if fix is None else (
        tuple(x - y for x, y in zip(k.fix.c, k.parametrization._fractions[2])),
        k.fix.b[-1] != k.parametrization._fractions[1][-1] and
        k.fix.b[-1] - k.parametrization._fractions[1][-1])
    return d


@settings(max_examples=150, deadline=None)
@given(abcs(), st.data())
def test_classification_invariant_under_shift(p, data):
    theta = data.draw(st.lists(quarters, min_size=p.L + 1, max_size=p.L + 1))
    assert verdicts(p.shift(theta).classify()) == verdicts(p.classify())
    assert p.shift(theta).equivalent(p)


def independent_exponents(p):
    """p, q, r_l, ρ_l and the six stability conditions straight from TP4's formulas
    (docs/theory.md §1.1, §1.2, §1.7), written without the library's code."""
    L = p.L
    a, b = list(p.a), list(p.b)
    c = list(p.c) if isinstance(p.c, tuple) else [p.c] * (L + 1)
    P = a[L] + b[L]
    if p.optimizer == "sgd":
        Q = 2 * a[L] + c[L]
        r = [min(P, Q) + 2 * a[l] + c[l] - 1 + (1 if l == 0 else 0) for l in range(L)]
    else:
        Q = a[L] + c[L]
        r = [a[l] + c[l] - 1 + (1 if l == 0 else 0) for l in range(L)]
    rho = [min(r[: l + 1]) for l in range(L)]
    stable = (a[0] + b[0] == 0 and all(a[l] + b[l] == HALF for l in range(1, L))
              and P >= HALF and min(r) >= 0 and Q >= 1 and P + min(r) >= 1)
    return P, Q, r, rho, stable


@settings(max_examples=150, deadline=None)
@given(abcs())
def test_exponents_and_verdicts_match_the_formulas(p):
    k = p.classify()
    P, Q, r, rho, stable = independent_exponents(p)
    assert (k.p, k.q) == (P, Q)
    assert list(k.r_layers) == r and k.r == min(r) and list(k.rho_layers) == rho
    assert k.stable == stable
    if stable:
        nontrivial = P + min(r) == 1 or Q == 1
        assert k.nontrivial == nontrivial
        assert k.feature_learning == (nontrivial and min(r) == 0)
        assert k.kernel_regime == (nontrivial and min(r) > 0)
    else:
        assert k.violations and k.regime == "unstable"
    canon = p.canonical()
    assert all(x == 0 for x in canon.a) and canon.equivalent(p)


@settings(max_examples=80, deadline=None)
@given(abcs(max_L=3))
def test_symbolic_conditions_agree_with_classifier(p):
    """The SymPy booleans and the fast exact classifier are the same math."""
    k = p.classify()
    conds = p.conditions()
    assert bool(conds["stable"]) == k.stable
    assert bool(conds["nontrivial"]) == k.nontrivial
    assert bool(conds["feature_learning"]) == (k.regime == "feature_learning")
    assert bool(conds["kernel_regime"]) == k.kernel_regime


# ---- predicted exponents -------------------------------------------------------
def test_predicted_delta_h_exponents():
    assert tp.mup(2).predicted_exponents()["delta_h"] == (0, 0)
    assert tp.ntp(2).predicted_exponents()["delta_h"] == (-HALF, -HALF)
    assert tp.sp(2, c=1).predicted_exponents()["delta_h"] == (-R(3, 2), -HALF)
    e = tp.mup(2).predicted_exponents()
    assert e["f0"] == (-HALF,) and e["delta_f"] == (0,)
    assert e["spectral_ratio"] == (0, 0, 0) and e["frobenius_ratio"] == (0, -HALF, 0)
    assert tp.ntp(2).predicted_exponents()["feature_kernel_change"] == (-1,)


def test_predicted_zero_readout_first_step():
    p = tp.ABC([0] * 3, [0, HALF, "oo"], [-1, 0, 1])
    assert p.predicted_exponents(t=1)["delta_h"] == (-oo, -oo)   # nothing moves at step 0
    assert p.predicted_exponents(t=2)["delta_h"] == (0, 0)


def _brute_force_fix(p, box=4):
    """The smallest Σ|Δc_l| + |Δb_{L+1}| over every c and b_{L+1} within ``box`` half-unit
    steps of p's that classifies as feature learning with every layer updated maximally:
    an exhaustive search, sharing nothing with fix.py but the classifier."""
    import itertools
    from fractions import Fraction
    a, b, c = p._fractions
    L, half, best = p.L, Fraction(1, 2), None
    steps = range(-box, box + 1)
    for dc in itertools.product(steps, repeat=L + 1):
        for db in steps:
            c2 = tuple(x + d * half for x, d in zip(c, dc))
            b2 = b[:L] + (b[L] + db * half,)
            k = tp.ABC(a, b2, c2, optimizer=p.optimizer).classify()
            if k.regime == "feature_learning" and all(k.updated_maximally):
                cost = (sum(map(abs, dc)) + abs(db)) * half
                best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("p", [tp.ntp(1), tp.ntp(2), tp.sp(1), tp.sp(2, c=1),
                               tp.ABC([0, 0, 0], [0, "1/2", "1/2"], 0, optimizer="adam"),
                               tp.ABC(["-1/2", 0, "1/2"], ["1/2"] * 3, [0, 0, 1])],
                         ids=lambda p: f"{p.label}-L{p.L}-{p.optimizer}")
def test_the_nearest_fix_is_nearest_and_fixes(p):
    """The fix, applied, classifies as feature learning with every layer updated
    maximally, and no change of c and b_{L+1} within two units is smaller (exhaustive)."""
    k = p.classify()
    fix = k.fix
    assert fix is not None and "nearest fix: " + str(fix) in str(k)
    fixed = tp.ABC(fix.a, fix.b, fix.c, optimizer=p.optimizer).classify()
    assert fixed.regime == "feature_learning" and all(fixed.updated_maximally)
    a, b, c = p._fractions
    moved = sum(abs(x - y) for x, y in zip(fix.c, c)) + abs(fix.b[-1] - b[-1])
    assert moved == _brute_force_fix(p)
    assert k.to_dict()["fix"]["text"] == str(fix)


def test_no_fix_where_none_is_needed_or_possible():
    assert tp.mup(3).classify().fix is None and "nearest fix" not in str(tp.mup(3).classify())
    # a broken initial scale is not a learning-rate matter: its violations say what to change
    bad = tp.ABC([0, 0, 0], [1, "1/2", "1/2"], 0).classify()
    assert not bad.stable and bad.fix is None
