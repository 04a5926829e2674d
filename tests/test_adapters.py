"""Low-rank adapters: the exponents (LoRA+'s propositions), the toy network's step against
a plain matrix twin, and its limit (docs/theory.md §16)."""
import math
from fractions import Fraction

import numpy as np
import pytest

from tp_limits.adapters import best_shared_rate, classify_adapter, maximal_rates
from tp_limits.adapters.engine import _one, fine_tune
from tp_limits.adapters.sweep import RateSweep, rate_sweep
from tp_limits.adapters.toy import LoRAToy, input_kernel, sine_task
from tp_limits.errors import SpecError
from conftest import interrupt_on_call


# -- exponents ------------------------------------------------------------------------------
def test_sgd_with_one_rate_on_lora_plus_linear_model_vanishes_like_root_n():
    """LoRA+'s Proposition 1: f = (W* + b aᵀ) x (the adapter is the readout), SGD with one
    rate: never efficient, and at the best stable rate f moves like n^(−1/2)."""
    for c in (Fraction(k, 2) for k in range(-4, 5)):
        assert not classify_adapter("sgd", c, c, "readout", "zero_B").efficient
    best = best_shared_rate("sgd", "readout", "zero_B")
    assert best.c_A == Fraction(1, 2) and best.feature_exponent == Fraction(-1, 2)
    assert "vanishes like n^(-1/2)" in best.verdict()


def test_sgd_with_split_rates_on_lora_plus_linear_model_is_efficient():
    """LoRA+'s Proposition 2: η_a = Θ(1/n), η_b = Θ(1)."""
    cls = maximal_rates("sgd", "readout", "zero_B")
    assert (cls.c_A, cls.c_B) == (1, 0) and cls.efficient
    assert classify_adapter("sgd", 1, 0, "readout").efficient


def test_adam_needs_the_ratio_n():
    """LoRA+'s Theorem 1: with Adam one rate is never efficient, η_A = Θ(1/n), η_B = Θ(1)
    is, so η_B/η_A = Θ(n); the best shared rate leaves the feature update at n^(−1)."""
    for init in ("zero_B", "zero_A"):
        cls = maximal_rates("adam", "hidden", init)
        assert (cls.c_A, cls.c_B, cls.ratio_exponent) == (1, 0, 1) and cls.efficient
    for c in (Fraction(k, 2) for k in range(-4, 5)):
        assert not classify_adapter("adam", c, c).efficient
    shared = best_shared_rate("adam")
    assert shared.c_A == 1 and shared.feature_exponent == -1
    assert classify_adapter("adam", 0, 0).reasons()[0].startswith("Z_A = A Z blows up")


def test_a_readout_of_root_n_halves_the_ratio_exponent():
    """W_out ~ N(0, 1/n) (LoRA+'s experiment) amplifies Θ(1) feature updates to n^(1/2):
    the largest stable rates are (1, ½), the ratio n^(1/2), the features vanish."""
    cls = maximal_rates("adam", "hidden", "zero_B", "1/2")
    assert (cls.c_A, cls.c_B) == (1, Fraction(1, 2))
    assert cls.ratio_exponent == Fraction(1, 2) and not cls.efficient
    assert cls.feature_exponent == Fraction(-1, 2)


def test_sgd_in_a_mup_hidden_layer_needs_the_ratio_n_squared():
    cls = maximal_rates("sgd", "hidden", "zero_B")
    assert (cls.c_A, cls.c_B, cls.ratio_exponent) == (1, -1, 2) and cls.efficient


def test_iteration_runs_to_the_fixed_point_or_finds_the_growth():
    """zero_A under SGD: with (1, −1) the sizes settle with the feature update at n^(−1/2)
    (the saddle); with (3/2, −2) they grow by n^(1/2) every other step without end, which
    only iterating past the first steps reveals."""
    settled = classify_adapter("sgd", 1, -1, "hidden", "zero_A")
    assert settled.stable and settled.feature_exponent == Fraction(-1, 2)
    last, before = settled.steps[-1], settled.steps[-2]
    assert (last.B, last.ZA, last.dZB) == (before.B, before.ZA, before.dZB)
    growing = classify_adapter("sgd", "3/2", -2, "hidden", "zero_A")
    assert growing.steps[3].ZB <= 0 and not growing.stable
    assert "blows up" in growing.reasons()[0]


def test_bad_classifier_input_names_the_argument():
    with pytest.raises(SpecError, match="position"):
        classify_adapter(position="middle")
    with pytest.raises(SpecError, match="c_A"):
        classify_adapter(c_A="fast")


# -- the toy network's step -----------------------------------------------------------------
def _loss(toy, task, h, w_out, A0, B):
    """½ mean (f − y)² over the training inputs of f = W_out φ((α/r) B A φ(W_in ξ)),
    written as the matrices of the network."""
    phi = np.tanh if toy.phi == "tanh" else (lambda x: np.maximum(x, 0.0))
    f = w_out @ phi(toy.scale * B @ (A0 @ h[:, task.train]))
    return 0.5 * np.mean((f - task.y[task.train]) ** 2)


