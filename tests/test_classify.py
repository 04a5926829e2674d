"""Exact verdicts of docs/theory.md §1.5 (Table 1) and §9 (S1-S10)."""
import pytest
import sympy
from sympy import Rational as R
from sympy import oo

import tp_limits as tp

HALF = R(1, 2)
LS = range(1, 7)


def failed(k):
    return {c.key for c in k.conditions if not c.holds}


# ---- Table 1 for L = 1..6 -------------------------------------------------
@pytest.mark.parametrize("L", LS)
def test_sp_unstable_every_L(L):
    k = tp.sp(L).classify()
    assert k.regime == "unstable" and not k.stable
    assert k.q == 0
    assert k.r == (0 if L == 1 else -1)
    assert k.r_layers == (0,) + (-1,) * (L - 1)
    expected = {"readout_update", "readout_features"} | ({"features"} if L >= 2 else set())
    assert failed(k) == expected
    assert len(k.violations) == len(expected)


@pytest.mark.parametrize("L", LS)
def test_sp_lr_over_n(L):
    k = tp.sp(L, c=1).classify()
    assert k.stable and k.nontrivial and k.kernel_regime and not k.feature_learning
    assert k.regime == "kernel" and k.f0_law == "gp"
    assert k.r == (R(3, 2) if L == 1 else HALF)          # TP4's table shows the deep value
    assert k.r_layers == (R(3, 2),) + (HALF,) * (L - 1)
    # K = K_{L+1} + sum_{l=2..L} K_l: the input-layer term is absent
    assert k.kernel_components == tuple(range(2, L + 2))


@pytest.mark.parametrize("L", LS)
def test_ntp_full_ntk(L):
    k = tp.ntp(L).classify()
    assert k.regime == "kernel" and k.f0_law == "gp"
    assert k.r_layers == (HALF,) * L and k.r == HALF and k.p == HALF and k.q == 1
    assert k.kernel_components == tuple(range(1, L + 2))
    assert k.limit_switches is None


@pytest.mark.parametrize("L", LS)
@pytest.mark.parametrize("form", ["tp4", "a0"])
def test_mup_every_layer_maximal(L, form):
    k = tp.mup(L, form=form).classify()
    assert k.regime == "feature_learning" and k.feature_learning and not k.kernel_regime
    assert k.p == 1 and k.q == 1 and k.m == 1 and k.r == 0
    assert k.r_layers == (0,) * L and k.rho_layers == (0,) * L
    assert all(k.updated_maximally) and len(k.updated_maximally) == L + 1
    assert k.readout_initialized_maximally and k.f0_law == "zero"
    assert k.limit_switches == tp.abc.LimitSwitches((True,) * L, True, True)
    assert k.kernel_components == () and k.violations == ()


@pytest.mark.parametrize("L", LS)
def test_mup_forms_equivalent(L):
    p, q = tp.mup(L), tp.mup(L, form="a0")
    assert p.equivalent(q) and q.equivalent(p)
    assert p.canonical().b == q.b and p.canonical().c == q.c
    # the per-layer symmetry theta = (1/2, 0, .., 0, -1/2) maps TP4 form to a = 0 form
    theta = [HALF] + [0] * (L - 1) + [-HALF]
    assert p.shift(theta) == q
    assert not p.equivalent(tp.ntp(L)) and not p.equivalent(tp.sp(L, c=1))


def test_mup_a0_form_exponents():
    q = tp.mup(3, form="a0")
    assert q.a == (0, 0, 0, 0) and q.b == (0, HALF, HALF, 1) and q.c == (-1, 0, 0, 1)
    p = tp.mup(3)
    assert p.a == (-HALF, 0, 0, HALF) and p.b == (HALF,) * 4 and p.c_global == 0


# ---- S1 - S10 ---------------------------------------------------------------
def test_S1_sp_L3():
    k = tp.sp(3).classify()
    assert k.r_layers == (0, -1, -1) and k.r == -1
    assert failed(k) == {"features", "readout_update", "readout_features"}
    msg = next(v for v in k.violations if v.startswith("r = -1"))
    assert "n^1" in msg and "layers 2 and 3" in msg


