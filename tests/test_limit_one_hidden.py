"""The one-hidden-layer limit: exact linear forms, Monte Carlo, quadrature, finite networks."""
import numpy as np
import pytest
from conftest import D1, N2, agree, d1, within_se

import tp_limits as tp
from tp_limits.limit.fused import engine as one_hidden
from tp_limits.limit.fused.blocks import BLAS_MIN_D
from tp_limits.limit.fused.phi import CACHE_MIN_D, cache_pays, cache_planes
from tp_limits.limit.fused.sweeps import NumbaSweep


def within_limit_se(mc, reference):
    """mc agrees with a reference of negligible error within mc's own t interval."""
    assert np.all(mc.f_eval_se[1:] > 0)
    within_se(mc.f_eval[1:], reference.f_eval[1:], mc.f_eval_se[1:], mc.se_dof)


# ---- exact linear limit ----------------------------------------------------------
def test_exact_linear_first_step_and_mpq_recursion():
    """ABCD recursion vs the independent reduced (M, P, Q) form of docs/theory.md §2."""
    r = tp.Routine(lr=0.7, **N2)
    net = tp.MLP(tp.mup(1), 3, 2, phi="id", sigma=[1.3, 0.8])
    ex = tp.simulate_limit(net, r)
    assert ex.meta["method"] == "exact" and np.all(ex.f_eval_se == 0)
    eta, s1, s2 = 0.7, 1.3, 0.8
    M, P, Q = np.zeros((2, 3)), s2 ** 2 * np.eye(2), s1 ** 2 * np.eye(3)
    Y = r.targets(2)
    for t in range(r.steps):
        Xb, Yb = r.X[2 * t:2 * t + 2], Y[2 * t:2 * t + 2]
        assert np.allclose(ex.f_eval[t], r.eval_inputs @ M.T, atol=1e-12)
        chi = (Xb @ M.T - Yb) / 2
        G = chi.T @ Xb
        M, P, Q = (M - eta * (P @ G + G @ Q) + eta ** 2 * G @ M.T @ G,
                   P - eta * (G @ M.T + M @ G.T) + eta ** 2 * G @ Q @ G.T,
                   Q - eta * (G.T @ M + M.T @ G) + eta ** 2 * G.T @ P @ G)
    assert np.allclose(ex.f_eval[-1], r.eval_inputs @ M.T, atol=1e-12)


def test_exact_linear_n1_values():
    ex = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1, phi="id"), d1())
    # one kernel step with K = K_1 + K_2 = 2 ξ·ζ, f_0 = 0, χ_0 = -1, η = 1/2
    assert np.allclose(ex.f_eval[1, :, 0], [1.0, 0.6, 1.0])
    assert np.all(ex.f_eval[0] == 0)


@pytest.mark.parametrize("case", ["D1", "N2", "constants", "xent"])
def test_monte_carlo_matches_exact_linear(case):
    if case == "D1":
        net, r = tp.MLP(tp.mup(1), 2, 1, phi="id"), d1()
    elif case == "N2":
        net, r = tp.MLP(tp.mup(1), 3, 2, phi="id"), tp.Routine(lr=0.7, **N2)
    elif case == "constants":
        net = tp.MLP(tp.mfp(), 3, 2, phi="id", sigma=[1.3, 0.7], lr_mult=[0.5, 2.0],
                     readout_multiplier=1.5)
        r = tp.Routine(lr=0.3, **N2)
    else:
        X = np.random.default_rng(0).standard_normal((6, 2))
        net = tp.MLP(tp.mup(1), 2, 3, phi="id")
        r = tp.Routine(X, np.array([0, 2, 1, 1, 0, 2]), lr=0.8, loss="xent", batch_size=2)
    exact = tp.simulate_limit(net, r)
    mc = tp.simulate_limit(net, r, method="monte_carlo", particles=50_000, replicates=16, seed=1)
    within_limit_se(mc, exact)
    assert mc.meta["se_method"] == "standard error over 16 independent replicates"
    assert mc.se_dof == 15
    assert np.max(np.abs(mc.f_eval[0])) < 1e-15           # antithetic pairs: f_0 = 0 exactly