def _network(toy, task, n, seed=1):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, toy.d)) / math.sqrt(toy.d)
    h = np.tanh(w @ task.x.T) if toy.phi == "tanh" else np.maximum(w @ task.x.T, 0)
    omega = rng.standard_normal(n)
    A0 = rng.standard_normal((toy.rank, n)) / math.sqrt(n)
    B0 = rng.standard_normal((n, toy.rank))
    return h, omega, A0, B0


@pytest.mark.parametrize("readout", ["mup", "sp"])
def test_one_sgd_step_is_the_matrix_gradient(readout):
    """_one's SGD step equals A − η_A ∂L/∂A, B − η_B ∂L/∂B by central differences of the
    network written as matrices."""
    toy = LoRAToy(rank=2, optimizer="sgd", init="gaussian", readout=readout)
    task = sine_task(n_train=6, n_test=3, seed=2)
    n = 12
    h, omega, A0, B0 = _network(toy, task, n)
    w_out = omega * n ** -float(toy.p)
    lr_A, lr_B = 1e-3, 2e-3
    tr, te, *_ = _one(toy, task, h, omega, B0, A0 @ h, n, lr_A, lr_B, 1, lambda t: None)
    gA, gB = np.zeros_like(A0), np.zeros_like(B0)
    e = 1e-6
    for idx in np.ndindex(A0.shape):
        d = np.zeros_like(A0)
        d[idx] = e
        gA[idx] = (_loss(toy, task, h, w_out, A0 + d, B0)
                   - _loss(toy, task, h, w_out, A0 - d, B0)) / (2 * e)
    for idx in np.ndindex(B0.shape):
        d = np.zeros_like(B0)
        d[idx] = e
        gB[idx] = (_loss(toy, task, h, w_out, A0, B0 + d)
                   - _loss(toy, task, h, w_out, A0, B0 - d)) / (2 * e)
    assert tr[0] == pytest.approx(_loss(toy, task, h, w_out, A0, B0), rel=1e-12)
    after = _loss(toy, task, h, w_out, A0 - lr_A * gA, B0 - lr_B * gB)
    assert tr[1] == pytest.approx(after, rel=1e-8)


def test_adam_steps_match_a_plain_adam():
    """Three Adam steps of _one against Adam written out on the matrices, with ε scaled to
    each factor's gradient size (n^{1−p} for A, n^{−p} for B)."""
    toy = LoRAToy(rank=2, init="gaussian", eps=1e-3)
    task = sine_task(n_train=5, n_test=2, seed=3)
    n = 10
    h, omega, A0, B0 = _network(toy, task, n, seed=4)
    w_out = omega / n
    lr_A, lr_B = 0.05, 0.02
    tr, *_ = _one(toy, task, h, omega, B0, A0 @ h, n, lr_A, lr_B, 3, lambda t: None)
    A, B = A0.copy(), B0.copy()
    state = {k: np.zeros_like(x) for k, x in (("mA", A), ("vA", A), ("mB", B), ("vB", B))}
    b1, b2 = toy.betas
    eps_A, eps_B = toy.eps, toy.eps / n
    losses = [_loss(toy, task, h, w_out, A, B)]
    for t in range(1, 4):
        X, y = h[:, task.train], task.y[task.train]
        za = A @ X
        v = B @ za
        chi = (w_out @ np.tanh(v) - y) / len(y)
        dv = w_out[:, None] * (1 - np.tanh(v) ** 2) * chi[None, :]
        gB, gA = dv @ za.T, (B.T @ dv) @ X.T
        for g, w, m, s, eps, lr in ((gA, A, "mA", "vA", eps_A, lr_A),
                                    (gB, B, "mB", "vB", eps_B, lr_B)):
            state[m] = b1 * state[m] + (1 - b1) * g
            state[s] = b2 * state[s] + (1 - b2) * g * g
            w -= lr * (state[m] / (1 - b1 ** t)) / (np.sqrt(state[s] / (1 - b2 ** t)) + eps)
        losses.append(_loss(toy, task, h, w_out, A, B))
    np.testing.assert_allclose(tr, losses, rtol=1e-12)


def test_input_kernel_quadrature_matches_the_pair_moments():
    from tp_limits.limit.kernel.pair_moments import moments
    toy = LoRAToy()
    x = sine_task(n_train=5, n_test=3, seed=5).x
    K = input_kernel(toy, x)
    g = x @ x.T / toy.d
    d = np.diag(g)
    V = moments("tanh")(np.repeat(d, len(d)), np.tile(d, len(d)), g.ravel())[0]
    np.testing.assert_allclose(K, V.reshape(g.shape), atol=1e-6)


def test_relu_kernel_is_the_monte_carlo_covariance_of_the_features():
    """The closed form against 2·10⁵ features, within 5 standard errors per entry."""
    toy = LoRAToy(phi="relu", init="gaussian")
    x = sine_task(n_train=3, n_test=1, seed=6).x
    K = input_kernel(toy, x)
    w = np.random.default_rng(7).standard_normal((200_000, toy.d)) / math.sqrt(toy.d)
    h = np.maximum(w @ x.T, 0)
    prod = h[:, :, None] * h[:, None, :]
    se = prod.std(axis=0, ddof=1) / math.sqrt(len(h))
    assert np.all(np.abs(prod.mean(axis=0) - K) < 5 * se)


