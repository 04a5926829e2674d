"""Coordinate checks: measured width exponents of finite networks vs the theory (T7.2)."""
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import D1

import tp_limits as tp

WIDTHS = [256, 512, 1024, 2048, 4096]


@pytest.fixture(scope="module")
def checks():
    """tanh, L = 2, data D1, widths 256..4096, 4 seeds (the relation tests R1-R3)."""
    r = tp.Routine(lr=0.5, **D1)
    out = {}
    for p in (tp.mup(2), tp.ntp(2), tp.sp(2, c=1)):
        out[p.name] = tp.coord_check(tp.MLP(p, 2, 1, phi="tanh"), r, WIDTHS, seeds=4,
                                     executor="serial", record=("stats",))
    return out


@pytest.mark.parametrize("name, expected", [("muP", (0.0, 0.0)), ("NTP", (-0.5, -0.5)),
                                            ("SP (c=1)", (-1.5, -0.5))])
def test_delta_h_slopes_match_minus_rho(checks, name, expected):
    cc = checks[name]
    for q in ("delta_h", "delta_x"):
        for layer, pred in enumerate(expected, start=1):
            f = cc.fit(q, layer, 2)
            assert f.predicted == pytest.approx(pred)
            assert abs(f.slope - pred) <= 0.1, (name, q, layer, f.slope)
            assert f.verdict == "ok"


def test_stable_forward_and_output_exponents(checks):
    for cc in checks.values():
        for layer in (1, 2):
            assert abs(cc.fit("h", layer, 2).slope) <= 0.1
        assert abs(cc.fit("delta_f", 3, 2).slope) <= 0.1      # all three are nontrivial


def test_table_and_plot(checks):
    cc = checks["SP (c=1)"]
    text = str(cc.table(t=2, quantities=["delta_h"]))
    assert "delta_h" in text and "-1.50" in text and len(text.splitlines()) == 4
    fig = cc.plot(t=2)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 5                                   # no spectral panel: not recorded
    for ax in axes:
        assert ax.get_xlabel() == "width n" and ax.get_ylabel() and ax.get_legend()
    rows = [r for r in cc.records if r["quantity"] == "delta_h" and r["t"] == 2]
    assert len(rows) == len(WIDTHS) * 4 * 2


def test_sp_failure_is_named_layer_by_layer():
    """SP (c = 0) is unstable: the check reports growth where the theory says it blows up."""
    # targets far from the O(1) random f_0 of SP, so |χ_0| does not fluctuate to ~0
    r = tp.Routine(D1["X"], 5 * D1["Y"], lr=0.05, eval_inputs=D1["eval_inputs"])
    cc = tp.coord_check(tp.MLP(tp.sp(2), 2, 1, phi="tanh"), r, [128, 512, 2048], seeds=4,
                        steps=[1], executor="serial", record=("stats",))
    f = cc.fit("delta_h", 2, 1)
    assert f.predicted == pytest.approx(0.5)    # t = 1: backward signal n^-p, r_2 = -1/2
    assert abs(f.slope - 0.5) <= 0.15 and f.verdict in ("ok", "inconclusive")
    assert cc.fit("delta_W_x", 3, 1).slope > 0.8           # readout update: 1 - q = +1


def test_adam_mup_coord_check():
    r = tp.Routine(lr=0.02, **D1)
    cc = tp.coord_check(tp.MLP(tp.mup(2, optimizer="adam"), 2, 1), r, [256, 1024, 4096],
                        seeds=2, executor="serial", record=("stats",))
    for layer in (1, 2):
        assert abs(cc.fit("delta_h", layer, 2).slope) <= 0.1


def test_executors_agree():
    r = tp.Routine(lr=0.5, **D1)
    net = tp.MLP(tp.mup(1), 2, 1)
    serial = tp.coord_check(net, r, [32, 64], seeds=2, executor="serial", record=("stats",))
    with ThreadPoolExecutor(2) as ex:
        threaded = tp.coord_check(net, r, [32, 64], seeds=2, executor=ex, record=("stats",))
    pooled = tp.coord_check(net, r, [32, 64], seeds=2, record=("stats",))   # process pool
    assert serial.records == threaded.records == pooled.records


@pytest.mark.parametrize("kwargs, match", [
    (dict(widths=[64]), "two distinct"),
    (dict(widths=[64, 64]), "two distinct"),
    (dict(widths=[32, 64], steps=[5]), "steps must lie"),
    (dict(widths=[32, 64], seeds=[]), "at least one seed"),
    (dict(widths=[32, 64], executor="cluster"), "executor"),
])
def test_bad_coord_check_arguments(kwargs, match):
    with pytest.raises(tp.SpecError, match=match):
        tp.coord_check(tp.MLP(tp.mup(1), 2, 1), tp.Routine(lr=0.5, **D1), **kwargs)
