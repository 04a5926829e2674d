"""The optimum of a learning-rate curve (tp_limits.analysis.optimum) and the limit's
metric from pooled replicates (tp_limits.analysis.pooling), on curves whose truth is
known: quadratic seeds, two-minimum curves, noisy outputs under a quadratic loss."""
import math

import numpy as np
import pytest

from tp_limits.analysis import optimum as opt
from tp_limits.analysis.pooling import pool


def drive(gen, f):
    """Run a search generator against f(log η) -> per-seed costs."""
    x = next(gen)
    try:
        while True:
            x = gen.send(f(x))
    except StopIteration as stop:
        return stop.value


def quadratic_seeds(centres, a=2.0):
    """f_s(x) = a (x - c_s)^2 + 1: F is minimized at mean(c), and the minimizer's standard
    error is sd(c)/√S exactly."""
    c = np.asarray(centres, float)
    return lambda x: a * (np.asarray(x)[..., None] - c) ** 2 + 1.0


def test_the_search_finds_the_minimum_of_the_seed_mean_and_its_exact_standard_error():
    c = np.array([0.31, 0.52, 0.40, 0.18, 0.47, 0.36])
    f = quadratic_seeds(c)
    logs = np.log([0.5, 1.0, 2.0, 4.0])                  # a 2x grid; the best point is 2.0
    costs = f(logs)
    assert opt.candidates(opt.seed_mean(costs)) == [2]
    found = drive(opt.search(logs, costs, 2, budget=30), f)
    x, _, (a, b), *_ , runs = found
    assert abs(x - c.mean()) <= max(x - a, b - x) and b - a <= opt.SEARCH_TOL
    assert runs <= 30 + 2
    o = opt.searched_optimum(logs, [(2, found)])
    assert abs(o.se - c.std(ddof=1) / math.sqrt(len(c))) < 1e-9 and o.dof == 5
    half = math.log(o.high) - math.log(o.lr)
    from scipy.stats import t
    assert abs(half - (t.ppf(0.975, 5) * o.se + o.reach)) < 1e-12


def test_a_budget_too_small_keeps_the_bracket_as_the_search_error():
    f = quadratic_seeds([0.3, 0.5])
    logs = np.log([0.25, 1.0, 4.0])
    found = drive(opt.search(logs, f(logs), 1, budget=2), f)
    o = opt.searched_optimum(logs, [(1, found)])
    a, b = found[2]
    assert o.evaluations == 4 and o.reach == max(found[0] - a, b - found[0]) > 0.3


def test_intervals_cover_the_optimum_of_the_expected_curve_at_their_nominal_rate():
    """Seeds' optima c_s ~ N(0.4, 0.2²) (in log η) with per-seed curvature: over 400
    sweeps of 5 seeds the 95 % interval holds the true optimum 0.4 at a rate within 5
    binomial standard errors of 0.95 (or above)."""
    rng = np.random.default_rng(7)
    logs = np.log([0.25, 0.5, 1.0, 2.0, 4.0, 8.0])
    hits, trials = 0, 400
    for _ in range(trials):
        c = rng.normal(0.4, 0.2, 5)
        f = quadratic_seeds(c, a=1.0)
        costs = f(logs)
        i = opt.candidates(opt.seed_mean(costs))[0]
        o = opt.best_optimum(logs, costs, [(i, drive(opt.search(logs, costs, i, 12), f))])
        hits += math.log(o.low) <= 0.4 <= math.log(o.high)
    p = hits / trials
    assert p >= 0.95 - 5 * math.sqrt(0.95 * 0.05 / trials), p
    assert p <= 0.995                            # and not vacuous: the intervals are not huge


def test_every_grid_minimum_is_searched_and_rivals_within_the_noise_are_named():
    """Two wells of equal depth (different per seed): both are reported; one well made
    deeper by many standard errors wins alone."""
    def curves(depth2):
        shift = np.array([0.0, 0.002, -0.002, 0.001])

        def f(x):
            x = np.asarray(x)[..., None]
            return (1.0 - np.exp(-((x + 1.0) / 0.3) ** 2) * (1 + shift)
                    - depth2 * np.exp(-((x - 1.0) / 0.3) ** 2) * (1 - shift))
        return f
    logs = np.linspace(-2, 2, 9)
    for depth2, rival in ((1.0, True), (1.5, False)):
        f = curves(depth2)
        costs = f(logs)
        cands = opt.candidates(opt.seed_mean(costs))
        assert sorted(cands) == [2, 6]
        found = [(i, drive(opt.search(logs, costs, i, 20), f)) for i in cands]
        o = opt.best_optimum(logs, costs, found)
        assert bool(o.rivals) is rival, o
        if not rival:
            assert abs(math.log(o.lr) - 1.0) < 0.02