# -- the limit --------------------------------------------------------------------------------
RATES = (4.0, 0.05)        # (η̄_A, η̄_B), Adam


def conditional_slope(net, task, rates, steps, limit_args, widths=(64, 256, 1024),
                      networks=3) -> tuple:
    """(slope, gaps): the rms distance of ``networks`` networks' final test outputs from
    the conditional limit given each one's own Z_A⁰ (``limit_args(k)``: the limit's
    particles or pretrained base for network k), fitted against log n."""
    gaps = []
    for n in widths:
        run = fine_tune(net, task, n, *net.rates(n, *rates), steps=steps, seeds=networks)
        d = [np.mean((fine_tune(net, task, math.inf, *rates, steps=steps, seeds=1,
                                z_a0=run.z_a0[k], **limit_args(k)).f_test[0]
                      - run.f_test[k]) ** 2) for k in range(networks)]
        gaps.append(math.sqrt(np.mean(d)))
    return np.polyfit(np.log(widths), np.log(gaps), 1)[0], gaps


def widest_mean_gap(net, task, width, rates, steps, seeds, particles) -> tuple:
    """(|gap|, combined SE, limit's dof): the seeds' mean final test loss at ``width``
    against the limit's mean over ``seeds`` replicates."""
    lim = fine_tune(net, task, math.inf, *rates, steps=steps, seeds=seeds,
                    particles=particles)
    m, se, dof = lim.mean_se()
    wide = fine_tune(net, task, width, *net.rates(width, *rates), steps=steps, seeds=seeds)
    mw, sw, _ = wide.mean_se()
    return abs(mw - m), math.hypot(se, sw), dof


def test_networks_approach_their_conditional_limit_like_root_n():
    """A network's own Z_A⁰ fed to the limit: the rms gap of the test outputs falls like
    n^(−1/2) (slope within ±0.2 over n = 64 … 1024, 3 networks per width)."""
    slope, gaps = conditional_slope(
        LoRAToy(), sine_task(n_train=32, n_test=32, seed=8), RATES, 20,
        lambda k: {"seed": 50 + k, "particles": 32768})
    assert -0.7 < slope < -0.3, (gaps, slope)


def test_widest_network_mean_agrees_with_the_limit_mean():
    """Seeds' mean final test loss at n = 2048 within 5 combined standard errors of the
    limit's mean over Z_A⁰ (15 dof each)."""
    gap, se, dof = widest_mean_gap(LoRAToy(), sine_task(n_train=32, n_test=32, seed=9), 2048,
                                   RATES, 20, 16, 8192)
    assert dof == 15
    assert gap < 5 * se


def test_the_limit_refuses_what_it_does_not_simulate():
    task = sine_task(n_train=4, n_test=4)
    with pytest.raises(SpecError, match="readout = 'sp'"):
        fine_tune(LoRAToy(readout="sp"), task, math.inf, 1.0, 1.0, steps=1)
    with pytest.raises(SpecError, match="z_a0 has shape"):
        fine_tune(LoRAToy(), task, math.inf, 1.0, 1.0, steps=1, z_a0=np.zeros((2, 2)))
    with pytest.raises(SpecError, match="sine_task"):
        fine_tune(LoRAToy(d=3), task, 16, 1.0, 1.0, steps=1)
    with pytest.raises(SpecError, match="saddle"):
        LoRAToy(phi="relu")
    with pytest.raises(SpecError, match="eta_B"):
        fine_tune(LoRAToy(), task, 16, 1.0, -1.0, steps=1)


def test_a_divergence_names_its_step_and_quantity():
    task = sine_task(n_train=8, n_test=8)
    run = fine_tune(LoRAToy(phi="id", optimizer="sgd"), task, 32, 1e3, 1e5, steps=60,
                    seeds=2)
    assert np.all(run.diverged > 0)
    assert all(w.startswith(f"step {t}:") for w, t in zip(run.divergence, run.diverged))
    assert np.all(np.isinf(run.final()))
    t = run.diverged[0]
    assert np.all(np.isfinite(run.train_loss[0, :t]))


# -- the sweep ---------------------------------------------------------------------------------
def test_rate_sweep_finds_the_grid_minimum_and_saves(tmp_path):
    toy = LoRAToy()
    task = sine_task(n_train=16, n_test=16, seed=10)
    sw = rate_sweep(toy, task, (16, 64), (1.0, 4.0, 16.0), (0.01, 0.05, 0.25), steps=10,
                    seeds=2, particles=1024, progress=False)
    assert sw.widths == (16, 64, math.inf)
    for k in range(3):
        i, j = sw.best_index(k)
        assert sw.mean(k)[i, j] == np.min(sw.mean(k))
    assert len(sw.table().rows) == 3
    slope, se, dof = sw.ratio_exponent()
    assert dof == 0 and math.isfinite(slope)
    for k in range(3):                                   # the row η̄_A = 4: its best η̄_B
        i, j = sw.best_index(k, at_eta_A=4.0)
        assert i == 1 and sw.mean(k)[1, j] == np.min(sw.mean(k)[1])
        assert sw.optimum(k, at_eta_A=4.0)[0] == (4.0, 0.0, 0)
    ratio = sw.ratio(0, at_eta_A=4.0)
    assert ratio == pytest.approx(sw.optimum(0, 4.0)[1][0] / (4.0 / 16))   # (1, 0) at n = 16
    with pytest.raises(ValueError, match="not on the grid"):
        sw.ratio(0, at_eta_A=3.0)
    rescored = sw.with_metric("train_mean")
    np.testing.assert_array_equal(rescored.costs[1], np.mean(sw.curves[1][0], axis=-1))
    assert rescored.metric == "train_mean" and sw.metric == "test"
    path = tmp_path / "sweep.npz"
    sw.save(path)
    back = RateSweep.load(path)
    assert back.widths == sw.widths
    np.testing.assert_array_equal(back.costs[2], sw.costs[2])


