"""Coordinate checks: measured width exponents of finite networks vs the theory (T7.2)."""
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import D1, d1

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
    (dict(widths=[32, 64], steps=[5]), "steps in 1..3"),
    (dict(widths=[32, 64], steps=3), "list of steps"),
    (dict(widths=[32, 64], seeds=[]), "at least 1 distinct seed"),
    (dict(widths=[32, 64], seeds=-2), "seeds"),
    (dict(widths=[32, 64], executor="cluster"), "executor"),
    (dict(widths=[32, 64], tolerance=-0.1), "tolerance"),
    (dict(widths=[32, 0]), "width"),
    (dict(widths=64), "list of at least two widths"),
])
def test_bad_coord_check_arguments(kwargs, match):
    with pytest.raises(tp.SpecError, match=match):
        tp.coord_check(tp.MLP(tp.mup(1), 2, 1), tp.Routine(lr=0.5, **D1), **kwargs)


def test_table_of_a_step_that_was_not_checked_is_refused():
    cc = tp.coord_check(tp.MLP(tp.mup(1), 2, 1), tp.Routine(lr=0.5, **D1), [32, 64], seeds=2,
                        executor="serial", steps=[1, 2])
    with pytest.raises(tp.SpecError, match="t = 3 was not checked"):
        cc.table(t=3)
    assert len(cc.table(t=2).rows) > 0 and not cc.interrupted


def test_ctrl_c_stops_a_serial_coord_check_and_says_so(monkeypatch):
    """A serial coord_check kept training the other networks after Ctrl-C and reported
    'not finite' verdicts; now it stops and returns the finished runs, flagged."""
    from tp_limits.finite import train as train_module
    original = train_module.StepLoop.__iter__
    calls = {"n": 0}

    def interrupt_third_run(loop):
        calls["n"] += 1
        for t in original(loop):
            if calls["n"] == 3 and t == 1:
                raise KeyboardInterrupt
            yield t
    monkeypatch.setattr(train_module.StepLoop, "__iter__", interrupt_third_run)
    with pytest.warns(RuntimeWarning, match="interrupted: 2 of 4 runs"):
        cc = tp.coord_check(tp.MLP(tp.mup(1), 2, 1), tp.Routine(lr=0.5, **D1), [32, 64],
                            seeds=2, executor="serial", record=("stats",))
    assert cc.interrupted and calls["n"] == 3            # the fourth run never started
    assert {(r["width"], r["seed"]) for r in cc.records} == {(32, 0), (32, 1)}
    assert {f.verdict for f in cc.fits} == {"interrupted"}  # no seed finished every width


def test_a_width_that_does_not_fit_is_refused_before_any_run(monkeypatch):
    """The widest width's memory is checked first: the small widths used to be trained
    (in a process pool, seconds) before the refusal."""
    import tp_limits.analysis.coord_check as cc
    calls = []
    monkeypatch.setattr(cc, "_run_one", lambda *a: calls.append(a))
    with pytest.raises(tp.MemoryBudgetError, match="width 10000000"):
        tp.coord_check(tp.MLP(tp.mup(2), 2, 1), d1(), widths=[64, 128, 10 ** 7], seeds=1,
                       executor="serial")
    assert calls == []