def test_stats_match_exact_linear():
    net, r = tp.MLP(tp.mup(1), 2, 1, phi="id"), d1()
    ex = tp.simulate_limit(net, r)
    mc = tp.simulate_limit(net, r, method="monte_carlo", particles=400_000, seed=2,
                           replicates=1)
    # relative MC error of a second moment of a Gaussian is ~ sqrt(2/N) = 0.22 %
    for key in ("h_rms", "x_rms", "dh_rms", "dx_rms"):
        assert np.allclose(mc.stats[key][1:], ex.stats[key][1:], rtol=5 * np.sqrt(2 / 400_000))
    assert np.allclose(mc.stats["feature_kernel"], ex.stats["feature_kernel"], rtol=0.01, atol=0.01)


# ---- nonlinear: quadrature and Monte Carlo -------------------------------------------
@pytest.fixture(scope="module")
def tanh_quadrature():
    net = tp.MLP(tp.mup(1), 2, 1, phi="tanh")
    return net, tp.simulate_limit(net, d1(), method="quadrature", particles=100 ** 3)


def test_quadrature_is_deterministic_and_converged(tanh_quadrature):
    net, q = tanh_quadrature
    # the estimate is a bound (three rules, a factor 2): 1.1e-4, the error against 160 nodes 8e-6
    assert q.meta["nodes_per_coordinate"] == 100 and q.f_eval_se.max() < 2e-4
    again = tp.simulate_limit(net, d1(), method="quadrature", particles=100 ** 3)
    assert np.array_equal(q.f_eval, again.f_eval)


def test_quadrature_refuses_a_rule_too_coarse_for_the_input_scale():
    """At input norm 4 a 100-node Gauss–Hermite rule misses tanh's unit-width feature
    (it sat 0.04 from Monte Carlo at norm 10 while reporting an error of 1e-4); the
    engine now refuses it before any work and says what would do."""
    net = tp.MLP(tp.mup(1), 2, 1, phi="tanh")
    big = tp.Routine(4 * D1["X"], D1["Y"], lr=0.05, eval_inputs=4 * D1["eval_inputs"])
    with pytest.raises(tp.SpecError, match="cannot resolve tanh.*monte_carlo"):
        tp.simulate_limit(net, big, method="quadrature", particles=100 ** 3)
    with pytest.raises(tp.SpecError, match="needs 40"):       # D1: σ·max|ξ| = √2
        tp.simulate_limit(net, d1(), method="quadrature", particles=30 ** 3)
    tp.simulate_limit(net, d1(), method="quadrature", particles=40 ** 3)
    relu = tp.MLP(tp.mup(1), 2, 1, phi="relu")      # a kink: no honest error, at any scale
    with pytest.raises(tp.SpecError, match="kink.*monte_carlo"):
        tp.simulate_limit(relu, big, method="quadrature", particles=40 ** 3)


def test_the_quadrature_error_estimate_bounds_the_error(tanh_quadrature):
    """At k = 34 nodes (data D1 at input scale 1/√2, so the rule resolves tanh) the
    two-rule difference of k and 3k/4 said 1.3e-5 while the rule was 3.2e-4 off; the
    three-rule estimate holds the error against the 100-node rule."""
    net, ref = tanh_quadrature
    small = tp.Routine(D1["X"] / 2 ** 0.5, D1["Y"], lr=0.5, eval_inputs=D1["eval_inputs"] / 2 ** 0.5)
    ref = tp.simulate_limit(net, small, method="quadrature", particles=100 ** 3)
    for k in (24, 34, 45):
        q = tp.simulate_limit(net, small, method="quadrature", particles=k ** 3)
        err = np.abs(q.f_eval - ref.f_eval) - ref.f_eval_se
        assert np.all(err <= q.f_eval_se), (k, err.max(), q.f_eval_se.max())
        assert "three rules" in q.meta["se_method"]


def test_tanh_monte_carlo_matches_quadrature(tanh_quadrature):
    net, q = tanh_quadrature
    mc = tp.simulate_limit(net, d1(), particles=100_000, replicates=16, seed=3)
    within_limit_se(mc, q)


def test_monte_carlo_error_falls_like_inverse_sqrt_N(tanh_quadrature):
    net, q = tanh_quadrature
    Ns = [2_000, 8_000, 32_000, 128_000]
    rms = []
    for N in Ns:
        errs = [tp.simulate_limit(net, d1(), particles=N, seed=s, record=(),
                                  replicates=1).f_eval[1:] - q.f_eval[1:] for s in range(12)]
        rms.append(np.sqrt(np.mean(np.square(errs))))
    slope = np.polyfit(np.log(Ns), np.log(rms), 1)[0]
    assert -0.65 < slope < -0.35, slope