# -- the coordinate check ---------------------------------------------------------------------
@pytest.mark.parametrize("readout, c, init", [
    ("mup", (None, None), "zero_B"),     # LoRA+'s Theorem 1: every update Θ(1)
    ("mup", (1, 1), "zero_B"),           # one rate: the feature update n^(−1)
    ("sp", (None, None), "zero_B"),      # readout n^(−1/2): (1, ½), features n^(−1/2)
    ("mup", (None, None), "zero_A"),
])
def test_adapter_coord_check_measures_the_classifier_exponents(readout, c, init):
    """Adam, widths 128 … 2048, 4 seeds, three steps: every nonzero quantity's measured
    slope within 0.08 of the classifier's exponent at every step ≥ 2."""
    from tp_limits.adapters.coord_check import adapter_coord_check
    toy = LoRAToy(readout=readout, init=init)
    task = sine_task(n_train=32, n_test=32, seed=11)
    cc = adapter_coord_check(toy, task, (128, 256, 512, 1024, 2048), 4.0, 0.05, *c, steps=3)
    for t in (2, 3):
        errors = cc.errors(t)
        assert len(errors) >= 4
        assert max(abs(e) for e in errors.values()) < 0.08, (t, errors)


# -- the exact limit (φ = id, SGD) ------------------------------------------------------------
def test_exact_limit_equals_monte_carlo_given_z_a0():
    """Given one Z_A⁰, 8 independent particle sets (16384 each) of the Monte Carlo limit:
    their mean train loss at steps 1, 5 and 20 within 5 standard errors (7 dof) of the
    closed-form recursion."""
    from tp_limits.adapters.exact import exact_limit
    toy = LoRAToy(phi="id", optimizer="sgd")
    task = sine_task(n_train=16, n_test=16, seed=3)
    ex = exact_limit(toy, task, 1.0, 1.0, steps=20, seeds=1)
    mc = fine_tune(toy, task, math.inf, 1.0, 1.0, steps=20, seeds=8, particles=16384,
                   z_a0=ex.z_a0[0])
    for t in (1, 5, 20):
        x = mc.train_loss[:, t]
        se = x.std(ddof=1) / math.sqrt(len(x))
        assert abs(x.mean() - ex.train_loss[0, t]) < 5 * se, (t, x.mean(), ex.train_loss[0, t])
    assert ex.train_loss[0, 20] < 0.2 * ex.train_loss[0, 0]


def test_exact_limit_refuses_other_networks_and_zero_a_is_a_saddle():
    from tp_limits.adapters.exact import exact_limit
    task = sine_task(n_train=8, n_test=8)
    with pytest.raises(SpecError, match="phi = 'id'"):
        exact_limit(LoRAToy(), task, 1.0, 1.0)
    run = exact_limit(LoRAToy(phi="id", optimizer="sgd", init="zero_A"), task, 1.0, 1.0,
                      steps=5, seeds=1)
    assert np.all(run.train_loss[0] == run.train_loss[0, 0])


def test_lora_plus_experiment_configuration_converges_to_the_limit_mean():
    """relu with both factors Gaussian (LoRA+'s experiment) under Adam: the first step turns
    an O(n^(−1/2)) A-gradient into Θ(1) signs, a random input the limit's replicates average
    over with its Gaussian law (docs/theory.md §16.4).  24 networks at n = 1024 within 5
    combined standard errors of 24 replicates; n = 32 more than 3 away."""
    toy = LoRAToy(phi="relu", init="gaussian")
    task = sine_task(n_train=32, n_test=32, seed=9)
    lim = fine_tune(toy, task, math.inf, *RATES, steps=20, seeds=24, particles=8192)
    m, se, _ = lim.mean_se()
    gaps = {}
    for n in (32, 1024):
        mw, sw, dof = fine_tune(toy, task, n, *toy.rates(n, *RATES), steps=20,
                                seeds=24).mean_se()
        assert dof == 23
        gaps[n] = abs(mw - m) / math.hypot(se, sw)
    assert gaps[1024] < 5 and gaps[32] > 3, gaps


def test_a_run_beyond_the_memory_is_refused_before_work():
    from tp_limits.errors import MemoryBudgetError
    task = sine_task(n_train=64, n_test=64)
    with pytest.raises(MemoryBudgetError, match="fine-tuning at 1000000000000 particles on "
                                                "128 inputs need about .* particles fit"):
        fine_tune(LoRAToy(), task, math.inf, 1.0, 1.0, steps=1, particles=10**12)