def test_S1prime_sp_L1():
    k = tp.sp(1).classify()
    assert k.r == 0 and k.q == 0 and k.p + k.r == HALF and k.regime == "unstable"


def test_S4_mfp_and_symmetry():
    k = tp.mfp().classify()
    assert k.r == 0 and k.regime == "feature_learning"
    shifted = tp.mup(1).shift(HALF)
    assert shifted.a == (0, 1) and shifted.b == (0, 0) and shifted.c == (-1, -1)
    assert shifted == tp.mfp() and tp.mfp().equivalent(tp.mup(1))


def test_S6_per_layer_shift():
    s6 = tp.ABC([0, 0, 0, 0], [0, "1/2", "1/2", 1], [-1, 0, 0, 1])
    s5 = tp.mup(3)
    assert s5.shift(["1/2", 0, 0, "-1/2"]) == s6
    a, b = s5.classify().to_dict(), s6.classify().to_dict()
    # the decay exponents are c_l and move with c (w-space units); the W-space shrink
    # η_l n^{-c_l} λ n^{c_l} is the same in both forms
    assert a.pop("weight_decay_exponents") == ["0", "0", "0", "0"]
    assert b.pop("weight_decay_exponents") == ["-1", "0", "0", "1"]
    for key in ("a", "b", "c", "name"):
        a.pop(key), b.pop(key)
    assert a == b


def test_S7_ntp_half_trivial():
    k = tp.ntp(2, c=HALF).classify()
    assert k.stable and not k.nontrivial and k.regime == "trivial"
    assert k.r == 1 and k.q == R(3, 2)


def test_S8_ntp_minus_half_unstable():
    k = tp.ntp(2, c=-HALF).classify()
    assert k.regime == "unstable" and k.q == HALF
    assert "readout_update" in failed(k)
    assert any("q = 1/2 < 1" in v for v in k.violations)


def test_S9_frozen_input_layer():
    k = tp.ABC([0] * 4, [0, HALF, HALF, 1], [0, 0, 0, 1]).classify()
    assert k.r_layers == (1, 0, 0) and k.regime == "feature_learning"
    assert k.limit_switches.train_layers == (False, True, True)
    assert k.rho_layers == (1, 0, 0)       # layer 1 features frozen, deeper ones move
    assert k.updated_maximally == (False, True, True, True)


def test_S10_adam_mup():
    k = tp.ABC([0] * 4, [0, HALF, HALF, 1], [0, 1, 1, 1], optimizer="adam").classify()
    assert k.r == 0 and k.regime == "feature_learning"
    assert tp.mup(3, optimizer="adam").classify().regime == "feature_learning"
    assert tp.mup(3, optimizer="adam").equivalent(tp.mup(3, form="a0", optimizer="adam"))


def test_S10prime_adam_sp_unstable():
    k = tp.ABC([0, 0, 0, 0], [0, HALF, HALF, HALF], 1, optimizer="adam").classify()
    assert k.r == 0 and k.p + k.r == HALF and k.regime == "unstable"
    assert failed(k) == {"readout_features"}
    assert "n^(1/2)" in k.violations[0]


def test_zero_readout_is_feature_learning():
    k = tp.ABC([0] * 3, [0, HALF, "oo"], [-1, 0, 1]).classify()
    assert k.p == oo and k.regime == "feature_learning"
    assert k.limit_switches.readout_init is False and k.limit_switches.readout_update is True
    assert not k.readout_initialized_maximally


def test_fixed_readout_limit():
    # readout variance 1/n^2 (b = 1) with readout LR 1/n^2 (c_{L+1} = 2)
    k = tp.ABC([0] * 3, [0, HALF, 1], [-1, 0, 2]).classify()
    assert k.q == 2 and k.p + k.r == 1 and k.regime == "feature_learning"
    assert k.limit_switches.readout_update is False and k.limit_switches.readout_init is True


def test_trivial_with_moving_features_is_trivial():
    # p = q = 2: features move (r = 0) but the output never does
    k = tp.ABC([0] * 2, [0, 2], [-2, 2]).classify()
    assert k.r == 0 and k.regime == "trivial" and not k.kernel_regime


