"""Learning-rate sweeps (tp.lr_sweep): optima per width and in the limit, metrics, data,
executors (a Dask cluster included) and bad input."""
import io
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import D1, d1

import tp_limits as tp

LINEAR = tp.MLP(tp.mup(2), 2, 1, phi="id")


def repeated_d1(times=4):
    return tp.Routine(np.tile(D1["X"], (times, 1)), np.tile(D1["Y"], (times, 1)), lr=0.1,
                      eval_inputs=D1["eval_inputs"])


def test_exact_limit_optimum_to_one_part_in_a_million():
    """Deep linear μP: the limit's optimal η comes from a 1-D minimizer, not the grid."""
    from scipy.optimize import minimize_scalar
    r = repeated_d1()
    sw = tp.lr_sweep(LINEAR, r, np.geomspace(0.05, 1.0, 7), progress=False)
    lr, lo, hi = sw.optimal_lr["inf"]
    assert lo == lr == hi and sw.values("inf").shape == (7, 1)

    def final_loss(eta):
        return tp.simulate_limit(LINEAR, r.with_lr(eta)).loss[-1]
    ref = minimize_scalar(final_loss, bracket=(0.2, 0.27, 0.35), method="brent", tol=1e-12).x
    assert abs(lr / ref - 1) < 1e-6, (lr, ref)


def test_finite_optima_approach_the_limits():
    r = repeated_d1()
    widths = [64, 256, 1024, 2048]
    sw = tp.lr_sweep(LINEAR, r, np.geomspace(0.22, 0.33, 11), widths=widths, seeds=6,
                     progress=False)
    lim = sw.optimal_lr["inf"][0]
    gap = [abs(np.log(sw.optimal_lr[w][0] / lim)) for w in widths]
    rate = np.polyfit(np.log(widths), np.log(gap), 1)[0]
    assert rate < -0.3, (rate, gap)
    lr, lo, hi = sw.optimal_lr[widths[-1]]
    assert lo <= lim <= hi                              # the widest agrees within its interval
    assert [row[0] for row in sw.table().rows] == ["64", "256", "1024", "2048", "inf"]
    df = sw.to_pandas()
    assert set(df.columns) == {"width", "lr", "seed", "value", "diverged"}
    searched = sum(sw.optima[w].evaluations for w in widths)    # beyond the grid
    assert sw.optima[2048].method == "search" and 0 < sw.optima[2048].evaluations <= 12 + 2
    assert len(df) == 11 * 6 * 4 + 11 + 6 * searched
    fig = sw.plot()
    assert len(fig.axes) == 2 and fig.axes[1].get_yscale() == "log"


def test_divergence_counts_as_worst_and_sp_has_no_limit():
    r = repeated_d1(6)
    sp = tp.MLP(tp.sp(2), 2, 1, phi="tanh")
    sw = tp.lr_sweep(sp, r, [0.01, 0.1, 1.0, 30.0], widths=[32, 128], seeds=2,
                     executor="serial", progress=False)
    assert "inf" not in sw.optimal_lr and "unstable" in sw.no_limit
    last = sw.table().rows[-1]        # the reason's first clause; the rest in no_limit
    assert last[0] == "inf" and sw.no_limit.startswith(last[4] + ":") and "unstable" in last[4]
    hot = [rec for rec in sw.records if rec["lr"] == 30.0]
    assert all(rec["diverged"] and rec["value"] == np.inf for rec in hot)
    assert all(sw.optimal_lr[w][0] < 30.0 for w in (32, 128))


def test_held_out_metrics_on_real_digits():
    data = tp.datasets.digits(classes=3, n_train=64, seed=1)
    assert data.X_train.shape == (64, 64) and set(np.unique(data.y_test)) == {0, 1, 2}
    assert abs(np.mean(np.linalg.norm(data.X_train, axis=1)) - 1) < 0.2   # unit-scale inputs
    r = data.routine(lr=0.5, batch_size=8, steps=6, n_eval=30)
    net = tp.MLP(tp.mup(1), data.d_in, 3, phi="tanh")
    tr = tp.train_finite(net, r, 256, seed=0, record=())
    assert tr.stats["eval_accuracy"].shape == (7,) and tr.stats["eval_loss"][-1] < np.log(3)
    lim = tp.simulate_limit(net, r, particles=4_000, replicates=2)
    assert np.all(np.isfinite(lim.stats["eval_loss"])) and 0 <= lim.stats["eval_accuracy"][-1] <= 1
    sw = tp.lr_sweep(net, r, [0.1, 0.5, 2.0], widths=[64, 128], seeds=2, metric="eval_accuracy",
                     replicates=2, particles=2_000, executor="serial", progress=False)
    assert sw.goal == "max" and set(sw.optimal_lr) == {64, 128, "inf"}