# -- interruptions ----------------------------------------------------------------------------
def test_ctrl_c_keeps_the_finished_seeds(monkeypatch):
    import tp_limits.adapters.engine as ft
    interrupt_on_call(monkeypatch, ft, "_one", 3)
    task = sine_task(n_train=8, n_test=8)
    with pytest.warns(UserWarning, match="interrupted: 2 of 5 seeds finished"):
        run = fine_tune(LoRAToy(), task, 16, 0.1, 0.1, steps=3, seeds=5)
    assert run.interrupted and run.seeds == 2 and np.all(np.isfinite(run.final()))
    monkeypatch.setattr(ft, "_one", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        fine_tune(LoRAToy(), task, 16, 0.1, 0.1, steps=3, seeds=5)


def test_ctrl_c_keeps_the_finished_widths_of_a_sweep(monkeypatch):
    import tp_limits.adapters.sweep as sw
    real, calls = sw.fine_tune, []

    def run(toy, task, n, *args, **kw):
        calls.append(n)
        if n == 64:
            raise KeyboardInterrupt
        return real(toy, task, n, *args, **kw)

    monkeypatch.setattr(sw, "fine_tune", run)
    task = sine_task(n_train=8, n_test=8)
    with pytest.warns(UserWarning, match="holds the 1 widths that had finished of 3"):
        out = sw.rate_sweep(LoRAToy(), task, (16, 64), (1.0, 2.0), (0.1, 0.2), steps=2,
                            seeds=2, progress=False)
    assert out.interrupted and out.widths == (16,) and out.costs[0].shape == (2, 2, 2)


@pytest.mark.parametrize("kwargs, name", [
    (dict(betas=(0.9,)), "betas"), (dict(rank=0), "rank"), (dict(phi="cos"), "nonlinearity"),
    (dict(readout="ntk"), "readout"), (dict(eps=-1), "eps"), (dict(sigma_A=0), "sigma_A"),
    (dict(init="zeros"), "init"), (dict(optimizer="lion"), "optimizer"),
])
def test_bad_toy_arguments_are_named(kwargs, name):
    with pytest.raises(SpecError, match=name):
        LoRAToy(**kwargs)


# -- a pretrained network, fine-tuned through an adapter on W^L -------------------------------
def _pretrained(d=5, steps=10, lr=0.5, L=2, **adapter):
    """A μP tanh MLP (L = 2) pretrained on y = sin(2 ξ₁), batches of 8, with an adapter."""
    import tp_limits as tp
    from tp_limits.adapters import PretrainedLoRA
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8 * steps, d))
    r = tp.Routine(X, np.sin(2 * X[:, 0]), lr=lr, batch_size=8, eval_inputs=X[:8])
    return PretrainedLoRA(net=tp.MLP(tp.mup(L), d, 1, phi="tanh"), routine=r, **adapter)


@pytest.mark.parametrize("layer", ["hidden", "readout"])
def test_a_pretrained_network_fine_tuned_through_its_adapter_is_the_matrix_network(layer):
    """The coordinates pretrain() reads off a trained network, stepped by _one, equal the
    network written as matrices — f = α W³ tanh((W² + s B A) tanh(W¹ ξ)), or
    α (W³ + s B A) tanh(W² tanh(W¹ ξ)) on the readout: its loss, and its loss after one SGD
    step on A and B by central differences."""
    import tp_limits as tp
    from tp_limits.adapters import pretrain
    pre = _pretrained(steps=3, rank=2, optimizer="sgd", init="gaussian", alpha=3.0,
                      layer=layer)
    task = sine_task(n_train=6, n_test=3, seed=2)
    n = 12
    W = tp.train_finite(pre.net, pre.routine, n, seed=7, keep_weights=True,
                        record=()).weights.final
    base = pretrain(pre, task.x, n, seed=7)
    rng = np.random.default_rng(1)
    A0 = rng.standard_normal((2, n)) / math.sqrt(n)
    B0 = rng.standard_normal((n if layer == "hidden" else 1, 2))
    x, y = task.x[task.train], task.y[task.train]
    alpha = pre.net.output_multiplier

    def loss(A, B):
        if layer == "hidden":
            f = W[2] @ np.tanh((W[1] + pre.scale * B @ A) @ np.tanh(W[0] @ x.T))
        else:
            f = (W[2] + pre.scale * B @ A) @ np.tanh(W[1] @ np.tanh(W[0] @ x.T))
        return 0.5 * np.mean((alpha * f[0] - y) ** 2)

    lr_A, lr_B = 1e-2, 2e-2
    tr, *_ = _one(pre, task, base.features, base.omega, B0, A0 @ base.features, n, lr_A,
                  lr_B, 1, lambda t: None, pre=base.pre)
    e = 1e-6
    grads = []
    for P in (A0, B0):
        g = np.zeros_like(P)
        for idx in np.ndindex(P.shape):
            d = np.zeros_like(P)
            d[idx] = e
            g[idx] = ((loss(A0 + d, B0) - loss(A0 - d, B0)) if P is A0 else
                      (loss(A0, B0 + d) - loss(A0, B0 - d))) / (2 * e)
        grads.append(g)
    assert tr[0] == pytest.approx(loss(A0, B0), rel=1e-12)
    assert tr[1] == pytest.approx(loss(A0 - lr_A * grads[0], B0 - lr_B * grads[1]), rel=1e-8)