def test_single_run_batch_means_have_the_right_size(tanh_quadrature):
    """A single run's batch-means standard error vs the spread of independent runs
    (replicates=1; it ignores the error carried by χ, so only its size is checked)."""
    net, q = tanh_quadrature
    runs = [tp.simulate_limit(net, d1(), particles=64_000, seed=s, record=(), replicates=1)
            for s in range(16)]
    assert runs[0].se_dof == runs[0].meta["se_dof"] >= 31
    spread = np.std([r.f_eval[1:] for r in runs], axis=0, ddof=1)
    reported = np.mean([r.f_eval_se[1:] for r in runs], axis=0)
    ratio = reported / spread
    # 16 runs: the sample sd has ~18 % relative error
    assert 0.5 < np.median(ratio) < 1.5, ratio


def test_numpy_kernel_agrees_and_a_rerun_is_bit_identical():
    """gelu (φ′ kept in the cache beside φ): the Numba kernel against the NumPy twin.
    Float32 storage is checked with tanh on both paths below; it is the same per-block
    cast for every φ, and another φ in float32 would only cost one more compilation."""
    net = tp.MLP(tp.mup(1), 2, 1, phi="gelu")
    a = tp.simulate_limit(net, d1(), particles=20_000, seed=4, replicates=1)
    b = tp.simulate_limit(net, d1(), particles=20_000, seed=4, replicates=1, kernel="numpy")
    assert np.allclose(a.f_eval, b.f_eval, rtol=1e-10, atol=1e-13)
    assert np.allclose(a.stats["dh_rms"], b.stats["dh_rms"], rtol=1e-10)
    again = tp.simulate_limit(net, d1(), particles=20_000, seed=4, replicates=1)
    assert np.array_equal(a.f_eval, again.f_eval)


def test_symmetry_orbit_has_one_limit():
    r = d1()
    a = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1), r, particles=10_000, seed=0)
    b = tp.simulate_limit(tp.MLP(tp.mfp(), 2, 1), r, particles=10_000, seed=0)
    assert np.array_equal(a.f_eval, b.f_eval)


def test_eval_every_marks_skipped_rows():
    r = tp.Routine(np.tile(D1["X"], (2, 1)), np.tile(D1["Y"], (2, 1)), lr=0.5,
                   eval_inputs=D1["eval_inputs"])
    tr = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1), r, particles=2_000, eval_every=4)
    assert tr.meta["eval_steps"] == [0, 4, 6]
    assert np.all(np.isnan(tr.f_eval[[1, 2, 3, 5]])) and np.all(np.isfinite(tr.f_eval[[0, 4, 6]]))


# ---- switches: zero readout, fixed readout -------------------------------------------
@pytest.mark.parametrize("param", [tp.ABC([0, 0], [0, "oo"], [-1, 1], name="zero readout"),
                                   tp.ABC([0, 0], [0, 1], [-1, 2], name="fixed readout")])
def test_switch_limits_match_wide_networks(param):
    net = tp.MLP(param, 2, 1, phi="tanh")
    k = param.classify()
    assert k.regime == "feature_learning"
    lim = tp.simulate_limit(net, d1(), method="quadrature", particles=60 ** 3)
    errs = []
    for n in (512, 8192):
        f = np.array([tp.train_finite(net, d1(), n, seed=s, record=()).f_eval for s in range(6)])
        errs.append(np.sqrt(np.mean((f - lim.f_eval) ** 2)))
    assert errs[1] < 0.5 * errs[0]           # n x16: expected x0.25
    if not k.limit_switches.readout_update:
        # q = 2 > 1: the readout's relative change falls like n^{p-q} = 1/n (x16 here)
        ratio = [tp.train_finite(net, d1(), n, seed=0, record=("stats",))
                 .stats["frobenius_ratio"][-1, -1] for n in (512, 8192)]
        assert ratio[1] < ratio[0] / 8