def test_input_and_hidden_init_violations():
    k = tp.ABC([0, 1, 0], [0, 0, 1], 0).classify()
    assert "hidden_init" in failed(k)
    assert any("h^2 at initialization vanishes like n^(-1/2)" in v for v in k.violations)
    k = tp.ABC(["-1/2", 0], [0, 1], 0).classify()
    assert any("h^1 at initialization blows up like n^(1/2)" in v for v in k.violations)


def test_report_text_names_verdict():
    text = str(tp.sp(3).classify())
    assert "UNSTABLE" in text and "FAIL" in text
    assert "FEATURE LEARNING" in str(tp.mup(2).classify())
    assert "K = K_1 + K_2 + K_3" in str(tp.ntp(2).classify())


# ---- symbolic ----------------------------------------------------------------
def test_sp_symbolic_c_region():
    c = sympy.Symbol("c")
    reg = tp.sp(2, c=c).region(c)
    assert reg["stable"] == sympy.Interval(1, oo)
    assert reg["nontrivial"] == sympy.FiniteSet(1)
    assert reg["kernel_regime"] == sympy.FiniteSet(1)
    assert reg["feature_learning"] == sympy.EmptySet


def test_symbolic_readout_exponent_region():
    b = sympy.Symbol("b")
    p = tp.ABC([0, 0, 0], [0, HALF, b], [-1, 0, 1])
    reg = p.region(b)
    # p = b: stable iff p >= 1 (p + r >= 1 with r = 0); nontrivial always (q = 1)
    assert reg["stable"] == sympy.Interval(1, oo)
    assert reg["feature_learning"] == sympy.Interval(1, oo)


def test_two_symbol_region_is_boolean():
    c, b = sympy.symbols("c b")
    reg = tp.ABC([0, 0], [0, b], c).region(c, b)
    stab = reg["stable"]
    assert stab.subs({c: 1, b: HALF}) == sympy.true
    assert stab.subs({c: 0, b: HALF}) == sympy.false


def test_conditions_are_relations():
    conds = tp.mup(2).conditions()
    assert conds["stable"] == sympy.true and conds["feature_learning"] == sympy.true
    c = sympy.Symbol("c")
    cs = tp.sp(2, c=c).conditions()
    assert isinstance(cs["readout_update"], sympy.Basic) and cs["readout_update"].has(c)


def test_subs_fixes_symbols():
    c = sympy.Symbol("c")
    p = tp.sp(3, c=c)
    with pytest.raises(tp.SymbolicParametrizationError, match="free symbols"):
        p.classify()
    assert p.subs(c=1).classify().regime == "kernel"
    assert p.subs({c: 0}).classify().regime == "unstable"


def test_every_stable_verdict_says_why():
    """A stable verdict comes with its reason from the exponents: the kernel regime's
    r > 0 and the rate its features freeze at, the trivial limit's two vanishing output
    terms, feature learning's Θ(1) layers; an unstable one leaves it to its conditions."""
    ntp = tp.ntp(2).classify()
    assert ntp.regime == "kernel" and "r = 1/2 > 0" in ntp.reason
    assert "n^(-1/2) at the fastest" in ntp.reason and "needs r = 0" in ntp.reason
    assert "why: " + ntp.reason in str(ntp) and ntp.to_dict()["reason"] == ntp.reason
    trivial = tp.ABC([0, 0, 0], [0, "1/2", 1], [2, 2, 2]).classify()
    assert trivial.regime == "trivial"
    assert "p + r = 3 > 1 and q = 2 > 1" in trivial.reason
    assert "vanishes like n^(-2)" in trivial.reason and "vanishes like n^(-1)" in trivial.reason
    frozen_first = tp.ABC([0, 0, 0], [0, "1/2", 2], [0, 0, 1]).classify()
    assert frozen_first.regime == "feature_learning"
    assert frozen_first.reason.startswith("r = 0: the features of layer 2 move")
    assert "layers 1 and 2" in tp.mup(2, optimizer="adam").classify().reason
    assert "r^A = 0" in tp.mup(2, optimizer="adam").classify().reason
    sp = tp.sp(2).classify()
    assert sp.regime == "unstable" and sp.reason == "" and "why:" not in str(sp)