def test_a_pretrained_base_outputs_the_pretrained_network():
    """A width-n base's mean(ω φ(pre)) is train_finite's output (1e-12); four limit bases
    (own particles each, 3 dof) agree with simulate_limit (8 replicates) within 5 combined
    standard errors on every input."""
    import tp_limits as tp
    from tp_limits.adapters import pretrain
    pre = _pretrained(steps=6)
    x = sine_task(n_train=4, n_test=4, seed=5).x
    phi = pre.net.nonlinearity
    r = pre.routine
    ev = tp.Routine(r.X, r.Y, lr=r.lr, batch_size=8, eval_inputs=x)
    fin = tp.train_finite(pre.net, ev, 64, seed=3, record=())
    np.testing.assert_allclose(pretrain(pre, x, 64, seed=3).output(phi), fin.f_eval[-1, :, 0],
                               rtol=1e-12, atol=1e-14)
    outs = np.array([pretrain(pre, x, math.inf, seed=s, particles=8192).output(phi)
                     for s in range(4)])
    lim = tp.simulate_limit(pre.net, ev, particles=8192, replicates=8, record=())
    se = np.hypot(outs.std(axis=0, ddof=1) / 2, lim.f_eval_se[-1, :, 0])
    assert np.all(np.abs(outs.mean(axis=0) - lim.f_eval[-1, :, 0]) < 5 * se)


PRE_RATES = (4.0, 0.05)      # (η̄_A, η̄_B), Adam


def test_pretrained_networks_approach_their_conditional_limit_like_root_n():
    """Pretrained networks' own Z_A⁰ fed to the limit of the pretrained particles (one
    set for every network): the rms gap of the fine-tuned test outputs falls like n^(−1/2)
    (slope within ±0.2 over n = 64 … 1024, 3 networks per width)."""
    from tp_limits.adapters import pretrain
    pre = _pretrained()
    task = sine_task(n_train=16, n_test=16, seed=3)
    base = pretrain(pre, task.x, math.inf, seed=5, particles=32768)
    slope, gaps = conditional_slope(pre, task, PRE_RATES, 15, lambda k: {"frozen": base})
    assert -0.7 < slope < -0.3, (gaps, slope)


@pytest.mark.parametrize("layer", ["hidden", "readout"])
def test_pretrained_widest_mean_agrees_with_the_limit_mean(layer):
    """Seeds' mean final test loss at n = 1024 (each network pretrained, then adapted)
    within 5 combined standard errors of the limit's mean over pretraining particles and
    Z_A⁰ (7 dof each)."""
    gap, se, dof = widest_mean_gap(_pretrained(layer=layer), sine_task(n_train=16, n_test=16,
                                                                       seed=4),
                                   1024, PRE_RATES, 15, 8, 8192)
    assert dof == 7
    assert gap < 5 * se


# -- an adapter below W^L: the frozen layers above it continue the deep limit -----------------
@pytest.mark.parametrize("L, layer", [(3, "W2"), (2, "input")])
def test_an_adapter_below_the_last_hidden_matrix_is_the_matrix_network(L, layer):
    """Adapter on W² of an L = 3 network, or on W¹ of an L = 2 one: pretrain()'s base and
    its frozen layers above, stepped by _one, equal the network written as matrices with
    W^l + s B A in place of W^l — its loss, and its loss after one SGD step on A and B by
    central differences; the base's output is the pretrained network's (train_finite's
    evaluation, 1e-12)."""
    import tp_limits as tp
    from tp_limits.adapters import pretrain
    pre = _pretrained(steps=3, L=L, layer=layer, rank=2, optimizer="sgd", init="gaussian",
                      alpha=3.0)
    l = pre.matrix
    assert (l, pre.p) == ((2, 1) if layer == "W2" else (1, 1))
    task = sine_task(n_train=6, n_test=3, seed=2)
    n = 12
    W = tp.train_finite(pre.net, pre.routine, n, seed=7, keep_weights=True,
                        record=()).weights.final
    base = pretrain(pre, task.x, n, seed=7)
    r = pre.routine
    ev = tp.Routine(r.X, r.Y, lr=r.lr, batch_size=8, eval_inputs=task.x)
    np.testing.assert_allclose(base.output(pre.net.nonlinearity),
                               tp.train_finite(pre.net, ev, n, seed=7,
                                               record=()).f_eval[-1, :, 0],
                               rtol=1e-12, atol=1e-14)
    rng = np.random.default_rng(1)
    fan_in = W[l - 1].shape[1]
    A0, B0 = rng.standard_normal((2, fan_in)) / math.sqrt(fan_in), rng.standard_normal((n, 2))
    x, y = task.x[task.train], task.y[task.train]

    def loss(A, B):
        Ws = list(W)
        Ws[l - 1] = Ws[l - 1] + pre.scale * B @ A
        h = Ws[0] @ x.T
        for k in range(1, L + 1):
            h = Ws[k] @ np.tanh(h)
        return 0.5 * np.mean((pre.net.output_multiplier * h[0] - y) ** 2)

    lr_A, lr_B, e = 1e-2, 2e-2, 1e-6
    tr, *_ = _one(pre, task, base.features, base.omega, B0, A0 @ base.features, n, lr_A,
                  lr_B, 1, lambda t: None, pre=base.pre, upper=base.upper)
    grads = []
    for k, P in enumerate((A0, B0)):
        g = np.zeros_like(P)
        for idx in np.ndindex(P.shape):
            d = np.zeros_like(P)
            d[idx] = e
            pair = ((A0 + d, B0), (A0 - d, B0)) if k == 0 else ((A0, B0 + d), (A0, B0 - d))
            g[idx] = (loss(*pair[0]) - loss(*pair[1])) / (2 * e)
        grads.append(g)
    assert tr[0] == pytest.approx(loss(A0, B0), rel=1e-12)
    assert tr[1] == pytest.approx(loss(A0 - lr_A * grads[0], B0 - lr_B * grads[1]), rel=1e-8)