# ---- finite networks converge ------------------------------------------------------------
@pytest.mark.parametrize("phi, limit_kwargs", [
    ("tanh", dict(method="quadrature", particles=100 ** 3)),
    ("relu", dict(particles=4_000_000, replicates=4)),
])
def test_finite_networks_converge_at_rate_one_half(phi, limit_kwargs):
    net = tp.MLP(tp.mup(1), 2, 1, phi=phi)
    study = tp.convergence(net, d1(), [256, 512, 1024, 2048, 4096, 8192, 16384], seeds=16,
                           executor="serial", limit_kwargs=limit_kwargs)
    assert -0.6 <= study.exponent <= -0.4, (study.exponent, study.exponent_ci)
    assert study.limit_error < 0.1 * study.rms[-1]
    assert "exponent" in str(study.table())
    ax = study.plot().axes[0]
    assert ax.get_xlabel() == "width n" and ax.get_legend() is not None


# ---- bad input --------------------------------------------------------------------------
@pytest.mark.parametrize("net, kwargs, error, match", [
    (tp.MLP(tp.sp(1), 2, 1), {}, tp.UnstableParametrizationError, "q = 0 < 1"),
    (tp.MLP(tp.mup(1, optimizer="adam"), 2, 1, phi="id"), dict(method="exact"), tp.SpecError,
     "no closed form"),
    (tp.MLP(tp.mup(1), 2, 1), dict(particles=1), tp.SpecError, "particles"),
    (tp.MLP(tp.mup(1), 2, 1), dict(replicates=0), tp.SpecError, "replicates"),
    (tp.MLP(tp.mup(1), 2, 1), dict(method="exact"), tp.SpecError, "phi='id'"),
    (tp.MLP(tp.mup(1), 2, 1), dict(method="magic"), tp.SpecError, "method"),
    (tp.MLP(tp.mup(1), 3, 1), {}, tp.SpecError, "d_in = 3"),
    (tp.MLP(tp.mup(1), 2, 1), dict(particles=10 ** 13), tp.MemoryBudgetError, "at most"),
    (tp.MLP(tp.mup(1), 2, 1), dict(kernel="cuda"), tp.SpecError, "kernel"),
])
def test_bad_input_is_refused_before_work(net, kwargs, error, match):
    with pytest.raises(error, match=match):
        tp.simulate_limit(net, d1(), **kwargs)


def test_quadrature_dimension_limit():
    with pytest.raises(tp.SpecError, match="at most 3"):
        tp.simulate_limit(tp.MLP(tp.mup(1), 3, 2), tp.Routine(lr=0.5, **N2), method="quadrature")


def test_keyboard_interrupt_returns_partial(monkeypatch):
    original = NumbaSweep.__call__
    calls = {"n": 0}

    def flaky(self, args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return original(self, args)

    monkeypatch.setattr(NumbaSweep, "__call__", flaky)
    tr = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1), d1(), particles=1_000, replicates=1)
    assert tr.interrupted and tr.completed_steps == 1
    assert tr.f_eval.shape[0] == 2 and tr.loss.shape == (1,)