def test_a_dask_cluster_gives_exactly_the_serial_sweep():
    distributed = pytest.importorskip(
        "distributed", reason="Dask's distributed is not installed (pip install -e \".[dask]\")")
    r = repeated_d1(2)
    kw = dict(widths=[32, 64], seeds=2, limit=False, progress=False)
    lrs = [0.1, 0.3, 0.9]
    serial = tp.lr_sweep(LINEAR, r, lrs, executor="serial", **kw)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = tp.lr_sweep(LINEAR, r, lrs, executor=client, **kw)
        cc = tp.coord_check(tp.MLP(tp.mup(1), 2, 1), d1(), [32, 64], seeds=2, executor=client,
                            record=("stats",))
        lim = tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1), d1(), particles=1_000, replicates=2,
                                executor=client)
    assert remote.records == serial.records
    assert cc.records == tp.coord_check(tp.MLP(tp.mup(1), 2, 1), d1(), [32, 64], seeds=2,
                                        executor="serial", record=("stats",)).records
    same = tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1), d1(), particles=1_000, replicates=2)
    assert np.array_equal(lim.f_eval, same.f_eval)
    with pytest.raises(tp.SpecError, match="closed"):
        tp.lr_sweep(LINEAR, r, lrs, executor=client, **kw)


def test_replicates_on_any_executor_give_the_same_limit():
    net = tp.MLP(tp.mup(1), 2, 1)
    a = tp.simulate_limit(net, d1(), particles=2_000, replicates=3)
    with ThreadPoolExecutor(2) as pool:
        b = tp.simulate_limit(net, d1(), particles=2_000, replicates=3, executor=pool)
    c = tp.simulate_limit(net, d1(), particles=2_000, replicates=3, workers=2)
    assert np.array_equal(a.f_eval, b.f_eval) and np.array_equal(a.f_eval, c.f_eval)


@pytest.mark.parametrize("kwargs, match", [
    (dict(lrs=[]), "at least three"), (dict(lrs=[0.1, 0.2]), "at least three"),
    (dict(lrs=[0.1, 0.0, 0.3]), "positive"), (dict(lrs=[0.1, -1.0, 0.3]), "positive"),
    (dict(lrs=0.1), "list of learning rates"), (dict(metric="accuracy"), "metric"),
    (dict(metric="eval_loss"), "eval_targets"), (dict(metric="eval_accuracy"), "eval_targets"),
    (dict(executor="cluster"), "executor"), (dict(replicates=1), "replicates"),
    (dict(limit=False, widths=()), "nothing to sweep"), (dict(widths=[32, 0]), "width"),
])
def test_bad_sweeps_are_refused_before_any_work(kwargs, match):
    args = dict(lrs=[0.1, 0.2, 0.4], widths=[32, 64], executor="serial", progress=False)
    args.update(kwargs)
    lrs = args.pop("lrs")
    with pytest.raises(tp.TPError, match=match):
        tp.lr_sweep(LINEAR, d1(), lrs, **args)


def test_closed_executor_is_refused():
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    with pytest.raises(tp.SpecError, match="shut down"):
        tp.lr_sweep(LINEAR, d1(), [0.1, 0.2, 0.4], widths=[32, 64], executor=pool)


def _nan_metric(traj):
    return float("nan")


def test_a_metric_that_returns_nan_is_named_not_counted_as_divergence():
    net = tp.MLP(tp.mup(1), 2, 1)
    with pytest.raises(tp.SpecError, match="metric _nan_metric returned nan for a run that "
                                           "did not diverge"):
        tp.lr_sweep(net, d1(), [0.1, 0.2, 0.4], widths=[32], seeds=1, limit=False,
                    metric=_nan_metric, executor="serial", progress=False)


