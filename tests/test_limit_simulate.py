"""simulate_limit's pipeline: options checked once, the engine chosen by the
classification, the typed result, and the Trajectory it becomes."""
import numpy as np
import pytest
from conftest import D1, N2, d1, within_se

import tp_limits as tp
from tp_limits.limit import prepare_limit
from tp_limits.limit.montecarlo import MonteCarloEngine
from tp_limits.limit.options import LimitOptions
from tp_limits.spec import Problem

ENGINES = {
    "one_hidden exact": (tp.MLP(tp.mup(1), 2, 1, phi="id"), {}),
    "one_hidden monte_carlo": (tp.MLP(tp.mup(1), 2, 1), dict(particles=4_000)),
    "one_hidden quadrature": (tp.MLP(tp.mup(1), 2, 1), dict(method="quadrature",
                                                            particles=40 ** 3)),
    "deep exact": (tp.MLP(tp.mup(2), 2, 1, phi="id"), {}),
    "deep monte_carlo": (tp.MLP(tp.mup(2), 2, 1), dict(particles=2_000)),
    "kernel": (tp.MLP(tp.ntp(2), 2, 1, phi="relu"), dict(samples=4)),
    "trivial": (tp.MLP(tp.ntp(2, c="1/2"), 2, 1, phi="relu"), dict(samples=4)),
}


def long_d1(repeats=3, lr=0.3):
    return tp.Routine(np.tile(D1["X"], (repeats, 1)), np.tile(D1["Y"], (repeats, 1)), lr=lr,
                      eval_inputs=D1["eval_inputs"])


@pytest.mark.parametrize("case", sorted(ENGINES))
def test_every_engine_evaluates_exactly_the_steps_it_reports(case):
    """eval_every=4 on T = 9: rows 0, 4, 8, 9 evaluated, the others NaN, in every engine
    (the exact engines used to evaluate every step and report only some)."""
    net, kw = ENGINES[case]
    tr = tp.simulate_limit(net, long_d1(), eval_every=4, **kw)
    assert tr.meta["eval_steps"] == [0, 4, 8, 9]
    finite_rows = [t for t in range(10) if np.all(np.isfinite(tr.f_eval[t]))]
    assert finite_rows == [0, 4, 8, 9], case
    assert np.all(np.isnan(tr.f_eval[[1, 2, 3, 5, 6, 7]]))
    assert np.all(np.isfinite(tr.f_eval_se[[0, 4, 8, 9]]))
    every = tp.simulate_limit(net, long_d1(), **kw)
    rows = [0, 4, 8, 9]
    if case == "deep monte_carlo":      # evaluation hats are random draws: same law, other values
        se = np.hypot(tr.f_eval_se[rows], every.f_eval_se[rows])
        within_se(tr.f_eval[rows], every.f_eval[rows], se, skip_zero=True)
    else:
        assert np.allclose(tr.f_eval[rows], every.f_eval[rows], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", sorted(ENGINES))
def test_engine_names_and_applied_options_in_meta(case):
    net, kw = ENGINES[case]
    tr = tp.simulate_limit(net, d1(), **kw)
    assert tr.meta["engine"].startswith("limit/")
    # the Numba/NumPy choice is reported only by the engine that uses it
    uses_kernel = case in ("one_hidden monte_carlo", "one_hidden quadrature")
    assert (tr.meta["kernel"] == "numba") == uses_kernel
    assert tr.completed_steps == 3 and tr.meta["se_method"]


@pytest.mark.parametrize("kwargs, match", [
    (dict(kernel="cuda"), "kernel"),
    (dict(kernel="bogus"), "kernel"),
    (dict(zdot="adjoint"), "zdot"),
    (dict(record=("stats", "spectral")), "record"),
    (dict(record=None), "record"),
    (dict(record="stats"), "record"),
    (dict(eval_every=0), "eval_every"),
    (dict(workers=0), "workers"),
    (dict(seed=-1), "seed"),
    (dict(seed=1.5), "seed"),
    (dict(particles=1), "particles"),
    (dict(progress="yes"), "progress"),
    (dict(on_divergence="ignore"), "on_divergence"),
    (dict(method="quadrature"), "one hidden layer"),
    (dict(zdot="tangent"), None),          # accepted for tanh
])
def test_deep_engine_options_checked_before_work(kwargs, match):
    """The deep engine ignored kernel= (and wrote meta['kernel'] = 'cuda'); every
    option is now checked whatever the engine, before anything runs."""
    net = tp.MLP(tp.mup(2), 2, 1, phi="tanh")
    if match is None:
        prepare_limit(net, d1(), **kwargs)
        return
    with pytest.raises(tp.SpecError, match=match):
        prepare_limit(net, d1(), **kwargs)


def test_unknown_option_names_the_valid_ones():
    with pytest.raises(tp.SpecError, match="particle"):
        LimitOptions.of(particle=10)


def test_deep_record_off_saves_the_initial_values():
    """record=() promised to save memory; the deep engine kept the eval inputs' initial
    values anyway.  Now it keeps none, and the memory guard counts them only when kept."""
    net = tp.MLP(tp.mup(3), 2, 1, phi="tanh")
    p = Problem(net, d1())
    with_stats = MonteCarloEngine(p, None, LimitOptions.of(particles=2_000))
    without = MonteCarloEngine(p, None, LimitOptions.of(particles=2_000, record=()))
    assert without.bytes_per_particle() < with_stats.bytes_per_particle()
    from tp_limits.limit.montecarlo.montecarlo import DeepRun
    run = DeepRun(without.spec, np.random.default_rng(0))
    run.run(lambda t: None)
    assert run.init == [] and run.res.moments is None
    tr = tp.simulate_limit(net, d1(), particles=2_000, record=())
    assert tr.stats == {}


def test_prepare_checks_memory_without_running():
    net = tp.MLP(tp.mup(1), 2, 1)
    with pytest.raises(tp.MemoryBudgetError, match="at most"):
        prepare_limit(net, d1(), particles=10 ** 13)
    plan = prepare_limit(net, d1(), particles=2_000)
    # the default QMC sampler rounds up to a power of two; antithetic pairs keep the count
    assert plan.engine.particles == 2_048 and plan.run().steps == 3
    assert prepare_limit(net, d1(), particles=2_000, sampler="antithetic").engine.particles \
        == 2_000


def test_the_same_result_whatever_the_entry_point():
    net = tp.MLP(tp.mup(1), 3, 2, phi="tanh")
    r = tp.Routine(lr=0.4, **N2)
    a = tp.simulate_limit(net, r, particles=4_000, seed=3)
    b = prepare_limit(net, r, particles=4_000, seed=3).run()
    assert np.array_equal(a.f_eval, b.f_eval) and np.array_equal(a.f_eval_se, b.f_eval_se)