@pytest.mark.parametrize("d", [6, BLAS_MIN_D])
def test_float32_storage_on_both_paths(d):
    """float32 particles are cast to float64 per block, for the loop and the gemm paths."""
    rng = np.random.default_rng(5)
    r = tp.Routine(rng.standard_normal((4, d)) / np.sqrt(d), rng.standard_normal((4, 1)), lr=0.3,
                   batch_size=2, eval_inputs=rng.standard_normal((2, d)) / np.sqrt(d))
    net = tp.MLP(tp.mup(1), d, 1, phi="tanh")
    a = tp.simulate_limit(net, r, particles=20_000, seed=1, replicates=1)
    b = tp.simulate_limit(net, r, particles=20_000, seed=1, replicates=1, dtype=np.float32)
    c = tp.simulate_limit(net, r, particles=20_000, seed=1, replicates=1, kernel="numpy")
    assert np.max(np.abs(a.f_eval - b.f_eval)) < 1e-5
    assert np.allclose(a.f_eval, c.f_eval, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("param, L, kwargs", [
    (tp.mup(1), 1, {}), (tp.mup(1), 1, dict(method="monte_carlo", particles=2_000)),
    (tp.mup(2), 2, {}), (tp.ntp(2), 2, dict(f0="zero"))])
def test_divergence_is_reported_not_silent(param, L, kwargs):
    """A far too large learning rate blows the limit up: an error names the step."""
    r = tp.Routine(np.tile(D1["X"], (60, 1)), np.tile(D1["Y"], (60, 1)) * 100, lr=5.0,
                   eval_inputs=D1["eval_inputs"])
    net = tp.MLP(param, 2, 1, phi="id")
    with pytest.raises(tp.DivergenceError, match="step"):
        tp.simulate_limit(net, r, record=(), **kwargs)
    tr = tp.simulate_limit(net, r, record=(), on_divergence="stop", **kwargs)
    assert tr.divergence.step >= 1 and tr.steps == tr.completed_steps < 180
    assert np.all(np.isfinite(tr.f_eval)) and np.all(np.isfinite(tr.loss))


def test_qmc_particles_agree_with_monte_carlo_and_quadrature_with_smaller_error():
    """Randomized QMC (the default with replicates) estimates the same limit: within the
    combined standard error of antithetic Monte Carlo and of a fine quadrature rule, with
    an error bar (over independent scramblings) several times smaller at equal N."""
    net = tp.MLP(tp.mup(1), 2, 1, phi="tanh")
    qmc = tp.simulate_limit(net, d1(), particles=16_384, replicates=8, seed=5)
    mc = tp.simulate_limit(net, d1(), particles=16_384, replicates=8, seed=5,
                           sampler="antithetic")
    quad = tp.simulate_limit(net, d1(), method="quadrature", particles=120 ** 3)
    assert qmc.meta["sampler"] == "qmc" and mc.meta["sampler"] == "antithetic"
    assert qmc.meta["particles"] == 16_384 and qmc.se_dof == 7
    assert np.max(np.abs(qmc.f_eval[0])) < 1e-15            # Sobol' points in ± pairs
    agree(qmc, mc)
    within_se(qmc.f_eval[1:], quad.f_eval[1:], np.hypot(qmc.f_eval_se[1:], quad.f_eval_se[1:]),
              qmc.se_dof)
    assert np.max(qmc.f_eval_se[1:]) < np.max(mc.f_eval_se[1:]) / 4


def test_sampler_choices_are_checked_before_work():
    net = tp.MLP(tp.mup(1), 2, 1, phi="tanh")
    with pytest.raises(tp.SpecError, match="replicates >= 2"):
        tp.simulate_limit(net, d1(), sampler="qmc", replicates=1)
    with pytest.raises(tp.SpecError, match="Gauss–Hermite"):
        tp.simulate_limit(net, d1(), method="quadrature", sampler="qmc")
    with pytest.raises(tp.SpecError, match="draws none"):       # the exact linear engine
        tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1, phi="id"), d1(), sampler="qmc")
    with pytest.raises(tp.SpecError, match="sampler"):
        tp.simulate_limit(net, d1(), sampler="sobol")
    one = tp.simulate_limit(net, d1(), particles=3000, replicates=1)
    assert one.meta["sampler"] == "antithetic" and one.meta["particles"] == 3000
    assert tp.simulate_limit(net, d1(), particles=3000, replicates=2).meta["particles"] == 4096


#: the optimizers of the cache test (the fused sweep is compiled per φ and optimizer rule:
#: the stateful rules run with tanh only, as in test_limit_one_hidden_sweep.py)
CACHE_OPTIMIZERS = {"sgd": tp.SGD(), "momentum": tp.SGD(momentum=0.5),
                    "adam": tp.Adam(weight_decay=0.1)}


@pytest.mark.parametrize("kernel, opt, phi, d", [
    ("numba", "momentum", "tanh", 3), ("numba", "adam", "tanh", 3),
    ("numpy", "momentum", "tanh", 3), ("numba", "sgd", "gelu", 2), ("numpy", "sgd", "gelu", 2),
    ("numba", "sgd", "relu", CACHE_MIN_D)])