def test_an_optimum_on_the_edge_of_the_grid_is_warned_about():
    net = tp.MLP(tp.mup(1), 2, 1)
    with pytest.warns(RuntimeWarning, match=r"edge of the grid \(32: η = 0.004\)"):
        sw = tp.lr_sweep(net, d1(), [0.001, 0.002, 0.004], widths=[32], seeds=2, limit=False,
                         executor="serial", progress=False)
    # its interval is the bound [0.002, ∞), shown as such, and the plot marks it ▲
    assert np.allclose(sw.optimal_lr[32], (0.004, 0.002, np.inf), rtol=1e-12)
    assert sw.optima[32].method == "edge"
    assert sw.table().rows[0][2] == "[0.002, inf]"
    assert [ln.get_marker() for ln in sw.plot().axes[1].lines if ln.get_xdata().size] == ["^"]


def _raising_metric(traj):
    raise RuntimeError("boom")


def test_a_metric_that_raises_is_named_at_its_first_run():
    with pytest.raises(tp.SpecError, match="metric _raising_metric raised RuntimeError: boom"):
        tp.lr_sweep(tp.MLP(tp.mup(1), 2, 1), d1(), [0.1, 0.2, 0.4], widths=[32], seeds=1,
                    metric=_raising_metric, executor="serial", progress=False)


def test_plots_of_partial_and_all_diverged_sweeps_draw_what_exists():
    """An interrupted sweep (a width without runs, hence without an optimum) and one whose
    every run diverged (NaN optima) still draw: the report of a PARTIAL or failed sweep
    must not fail on its figure."""
    import dataclasses

    import matplotlib
    matplotlib.use("Agg")
    net = tp.MLP(tp.mup(1), 2, 1)
    sw = tp.lr_sweep(net, d1(), [0.1, 0.2, 0.4], widths=[32, 64], seeds=2, limit=False,
                     executor="serial", progress=False)
    partial = dataclasses.replace(
        sw, records=tuple(r for r in sw.records if r["width"] != 64),
        optimal_lr={32: sw.optimal_lr[32]}, interrupted=True)
    partial.plot().savefig(io.BytesIO(), format="png")
    rows = partial.table().rows
    assert [r[0] for r in rows][:2] == ["32", "64"] and rows[1][1] == "nan"
    gone = tp.lr_sweep(net, d1(), [1e4, 1e5, 1e6], widths=[32, 64], seeds=2,
                       limit=False, executor="serial", progress=False)
    assert all(np.isnan(gone.optimal_lr[w][0]) for w in (32, 64))
    gone.plot().savefig(io.BytesIO(), format="png")


def test_a_monte_carlo_limit_is_measured_on_its_pooled_replicates():
    """The limit's values are the metric of the replicates' pooled outputs with the
    jackknife's spread, not each replicate's metric (biased by its own noise: the Adam gap
    at large learning rates, docs/theory.md §8.3)."""
    from tp_limits.analysis.pooling import pool, pseudo_values
    from tp_limits.spec import Problem
    net = tp.MLP(tp.mup(2, optimizer="adam"), 2, 1, phi="tanh")
    r = repeated_d1(2).with_lr(0.3)
    r = tp.Routine(r.X, r.Y, lr=0.3, eval_inputs=r.eval_inputs,
                   eval_targets=np.array([[1.0], [-1.0], [0.5]]), optimizer=tp.Adam())
    lrs = [0.1, 0.3, 0.9]
    sw = tp.lr_sweep(net, r, lrs, particles=400, replicates=3, metric="eval_loss", refine=0,
                     progress=False)
    T = Problem(net, r).T          # the sweep's runs evaluate at 0 and T only (eval_every)
    runs = [tp.simulate_limit(net, r.with_lr(0.3), particles=400, replicates=1, seed=s,
                              f0="zero", record=(), progress=False, eval_every=T)
            for s in range(3)]
    measure = lambda tr: tr.stats["eval_loss"][-1]              # noqa: E731
    got = sw.values("inf")[1]
    pv = pseudo_values(Problem(net, r), runs, measure)
    assert abs(np.mean(got) - measure(pool(Problem(net, r), runs))) < 1e-13
    assert np.allclose(got - got.mean(), pv - pv.mean(), rtol=0, atol=1e-13)
    per = np.array([measure(x) for x in runs])
    assert not np.allclose(got, per)


