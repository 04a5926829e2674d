"""Replicates and error bars: degrees of freedom, Student-t intervals, and their coverage."""
import numpy as np
import pytest
from conftest import N2, d1

import tp_limits as tp


def coverage(net, routine, runs, **kw):
    """Fraction of (run, step >= 1, input, output) entries whose nominal 95 % interval holds
    the exact limit, over ``runs`` Monte Carlo simulations with different seeds."""
    exact = tp.simulate_limit(net, routine, method="exact")
    hits = []
    for seed in range(runs):
        mc = tp.simulate_limit(net, routine, method="monte_carlo", seed=1000 + seed,
                               record=(), **kw)
        low, high = mc.f_eval_ci(0.95)
        truth = exact.f_eval[1:]
        hits.append((low[1:] <= truth) & (truth <= high[1:]))
    return float(np.mean(hits)), mc


@pytest.mark.parametrize("case", ["one hidden layer", "deep, L = 2"])
def test_nominal_95_percent_intervals_cover_the_truth(case):
    """Monte Carlo against the exact linear engines, 8 replicates (7 degrees of freedom):
    the Student-t interval covers the exact value in 90-99 % of repeated runs.  (A normal
    quantile with 7 degrees of freedom would cover only ~91 %, and a single run's batch
    means can be off by a factor 2.)"""
    if case == "one hidden layer":
        net, r, runs, N = tp.MLP(tp.mup(1), 3, 2, phi="id"), tp.Routine(lr=0.7, **N2), 200, 2_000
    else:
        net, r, runs, N = tp.MLP(tp.mup(2), 2, 1, phi="id"), d1(), 100, 1_000
    frac, last = coverage(net, r, runs, particles=N, replicates=8)
    assert last.se_dof == 7 and last.se_dof == 7
    assert 0.90 <= frac <= 0.99, frac


def test_default_is_eight_replicates_and_says_so():
    tr = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1), d1(), particles=2_000)
    assert tr.meta["replicates"] == 8 and tr.meta["replicates_completed"] == 8
    assert tr.se_dof == 7 and "8 independent replicates" in tr.meta["se_method"]
    low, high = tr.f_eval_ci(0.95)
    half = (high - low)[1:] / 2 / tr.f_eval_se[1:]
    assert np.allclose(half, 2.3646, atol=1e-3)          # t_7(0.975)


@pytest.mark.parametrize("kwargs, dof", [
    (dict(particles=2_000, replicates=1), "blocks"),      # batch means over particle blocks
    (dict(particles=2_000, replicates=3), 2),
    (dict(method="quadrature", particles=40 ** 3), None),
    (dict(method="exact"), None),
])
def test_every_standard_error_carries_its_degrees_of_freedom(kwargs, dof):
    phi = "id" if kwargs.get("method") == "exact" else "tanh"
    tr = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1, phi=phi), d1(), **kwargs)
    if dof == "blocks":
        assert tr.se_dof >= 1 and "batch means" in tr.meta["se_method"]
    else:
        assert tr.se_dof == dof
    low, high = tr.f_eval_ci()
    assert np.all(low <= tr.f_eval) and np.all(tr.f_eval <= high)
    if kwargs.get("method") == "exact":
        assert np.array_equal(low, high)


def test_deep_and_kernel_engines_report_their_degrees_of_freedom():
    deep = tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1), d1(), particles=1_000, replicates=1)
    assert deep.se_dof == 31                               # 32 particle groups
    kern = tp.simulate_limit(tp.MLP(tp.ntp(2), 2, 1, phi="relu"), d1(), samples=10)
    assert kern.se_dof == 9
    assert tp.simulate_limit(tp.MLP(tp.ntp(2), 2, 1, phi="relu"), d1(), f0="zero").se_dof is None


def test_intervals_need_a_standard_error_and_a_level():
    fin = tp.train_finite(tp.MLP(tp.mup(1), 2, 1), d1(), width=32)
    with pytest.raises(tp.TPError, match="no standard error"):
        fin.f_eval_ci()
    lim = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1), d1(), particles=2_000, replicates=2)
    for bad in (0, 1, 1.5, "95%"):
        with pytest.raises(tp.TPError, match="level"):
            lim.f_eval_ci(bad)


def test_a_diverged_replicate_is_reported():
    """The combined result says a replicate diverged even when the first one did not."""
    from tp_limits.limit.replicates import combine
    from tp_limits.limit.result import LimitResult
    runs = [LimitResult.empty(3, 2, 1, 1) for _ in range(3)]
    for r in runs:
        r.f_eval[:] = 0.0
        r.completed = 3
    runs[2].diverged, runs[2].completed = {"step": 2, "layer": None, "quantity": "output f"}, 2
    out = combine(runs, 3)
    assert out.diverged == runs[2].diverged and out.completed == 2 and out.se_dof == 2


@pytest.mark.parametrize("L, module, name", [
    (1, "tp_limits.limit.fused.engine", "random_particles"),
    (2, "tp_limits.limit.montecarlo.engine", "DeepRun")])
@pytest.mark.parametrize("stop_at", [1, 3])
def test_ctrl_c_while_a_replicate_draws_its_particles(monkeypatch, L, module, name, stop_at):
    """Ctrl-C between two replicates' step loops (while the next draws its particles) keeps
    the replicates already finished, and a trajectory that says it was interrupted."""
    import importlib
    mod = importlib.import_module(module)
    original, calls = getattr(mod, name), {"n": 0}

    def draw(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == stop_at:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(mod, name, draw)
    tr = tp.simulate_limit(tp.MLP(tp.mup(L), 2, 1), d1(), particles=1_000, replicates=4,
                           method="monte_carlo")
    assert tr.interrupted and calls["n"] == stop_at
    done = stop_at - 1
    if done:
        assert tr.meta["replicates_completed"] == done and tr.se_dof == done - 1
        assert tr.completed_steps == d1().steps and np.all(np.isfinite(tr.f_eval))
    else:
        assert tr.completed_steps == 0