def test_phi_cache_between_sweeps_changes_nothing(kernel, opt, phi, d, monkeypatch):
    """Where it pays, each sweep keeps φ (tanh, relu: φ alone) or φ and φ′ (gelu) of the
    next batch for the next update; a run with it equals the run without it to
    rounding."""
    rng = np.random.default_rng(8)
    X, Y = rng.standard_normal((10, d)) / np.sqrt(d), rng.standard_normal((10, 2))
    adam = opt == "adam"
    net = tp.MLP(tp.mup(1, optimizer="adam") if adam else tp.mup(1), d, 2, phi=phi)
    r = tp.Routine(X, Y, lr=0.05 if adam else 0.5, batch_size=2, steps=5,
                   optimizer=CACHE_OPTIMIZERS[opt], eval_inputs=X[:3])
    kw = dict(particles=3000, replicates=1, seed=2, kernel=kernel)
    on = tp.simulate_limit(net, r, **kw)
    monkeypatch.setattr(one_hidden, "cache_pays", lambda phi, d: False)
    off = tp.simulate_limit(net, r, **kw)
    assert on.meta["phi_cache"] and not off.meta["phi_cache"]
    np.testing.assert_allclose(on.f_eval, off.f_eval, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(on.stats["dh_rms"], off.stats["dh_rms"], rtol=1e-11, atol=1e-13)
    assert not np.allclose(on.f_eval[-1], on.f_eval[0])


@pytest.mark.parametrize("phi, d, cached", [("tanh", 1, True), ("tanh", 2, True),
                                            ("gelu", 1, True), ("relu", 2, False),
                                            ("relu", 8, True), ("id", 4, False)])
def test_phi_cache_where_it_pays(phi, d, cached):
    """The cache is kept for every φ that costs an evaluation, and for the piecewise-linear
    φ (id, relu) only from CACHE_MIN_D on; tanh keeps φ alone (one plane)."""
    assert cache_pays(phi, d) is cached
    assert cache_pays("relu", CACHE_MIN_D) and not cache_pays("relu", CACHE_MIN_D - 1)
    assert cache_planes("tanh") == 1 and cache_planes("gelu") == 2
    net = tp.MLP(tp.mup(1), d, 1, phi=phi)
    r = tp.Routine(np.ones((4, d)) / d, np.ones((4, 1)), lr=0.1, batch_size=2, steps=2)
    tr = tp.simulate_limit(net, r, particles=1000, replicates=1, method="monte_carlo")
    assert tr.meta["phi_cache"] is cached


def test_record_nothing_allocates_no_coordinate_moments():
    """record=() keeps no (T+1)·E·E feature kernel in the one-hidden engine (it used to be
    allocated, and filled with NaN, whatever was recorded)."""
    from tp_limits.limit.fused import engine as one_hidden_engine
    made = []
    real = one_hidden_engine.LimitResult.empty

    def spy(*args, **kwargs):
        res = real(*args, **kwargs)
        made.append(res.moments)
        return res
    import pytest as _pytest
    with _pytest.MonkeyPatch.context() as mp:
        mp.setattr(one_hidden_engine.LimitResult, "empty", staticmethod(spy))
        tr = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1), d1(), particles=2000, replicates=1,
                               record=())
    assert made and all(m is None for m in made) and not tr.stats


def test_the_one_hidden_estimate_prices_the_sweep_and_refuses_before_any_work(monkeypatch):
    """limit/fused/cost.py: the multiply-adds grow with (2B + E)(d + d_out), a piecewise
    linear φ costs no evaluations, Adam's two state arrays are priced; a run beyond
    time_budget is refused before a particle is drawn, and the estimate is in meta."""
    from tp_limits.limit.fused import cost
    from tp_limits.spec import Problem
    X = np.random.default_rng(0).standard_normal((400, 3))
    r = tp.Routine(X, X[:, :1], lr=0.1, batch_size=4)

    def units(phi, routine=r, optimizer="sgd"):
        net = tp.MLP(tp.mup(1, optimizer=optimizer), 3, 1, phi=phi)
        return dict(zip(cost.NAMES, cost.cost_units(Problem(net, routine), 1000, False)))
    tanh, relu = units("tanh"), units("relu")
    T, B, E = r.steps, 4, len(r.eval_inputs)
    assert tanh["mac"] == 1000 * T * (2 * B + E) * 4 and relu["phi"] == 0 < tanh["phi"]
    adam = units("tanh", tp.Routine(X, X[:, :1], lr=0.1, batch_size=4, optimizer=tp.Adam()),
                 "adam")
    assert adam["state"] == 2 * adam["pass"] and tanh["state"] == 0

    net = tp.MLP(tp.mup(1), 3, 1)

    def no_particles(*a, **k):
        raise AssertionError("a refused run drew its particles")
    monkeypatch.setattr("tp_limits.limit.fused.engine.random_particles", no_particles)
    with pytest.raises(tp.SpecError, match="one-hidden-layer Monte Carlo run .* estimated at"):
        tp.simulate_limit(net, r, particles=2 ** 20, replicates=8, time_budget=1.0, record=())
    monkeypatch.undo()
    tr = tp.simulate_limit(net, tp.Routine(X[:8], X[:8, :1], lr=0.1, batch_size=4),
                           particles=2 ** 12, replicates=2)
    assert 0 < tr.meta["time_estimate_s"] < 1