def test_the_limit_base_below_w_l_outputs_the_pretrained_limit():
    """Four limit bases of the W² adapter (L = 3; own particles each, 3 dof): their frozen
    layers above h² give the pretrained limit's output (simulate_limit, 8 replicates)
    within 5 combined standard errors on every input."""
    import tp_limits as tp
    from tp_limits.adapters import pretrain
    pre = _pretrained(steps=6, L=3, layer="W2")
    x = sine_task(n_train=4, n_test=4, seed=5).x
    outs = np.array([pretrain(pre, x, math.inf, seed=s, particles=8192).output(
        pre.net.nonlinearity) for s in range(4)])
    r = pre.routine
    ev = tp.Routine(r.X, r.Y, lr=r.lr, batch_size=8, eval_inputs=x)
    lim = tp.simulate_limit(pre.net, ev, particles=8192, replicates=8, record=())
    se = np.hypot(outs.std(axis=0, ddof=1) / 2, lim.f_eval_se[-1, :, 0])
    assert np.all(np.abs(outs.mean(axis=0) - lim.f_eval[-1, :, 0]) < 5 * se)


@pytest.mark.parametrize("L, layer, optimizer, rates", [(3, "W2", "adam", PRE_RATES),
                                                        (2, "input", "sgd", (2.0, 2.0))])
def test_networks_adapted_below_w_l_approach_their_conditional_limit_like_root_n(
        L, layer, optimizer, rates):
    """Adapter on W² of an L = 3 network (Adam), or on W¹ of an L = 2 one (SGD), each
    network's own Z_A⁰ fed to one pretrained particle set: the rms gap of the fine-tuned
    test outputs falls like n^(−1/2) (slope within ±0.2 over n = 64 … 1024, 3 networks per
    width).  The frozen W³'s Ż terms and its growing history are what make it on W²:
    without Ż the gap stays at 0.2 (slope +0.03), and without storing phase two's vectors
    it stalls at 0.06 (slope −0.13).  On W¹ the factor A has no width, so under Adam its
    r·d_in entries each take a normalized step that no mean smooths: where one's gradient
    passes near zero, a network and its limit step differently by Θ(1), and a few networks
    leave their conditional limit (docs/results.md) — hence SGD there (slope −0.56)."""
    from tp_limits.adapters import pretrain
    pre = _pretrained(L=L, layer=layer, optimizer=optimizer)
    task = sine_task(n_train=16, n_test=16, seed=3)
    base = pretrain(pre, task.x, math.inf, seed=5, particles=32768)
    slope, gaps = conditional_slope(pre, task, rates, 15, lambda k: {"frozen": base})
    assert -0.7 < slope < -0.3, (gaps, slope)


def test_a_shared_limit_base_gives_the_same_run_whatever_ran_on_it_before():
    """The frozen layers' histories are reset for every fine-tuning: a run on a base equals
    the same run after another one (other rates, more steps) used that base."""
    from tp_limits.adapters import pretrain
    pre = _pretrained(steps=3, L=3, layer="W2")
    task = sine_task(n_train=4, n_test=4, seed=1)
    base = pretrain(pre, task.x, math.inf, seed=2, particles=1024)
    first = fine_tune(pre, task, math.inf, 2.0, 0.05, steps=3, seeds=2, frozen=base)
    fine_tune(pre, task, math.inf, 8.0, 0.5, steps=5, seeds=1, frozen=base)
    again = fine_tune(pre, task, math.inf, 2.0, 0.05, steps=3, seeds=2, frozen=base)
    np.testing.assert_array_equal(first.test_loss, again.test_loss)
    assert np.all(np.isfinite(first.test_loss))


def test_a_lower_adapter_that_diverges_names_its_step():
    """Rates of 1e200 on the W² adapter: the run stops at step 1, at width n and in the
    limit, saying what left the floats; its earlier loss is kept."""
    pre = _pretrained(steps=3, L=3, layer="W2", optimizer="sgd", init="gaussian")
    for width in (64, math.inf):
        run = fine_tune(pre, sine_task(n_train=4, n_test=4), width, 1e200, 1e200, steps=5,
                        seeds=1, particles=1024)
        assert run.diverged[0] == 1 and run.divergence[0].startswith("step 1: ")
        assert np.isfinite(run.test_loss[0, 0]) and np.all(np.isinf(run.test_loss[0, 1:]))