def test_a_sweep_priced_beyond_its_time_budget_is_refused_before_any_run(monkeypatch):
    """time_budget is the whole sweep's: the grid and one search per curve at every seed
    and replicate, priced by the engines' cost models, summed; refused before a run."""
    import tp_limits.analysis.lr_sweep as mod
    net = tp.MLP(tp.mup(2), 2, 1, phi="tanh")
    r = repeated_d1(10)

    def no_run(*a, **k):
        raise AssertionError("a refused sweep ran")
    monkeypatch.setattr(mod, "train_finite", no_run)
    monkeypatch.setattr(mod, "simulate_limit", no_run)
    with pytest.raises(tp.SpecError, match=r"this sweep .* 3 widths × 4 seeds .* estimated at"):
        tp.lr_sweep(net, r, [0.1, 0.2, 0.4], widths=[1024, 2048, 4096], seeds=4,
                    particles=4000, replicates=4, time_budget=1.0, progress=False)
    with pytest.raises(tp.SpecError, match="time_budget"):
        tp.lr_sweep(net, r, [0.1, 0.2, 0.4], widths=[32, 64], seeds=2, time_budget=-1)


@pytest.mark.filterwarnings("ignore:lr_sweep")
def test_a_built_in_metric_evaluates_only_the_ends_and_gets_the_same_sweep():
    """A built-in metric reads the last step alone, so the sweep's runs evaluate the held-out
    inputs at 0 and T only: the same values as runs that evaluate every step, in the
    finite widths and in the one-hidden-layer limit (whose particles do not depend on
    what is evaluated; the deep Monte Carlo's history holds the evaluated rows, so there
    the two are equally good estimates, not the same numbers); a metric function sees
    every step."""
    data = tp.datasets.digits(classes=3, n_train=48, seed=1)
    r = data.routine(lr=0.5, batch_size=8, steps=6, n_eval=30)
    net = tp.MLP(tp.mup(1), data.d_in, 3, phi="tanh")
    kw = dict(widths=[32, 64], seeds=2, metric="eval_loss", replicates=2, particles=1_000,
              executor="serial", progress=False, refine=0)
    lrs = [0.1, 0.5, 2.0]
    ends = tp.lr_sweep(net, r, lrs, **kw)
    every = tp.lr_sweep(net, r, lrs, eval_every=1, **kw)
    fin = lambda sw: [(x["width"], x["lr"], x["seed"], x["value"]) for x in sw.records]  # noqa
    assert fin(ends) == fin(every)
    np.testing.assert_allclose(ends.values("inf"), every.values("inf"), rtol=1e-12)
    seen = []

    def final_eval_loss(tr):
        seen.append(int(np.sum(np.isnan(tr.f_eval))))
        return tr.stats["eval_loss"][-1]

    tp.lr_sweep(net, r, lrs, **{**kw, "metric": final_eval_loss, "widths": [32]})
    assert seen and set(seen) == {0}


def test_the_table_reports_the_best_value_of_any_rate_run_the_searches_included():
    """'best <metric>' is the best seed mean of every η run at a width: a search that
    closes in on the optimum finds a value below the best grid point's, and the table
    shows it; the plot draws the searched rates, so such a dip is visible."""
    net = tp.MLP(tp.mup(2), 2, 1, phi="tanh")
    sw = tp.lr_sweep(net, repeated_d1(), [0.02, 0.3, 4.0], widths=[64], seeds=2, limit=False,
                     executor="serial", progress=False, refine=8)
    runs = {}
    for rec in sw.records:
        runs.setdefault(rec["lr"], []).append(rec["value"])
    grid_best = np.nanmin(sw.values(64).mean(axis=1))
    best = min(np.mean(v) for v in runs.values())
    assert len(runs) > 3 and best < grid_best                  # the search found better
    assert sw.best_value(64) == best
    assert sw.table().rows[0][3] == f"{best:.4g}"
    assert np.isnan(sw.best_value(128))
    # the plot draws the searched rates as points of their own
    eta, means = sw.searched(64)
    assert len(eta) == len(runs) - 3 and min(means) == best
    fig = sw.plot()
    marks = [ln for ln in fig.axes[0].lines if ln.get_marker() == "x"]
    assert len(marks) == 1 and np.allclose(marks[0].get_xdata(), eta)
    # the log axes' labels do not overprint one another
    fig.canvas.draw()
    for ax in fig.axes:
        lo, hi = ax.get_ylim()
        labels = [t for t in ax.get_yticklabels(minor=False) + ax.get_yticklabels(minor=True)
                  if t.get_text() and lo <= t.get_position()[1] <= hi]
        boxes = sorted((t.get_window_extent().y0, t.get_window_extent().y1) for t in labels)
        assert all(a[1] <= b[0] + 0.5 for a, b in zip(boxes, boxes[1:])), ax.get_title()