def test_without_a_search_the_interval_holds_the_grid_bracket():
    f = quadratic_seeds([0.1, 0.2, 0.15])
    logs = np.log([0.25, 0.5, 1.0, 2.0, 4.0])
    o = opt.grid_optimum(logs, f(logs))
    assert o.method == "grid" and o.low <= 0.5 and o.high >= 2.0


def test_an_edge_minimum_is_not_searched_and_is_flagged():
    f = quadratic_seeds([3.0, 3.2])
    logs = np.log([0.25, 0.5, 1.0])
    costs = f(logs)
    assert opt.candidates(opt.seed_mean(costs)) == [2]
    o = opt.best_optimum(logs, costs, [])
    assert o.method == "edge"
    # a bound open on the far side, not an interval: [η_2, ∞) at the top edge
    assert o.lr == pytest.approx(1.0) and o.low == pytest.approx(0.5) and o.high == np.inf
    low = opt.grid_optimum(logs[::-1] * -1, costs[::-1])      # the mirror: the bottom edge
    assert low.method == "edge" and low.low == 0.0 and np.isfinite(low.high)


class _Run:
    """What pooling reads of a replicate: outputs, loss, meta, status."""

    def __init__(self, f_eval, f_train):
        from tp_limits.engine.trajectory import Trajectory
        self.tr = Trajectory(f_eval, f_train, np.zeros(len(f_train)))


def test_pooled_replicates_shrink_the_bias_and_the_jackknife_gives_its_error():
    """Outputs f + e_r with e_r ~ N(0, s²): under the squared error the per-replicate metric
    is biased by s²/2 whatever the replicates; the pooled metric by s²/(2R); the jackknife's
    standard error does not understate the pooled metric's spread (2000 sweeps, R = 4)."""
    import tp_limits as tp
    from tp_limits.analysis.pooling import replicate_values
    from tp_limits.spec import Problem
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    r = tp.Routine(X, np.array([[0.5], [-0.5]]), lr=0.1, batch_size=2,
                   eval_inputs=X, eval_targets=np.array([[1.0], [0.0]]))
    p = Problem(tp.MLP(tp.mup(1), 2, 1), r)
    truth = np.array([[[0.8], [0.1]]] * 2)               # (T+1, E, d_out), T = 1
    s, R, trials = 0.3, 4, 2000
    rng = np.random.default_rng(3)

    def measure(tr):
        return p.eval_metrics(tr.f_eval)["eval_loss"][-1]
    exact = measure(_Run(truth, np.zeros((1, 2, 1))).tr)
    per, pooled, se2 = [], [], []
    for _ in range(trials):
        runs = [_Run(truth + s * rng.standard_normal(truth.shape),
                     np.zeros((1, 2, 1))).tr for _ in range(R)]
        per.append(np.mean([measure(x) for x in runs]))
        v = replicate_values(p, runs, measure)
        assert abs(np.mean(v) - measure(pool(p, runs))) < 1e-14
        pooled.append(np.mean(v))
        se2.append(np.var(v, ddof=1) / R)
    per, pooled = np.array(per), np.array(pooled)
    se = lambda v: v.std(ddof=1) / math.sqrt(trials)     # noqa: E731
    bias = s ** 2 / 2                  # ½ (mean over the two outputs of) s², per replicate
    assert abs((per.mean() - exact) - bias) < 5 * se(per)
    assert abs((pooled.mean() - exact) - bias / R) < 5 * se(pooled)
    # the jackknife's variance errs on the safe side (Efron-Stein: its expectation is at
    # least the true variance; here by the metric's quadratic term, 1.4x at R = 4)
    assert 0.95 < np.mean(se2) / pooled.var(ddof=1) < 1.6
    # the pooled trajectory's training loss is recomputed from the pooled outputs
    runs = [_Run(truth, np.full((1, 2, 1), v)).tr for v in (0.1, 0.3)]
    assert abs(pool(p, runs).loss[0] - np.mean(p.loss.value(np.full((2, 1), 0.2),
                                                          p.targets[:2], np))) < 1e-15