def test_the_frozen_layers_rows_beyond_the_memory_are_refused_before_work():
    from tp_limits.errors import MemoryBudgetError
    pre = _pretrained(steps=2, L=3, layer="W2")
    with pytest.raises(MemoryBudgetError, match="frozen layers above W\\^2: .* rows .* fit"):
        fine_tune(pre, sine_task(n_train=4, n_test=4), math.inf, 1.0, 1.0, steps=10**9,
                  particles=1024)


def test_what_the_pretrained_adapter_does_not_take_is_named():
    import tp_limits as tp
    from tp_limits.adapters import PretrainedLoRA, pretrain
    pre = _pretrained(steps=2)
    r, X = pre.routine, pre.routine.X
    with pytest.raises(SpecError, match="L = 1"):
        PretrainedLoRA(net=tp.MLP(tp.mup(1), 5, 1), routine=r)
    with pytest.raises(SpecError, match="biases"):
        PretrainedLoRA(net=tp.MLP(tp.mup(2), 5, 1, bias=True), routine=r)
    with pytest.raises(SpecError, match="μP readout"):
        PretrainedLoRA(net=tp.MLP(tp.ntp(2, c=0), 5, 1), routine=r)
    with pytest.raises(SpecError, match="linear in the"):
        PretrainedLoRA(net=pre.net, routine=tp.Routine(X, r.Y, lr=0.1, batch_size=8,
                                                       optimizer=tp.Adam()))
    with pytest.raises(SpecError, match="rank"):
        PretrainedLoRA(net=pre.net, routine=r, rank=0)
    with pytest.raises(SpecError, match="one adapter per network.*n\\^\\(-1/2\\)"):
        PretrainedLoRA(net=pre.net, routine=r, layer=("W2", "readout"))
    for layer in ("W0", "W4", 2, "bottom"):
        with pytest.raises(SpecError, match=f"layer = {layer!r}; choose one of .*'W3'"):
            PretrainedLoRA(net=pre.net, routine=r, layer=layer)
    task = sine_task(n_train=4, n_test=4)
    base = pretrain(pre, task.x, 16)
    with pytest.raises(SpecError, match="width 16"):
        fine_tune(pre, task, 32, 1.0, 1.0, steps=1, frozen=base)
    with pytest.raises(SpecError, match="pretrain"):
        fine_tune(pre, task, math.inf, 1.0, 1.0, steps=1, frozen=np.eye(8))
    with pytest.raises(SpecError, match="pretrained network's base"):
        fine_tune(LoRAToy(), task, math.inf, 1.0, 1.0, steps=1, frozen=base)
    with pytest.raises(SpecError, match="input kernel is"):
        fine_tune(LoRAToy(), task, math.inf, 1.0, 1.0, steps=1, frozen=np.eye(3))
    with pytest.raises(SpecError, match="sequence of seeds = 2 of them, got list of 1"):
        fine_tune(pre, task, 16, 1.0, 1.0, steps=1, seeds=2, frozen=[base])
    with pytest.raises(SpecError, match="x has shape"):
        pretrain(pre, task.x[:, :3], 16)
    from tp_limits.adapters import adapter_coord_check, exact_limit
    for f in (lambda: exact_limit(pre, task, 1.0, 1.0),
              lambda: adapter_coord_check(pre, task, (16, 32), 1.0, 1.0)):
        with pytest.raises(SpecError, match="built for the toy"):
            f()


def test_a_pretraining_that_diverges_says_so_with_its_step():
    from tp_limits.errors import DivergenceError
    pre = _pretrained(steps=4, lr=1e6)
    task = sine_task(n_train=4, n_test=4)
    for width in (32, math.inf):
        with pytest.raises(DivergenceError, match="while pretraining") as err:
            fine_tune(pre, task, width, 1.0, 0.05, steps=2, seeds=1, particles=1024)
        assert err.value.step >= 0


@pytest.mark.parametrize("L, layer", [(2, "hidden"), (3, "W2")])
def test_a_sweep_pretrains_once_per_width_and_seed_and_equals_fine_tune(L, layer):
    """rate_sweep on a pretrained network shares each seed's pretrained network (particle
    set, with the deep run above a lower adapter) across its rate pairs; every grid point
    equals fine_tune's own run bit for bit."""
    from tp_limits.adapters import rate_sweep
    pre = _pretrained(steps=3, L=L, layer=layer)
    task = sine_task(n_train=6, n_test=6, seed=1)
    sw = rate_sweep(pre, task, (16,), (1.0, 4.0), (0.05,), steps=3, seeds=2, particles=512,
                    progress=False)
    assert sw.widths == (16, math.inf)
    for k, n in enumerate(sw.widths):
        rates = (4.0, 0.05) if n == math.inf else pre.rates(n, 4.0, 0.05)
        run = fine_tune(pre, task, n, *rates, steps=3, seeds=2, particles=512)
        np.testing.assert_array_equal(sw.curves[k][1, 1, 0], run.test_loss)
