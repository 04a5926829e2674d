"""The finite-width engine against independent references and the theory."""
import numpy as np
import pytest
from conftest import D1, d1, t_quantile

import tp_limits as tp
from tp_limits.engine.backend import get_backend
from tp_limits.finite.network import FiniteNetwork
from tp_limits.finite.norms import spectral_norm
from tp_limits.losses import get_loss

NP = get_backend("numpy")


def ref_forward(Ws, X, phi, alpha):
    x = X
    for W in Ws[:-1]:
        x = phi(x @ W.T)
    return alpha * x @ Ws[-1].T


@pytest.mark.parametrize("loss, param", [("mse", tp.mup(2)), ("xent", tp.ntp(2)),
                                         ("mse", tp.sp(3, c=1)), ("mse", tp.mup(1, form="a0"))])
def test_sgd_step_matches_finite_difference_gradient(loss, param):
    """One engine step equals W - lr_W * dLoss/dW with dLoss/dW by central differences."""
    n, B, lr = 5, 2, 0.3
    net = tp.MLP(param, d_in=3, d_out=2, phi="tanh", sigma=[1.3, 0.7, 1.2, 0.9][: param.L + 1],
                 lr_mult=[1.0, 0.5, 2.0, 1.5][: param.L + 1], readout_multiplier=1.7)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((B, 3))
    Y = np.eye(2)[[0, 1]] if loss == "xent" else rng.standard_normal((B, 2))
    nw = FiniteNetwork(net, n, lr, seed=7, backend=NP, dtype=np.float64)
    W_init = [w.copy() for w in nw.W]
    L = get_loss(loss)
    mean_loss = lambda Ws: L.value(ref_forward(Ws, X, np.tanh, net.output_multiplier), Y, np).mean()  # noqa
    hs, xs, f = nw.forward(X, step=0)
    assert np.allclose(f, ref_forward(W_init, X, np.tanh, net.output_multiplier))
    nw.step(hs, xs, L.grad(f, Y, np) / B)
    a, _, c = param._fractions
    for l, W in enumerate(W_init):
        grad = np.zeros_like(W)
        for idx in np.ndindex(W.shape):
            Wp = [w.copy() for w in W_init]
            Wm = [w.copy() for w in W_init]
            Wp[l][idx] += 1e-6
            Wm[l][idx] -= 1e-6
            grad[idx] = (mean_loss(Wp) - mean_loss(Wm)) / 2e-6
        lr_W = lr * net.lr_mult[l] * n ** -float(2 * a[l] + c[l])
        assert np.allclose(nw.W[l], W - lr_W * grad, rtol=1e-7, atol=1e-9), f"layer {l + 1}"


def test_init_scales_follow_abc():
    n = 1500
    net = tp.MLP(tp.mup(2), d_in=2, d_out=3, sigma=[1.5, 0.5, 2.0])
    nw = FiniteNetwork(net, n, 0.1, seed=0, backend=NP, dtype=np.float64)
    # muP: W^1 ~ N(0, σ1²), W^2 ~ N(0, σ2²/n), W^3 ~ N(0, σ3²/n²)
    for W, std in zip(nw.W, [1.5, 0.5 / np.sqrt(n), 2.0 / n]):
        rel_se = 1 / np.sqrt(2 * W.size)
        assert abs(W.std() / std - 1) < 5 * rel_se


def test_adam_first_step_is_sign_update():
    n, lr = 6, 0.01
    param = tp.mup(2, optimizer="adam")
    net = tp.MLP(param, d_in=2, d_out=1)
    X, Y = np.array([[1.0, -0.5]]), np.array([[0.7]])
    nw = FiniteNetwork(net, n, lr, 0, NP, np.float64, optimizer=tp.Adam(eps=1e-12))
    W_init = [w.copy() for w in nw.W]
    hs, xs, f = nw.forward(X, 0)
    chi = f - Y
    g_readout = net.output_multiplier * chi.T @ xs[-1]
    nw.step(hs, xs, chi)
    a, _, c = param._fractions
    # with one step, m_hat / sqrt(v_hat) = sign(g_w): ΔW = -lr n^{-c} n^{-a} sign(∇W)
    expected = -lr * n ** -float(c[2]) * n ** -float(a[2]) * np.sign(g_readout)
    assert np.allclose(nw.W[2] - W_init[2], expected, rtol=1e-6)
    steps = [np.abs(w - w0) for w, w0 in zip(nw.W, W_init)]
    for l in range(2):
        nz = steps[l][steps[l] > 0]
        assert np.allclose(nz, lr * n ** -float(c[l]) * n ** -float(a[l]), rtol=1e-6)


def test_symmetry_mup_vs_mfp_and_forms():
    r = d1()
    for p, q, L in [(tp.mup(1), tp.mfp(), 1), (tp.mup(3), tp.mup(3, form="a0"), 3)]:
        a = tp.train_finite(tp.MLP(p, 2, 1), r, 256, seed=4)
        b = tp.train_finite(tp.MLP(q, 2, 1), r, 256, seed=4)
        scale = np.abs(a.f_eval).max()
        assert np.max(np.abs(a.f_eval - b.f_eval)) <= 1e-12 * scale
        assert np.max(np.abs(a.stats["dh_rms"] - b.stats["dh_rms"])) <= 1e-12


def test_linear_first_step_matches_kernel_theory():
    """N3 sanity: linear muP L=2, f_1 -> (1.5, 0.9, 1.5); decoupled f_1 -> (1.0, 0.6, 1.0)."""
    net = tp.MLP(tp.mup(2), 2, 1, phi="id")
    r = d1(steps=1)
    for backprop, expected in [("exact", [1.5, 0.9, 1.5]), ("decoupled", [1.0, 0.6, 1.0])]:
        f1 = np.array([tp.train_finite(net, r, 2048, seed=s, backprop=backprop,
                                       record=()).f_eval[1, :, 0] for s in range(8)])
        se = f1.std(axis=0, ddof=1) / np.sqrt(len(f1))
        # 8 seeds: Student t with 7 degrees of freedom, plus the O(1/n) finite-width bias
        assert np.all(np.abs(f1.mean(axis=0) - expected) < t_quantile(7) * se + 2e-3), backprop


def test_decoupled_differs_and_keeps_forward():
    net = tp.MLP(tp.mup(2), 2, 1)
    a = tp.train_finite(net, d1(), 512, seed=1)
    b = tp.train_finite(net, d1(), 512, seed=1, backprop="decoupled")
    assert np.array_equal(a.f_eval[0], b.f_eval[0])          # same W_0
    assert np.max(np.abs(a.f_eval[3] - b.f_eval[3])) > 1e-2
    with pytest.raises(tp.SpecError, match="L >= 2"):
        tp.train_finite(tp.MLP(tp.mup(1), 2, 1), d1(), 64, backprop="decoupled")


def test_zero_readout_starts_at_zero():
    p = tp.ABC([0, 0, 0], [0, "1/2", "oo"], [-1, 0, 1])
    tr = tp.train_finite(tp.MLP(p, 2, 1), d1(), 128)
    assert np.all(tr.f_eval[0] == 0) and np.any(tr.f_eval[1] != 0)
    assert np.all(tr.stats["dh_rms"][1] == 0)                 # hidden layers still at W_0 after step 0


@pytest.mark.parametrize("record", [(), ("stats",), ("spectral",), ("stats", "spectral")])
def test_trajectory_shapes_and_reproducibility(record, tmp_path):
    r = tp.Routine(np.random.default_rng(0).standard_normal((8, 3)), np.zeros((8, 2)), lr=0.2,
                   batch_size=2, eval_inputs=np.eye(3)[:2] + 0.1)
    net = tp.MLP(tp.mup(2), 3, 2, phi="gelu")
    a = tp.train_finite(net, r, 64, seed=5, record=record)
    b = tp.train_finite(net, r, 64, seed=5, record=record)
    c = tp.train_finite(net, r, 64, seed=6, record=record)
    assert a.f_eval.shape == (5, 2, 2) and a.f_train.shape == (4, 2, 2) and a.loss.shape == (4,)
    assert np.array_equal(a.f_eval, b.f_eval) and not np.array_equal(a.f_eval, c.f_eval)
    assert ("h_rms" in a.stats) == ("stats" in record)
    # record=("spectral",) used to record nothing at all
    assert ("spectral_ratio" in a.stats) == ("spectral" in record)
    if record:
        fro = a.stats["frobenius_ratio"]
        assert np.all(np.isfinite(fro)) and np.all(fro[0] == 0) and np.all(fro[1:] > 0)
    if "spectral" in record:
        assert np.all(a.stats["spectral_ratio"][1:] > 0)
    a.save(tmp_path / "t.npz")
    back = tp.Trajectory.load(tmp_path / "t.npz")
    assert np.array_equal(back.f_eval, a.f_eval) and back.meta == a.meta
    assert set(back.stats) == set(a.stats)
    assert back.completed_steps == 4 and back.meta["width"] == 64


def test_stats_match_direct_computation():
    """Spectral/Frobenius ratios and feature kernel against dense NumPy at small width."""
    net = tp.MLP(tp.mup(2), 2, 1)
    r = d1()
    n = 80
    tr = tp.train_finite(net, r, n, seed=2, record=("stats", "spectral"))
    nw = FiniteNetwork(net, n, r.lr, 2, NP, np.float64, keep_init=True)
    Y = r.targets(1)
    for t in range(r.steps):
        hs, xs, f = nw.forward(r.X[t:t + 1], t)
        nw.step(hs, xs, f - Y[t:t + 1])
    for l in range(3):
        d = nw.W[l] - nw.W0[l]
        assert tr.stats["spectral_ratio"][-1, l] == pytest.approx(
            np.linalg.norm(d, 2) / np.linalg.norm(nw.W0[l], 2), rel=2e-3)
        assert tr.stats["frobenius_ratio"][-1, l] == pytest.approx(
            np.linalg.norm(d) / np.linalg.norm(nw.W0[l]), rel=1e-10)
    x2 = np.tanh(np.tanh(r.eval_inputs @ nw.W[0].T) @ nw.W[1].T)
    assert np.allclose(tr.stats["feature_kernel"][-1], x2 @ x2.T / n)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_frobenius_distance_by_cached_blocks(dtype):
    """‖A - B‖_F by row blocks (one row, 7 rows with a partial last block, all rows at
    once) against the dense norm; float32 inputs are summed in float64."""
    from tp_limits.finite.norms import frobenius_distance
    rng = np.random.default_rng(3)
    A = rng.standard_normal((53, 40)).astype(dtype)
    B = (A + 1e-3 * rng.standard_normal(A.shape)).astype(dtype)
    exact = np.linalg.norm(A.astype(np.float64) - B.astype(np.float64))
    for block in (1, 40, 7 * 40, 10**6, None):
        assert frobenius_distance(A, B, NP, block) == pytest.approx(exact, rel=1e-12)
    assert frobenius_distance(A, A, NP, 7 * 40) == 0.0


def test_power_iteration_against_svd():
    rng = np.random.default_rng(0)
    low = rng.standard_normal((300, 3)) @ rng.standard_normal((3, 300))
    full = rng.standard_normal((200, 200))
    for M, rtol in [(low, 1e-6), (full, 1e-2)]:
        s, _ = spectral_norm(lambda V: M @ V, lambda U: M.T @ U, M.shape, NP, np.float64, iters=60)
        assert s <= np.linalg.norm(M, 2) * (1 + 1e-12)        # a Rayleigh quotient: from below
        assert s == pytest.approx(np.linalg.norm(M, 2), rel=rtol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lanczos_norm_against_svd(dtype):
    """Golub-Kahan-Lanczos: a Gaussian matrix (top singular values close together), a
    rectangular one and a rank-3 one (an invariant subspace after three steps), from
    below and to its stopping tolerance."""
    from tp_limits.finite.norms import lanczos_norm
    rng = np.random.default_rng(0)
    mats = [rng.standard_normal((400, 400)), rng.standard_normal((300, 120)),
            rng.standard_normal((300, 3)) @ rng.standard_normal((3, 300))]
    tol = 1e-7 if dtype == np.float64 else 1e-5
    for M in mats:
        Md = M.astype(dtype)
        exact = np.linalg.norm(Md.astype(np.float64), 2)
        s = lanczos_norm(lambda v: Md @ v, lambda u: Md.T @ u, M.shape, NP, dtype)
        assert s <= exact * (1 + 10 * np.finfo(dtype).eps)
        assert s == pytest.approx(exact, rel=tol)


def test_divergence_raises_with_location_or_stops():
    net = tp.MLP(tp.sp(2), 2, 1, phi="id")          # SP is unstable: updates explode
    r = tp.Routine(np.ones((40, 2)), np.ones((40, 1)), lr=1.0)
    with pytest.raises(tp.DivergenceError) as info:
        tp.train_finite(net, r, 256, record=())
    err = info.value
    assert err.step >= 1 and err.layer == 2 and err.quantity == "pre-activation h"
    assert f"step {err.step}" in str(err) and "layer 2" in str(err)
    tr = tp.train_finite(net, r, 256, record=(), on_divergence="stop")
    d = tr.divergence
    assert tr.diverged and (d.step, d.layer, d.quantity) == (err.step, 2, "pre-activation h")
    assert tr.meta["diverged"] == d.to_json()            # meta: the JSON view of the status
    assert tr.steps == tr.completed_steps < 40
    assert np.all(np.isfinite(tr.f_eval)) and np.all(np.isfinite(tr.loss))


def test_explosion_is_caught_while_still_finite():
    """Outputs of 1e16-1e48 used to pass as training; a bound on |h| and |f| reports them
    (with step and layer) before they overflow, and can be set or switched off."""
    net = tp.MLP(tp.sp(2), 2, 1, phi="id")
    r = tp.Routine(np.ones((40, 2)), np.ones((40, 1)), lr=1.0)
    early = tp.train_finite(net, r, 256, record=(), on_divergence="stop", divergence_bound=100)
    late = tp.train_finite(net, r, 256, record=(), on_divergence="stop")
    off = tp.train_finite(net, r, 256, record=(), on_divergence="stop", divergence_bound=None)
    assert early.divergence.size > 100 and early.steps < late.steps < off.steps
    assert 1e10 < late.divergence.size < 1e300
    assert off.divergence.size is None            # only inf/NaN stop it
    with pytest.raises(tp.DivergenceError, match="beyond divergence_bound = 100"):
        tp.train_finite(net, r, 256, record=(), divergence_bound=100)


def test_a_statistic_failing_on_overflowed_weights_is_a_divergence(monkeypatch):
    """The spectral-norm statistic died in numpy (LinAlgError) even with
    on_divergence='stop', losing the partial run; it is now reported as a divergence."""
    from tp_limits.finite import stats

    def broken(self, l, d):
        raise np.linalg.LinAlgError("SVD did not converge")
    monkeypatch.setattr(stats.StatsRecorder, "_norm_delta", broken)
    tr = tp.train_finite(tp.MLP(tp.mup(2), 2, 1), d1(), 64, on_divergence="stop",
                         record=("stats", "spectral"))
    assert tr.divergence.quantity == "weights" and tr.steps == 0


def test_keyboard_interrupt_returns_partial(monkeypatch):
    calls = {"n": 0}
    original = FiniteNetwork.step

    def flaky(self, *args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return original(self, *args)

    monkeypatch.setattr(FiniteNetwork, "step", flaky)
    tr = tp.train_finite(tp.MLP(tp.mup(2), 2, 1), d1(), 64)
    assert tr.interrupted and tr.completed_steps == 2
    assert tr.f_eval.shape[0] == 3 and tr.stats["h_rms"].shape[0] == 3


def test_float32_close_to_float64():
    net = tp.MLP(tp.mup(2), 2, 1)
    a = tp.train_finite(net, d1(), 256, seed=0)
    b = tp.train_finite(net, d1(), 256, seed=0, dtype=np.float32)
    assert b.meta["dtype"] == "float32"
    assert np.max(np.abs(a.f_eval - b.f_eval)) < 1e-4


def test_xent_training_reduces_loss():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 4))
    labels = (X[:, 0] > 0).astype(int)
    r = tp.Routine(np.tile(X, (5, 1)), np.tile(labels, 5), lr=0.5, loss="xent", batch_size=8)
    tr = tp.train_finite(tp.MLP(tp.mup(2), 4, 2, phi="relu"), r, 256, record=())
    assert tr.loss[-5:].mean() < 0.8 * tr.loss[:5].mean()


@pytest.mark.parametrize("kwargs, match", [
    (dict(width=0), "width"),
    (dict(width=2.5), "width"),
    (dict(backend="tpu"), "unknown backend"),
    (dict(backprop="random"), "backprop"),
    (dict(record=("everything",)), "record option"),
    (dict(on_divergence="ignore"), "on_divergence"),
    (dict(dtype=np.int32), "dtype"),
    (dict(record=None), "record"),
    (dict(record="stats"), "record"),
    (dict(seed=-3), "seed"),
    (dict(progress=1), "progress"),
])
def test_bad_train_arguments(kwargs, match):
    args = dict(width=16)
    args.update(kwargs)
    with pytest.raises(tp.SpecError, match=match):
        tp.train_finite(tp.MLP(tp.mup(2), 2, 1), d1(), **args)


def test_shape_mismatch_and_memory_guard():
    with pytest.raises(tp.SpecError, match="d_in = 3"):
        tp.train_finite(tp.MLP(tp.mup(2), 3, 1), d1(), 16)
    with pytest.raises(tp.SpecError, match="d_out = 2"):
        tp.train_finite(tp.MLP(tp.mup(2), 2, 2), d1(), 16)
    with pytest.raises(tp.MemoryBudgetError, match="GiB"):
        tp.train_finite(tp.MLP(tp.mup(3), 2, 1), d1(), 2_000_000)


def test_cupy_backend_missing_or_matching():
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(tp.BackendUnavailableError, match="CuPy"):
            tp.train_finite(tp.MLP(tp.mup(2), 2, 1), d1(), 16, backend="cupy")
        pytest.skip("CuPy not installed: agreement with NumPy not checked here")
    net = tp.MLP(tp.mup(2), 2, 1)
    a = tp.train_finite(net, d1(), 512, seed=3)
    b = tp.train_finite(net, d1(), 512, seed=3, backend="cupy")
    assert np.max(np.abs(a.f_eval - b.f_eval)) < 1e-10
    for k in ("h_rms", "dh_rms", "feature_kernel"):
        assert np.allclose(a.stats[k], b.stats[k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("L", [1, 2])
def test_init_scale_alignment(L):
    """relu: f_s = s^{-(L+1)} W_{L+1} φ(... W_1 x), W ~ s·(base init), LR s² η0 reproduces s = 1."""
    eta0 = 0.3
    r0 = d1(lr=eta0)
    base = tp.train_finite(tp.MLP(tp.ntp(L), 2, 1, phi="relu"), r0, 128, seed=0, record=())
    for s in (0.01, 0.1, 1.0, 3.0):
        net = tp.MLP(tp.ntp(L), 2, 1, phi="relu", output_scale=s)
        aligned = tp.train_finite(net, d1(lr=s * s * eta0), 128, seed=0, record=())
        assert np.allclose(aligned.f_eval, base.f_eval, rtol=1e-10, atol=1e-12), s
        if s != 1.0:          # the same learning rate at another scale trains differently
            naive = tp.train_finite(net, r0, 128, seed=0, record=(), on_divergence="stop")
            assert naive.diverged or np.max(np.abs(naive.f_eval[-1] - base.f_eval[-1])) > 1e-3, s


def test_the_time_estimate_prices_what_a_run_does_and_refuses_before_any_work(monkeypatch):
    """finite/cost.py: the dense terms grow like n², Muon's low-rank term with the history
    (Σ_t k_t ∝ T² while momentum keeps every pair), the statistics' terms appear only when
    recorded; a run beyond time_budget is refused before a weight is drawn."""
    from tp_limits.finite import cost
    from tp_limits.spec import Problem
    X = np.random.default_rng(0).standard_normal((200, 2))
    sgd = Problem(tp.MLP(tp.mup(2), 2, 1), tp.Routine(X, X[:, :1], lr=0.1, batch_size=2))
    u1, u2 = (dict(zip(cost.NAMES, cost.cost_units(sgd, n))) for n in (512, 1024))
    assert u2["dense"] == 4 * u1["dense"] and u2["vec"] == 2 * u1["vec"]
    assert u1["stats"] == u1["spectral"] == u1["lowrank"] == u1["state"] == 0
    rec = dict(zip(cost.NAMES, cost.cost_units(sgd, 512, ("stats", "spectral"))))
    assert rec["stats"] > 0 and rec["spectral"] > 0 and rec["spectral_flat"] == 0
    adam = Problem(tp.MLP(tp.mup(2, optimizer="adam"), 2, 1),
                   tp.Routine(X, X[:, :1], lr=0.1, batch_size=2, optimizer=tp.Adam()))
    assert dict(zip(cost.NAMES, cost.cost_units(adam, 512)))["state"] == 2 * adam.T * 512 ** 2

    def muon(T):
        r = tp.Routine(X[:2 * T], X[:2 * T, :1], lr=0.1, batch_size=2, optimizer=tp.Muon())
        return Problem(tp.MLP(tp.mup(2, optimizer="muon"), 2, 1), r)
    m20, m40 = (dict(zip(cost.NAMES, cost.cost_units(muon(T), 512, ("spectral",))))
                for T in (20, 40))
    assert m40["lowrank"] / m20["lowrank"] == pytest.approx(41 * 40 / (21 * 20))
    assert m20["spectral_flat"] > 0 and m20["spectral"] == 0
    assert cost.time_estimate(muon(40), 512) > 2 * cost.time_estimate(muon(20), 512)

    def no_weights(*a, **k):
        raise AssertionError("a refused run drew its weights")
    monkeypatch.setattr(FiniteNetwork, "__init__", no_weights)
    with pytest.raises(tp.SpecError, match="estimated at .* beyond time_budget"):
        tp.train_finite(muon(40).net, muon(40).routine, 4096, time_budget=0.1)


def test_the_estimate_is_in_the_trajectory_and_none_lifts_the_budget():
    X = np.random.default_rng(0).standard_normal((8, 2))
    r = tp.Routine(X, X[:, :1], lr=0.1, batch_size=2)
    tr = tp.train_finite(tp.MLP(tp.mup(2), 2, 1), r, 64, time_budget=None, record=())
    assert 0 < tr.meta["time_estimate_s"] < 1


def test_a_long_initialization_says_what_it_is_doing(monkeypatch, capsys):
    """An orthogonal or spectral n x n layer is one big factorization with no progress bar:
    it is announced after a second (step_notice), a Gaussian draw is not wrapped."""
    import time
    import tp_limits.finite.network as network
    from tp_limits.engine.progress import step_notice
    with step_notice("factoring a test matrix", "test matrix factored", after=0.01):
        time.sleep(0.1)
    err = capsys.readouterr().err
    assert "tp_limits: factoring a test matrix..." in err and "test matrix factored in" in err
    seen = []

    def record(doing, done, after=1.0):
        seen.append(doing)
        return step_notice(doing, done, after)
    monkeypatch.setattr(network, "step_notice", record)
    X = np.eye(3)[:2]
    r = tp.Routine(X, X[:, :1], lr=0.1, batch_size=2)
    tp.train_finite(tp.MLP(tp.mup(2), 3, 1, init="orthogonal"), r, 32, record=())
    assert "orthogonal initialization of layer 2 (32 × 32)" in seen
    seen.clear()
    tp.train_finite(tp.MLP(tp.mup(2), 3, 1), r, 32, record=())
    assert seen == []


def test_eval_every_evaluates_only_its_steps_and_changes_nothing_else():
    """eval_every = k: f on the evaluation inputs and the statistics at every k-th step and
    at 0 and T, the very values of a run that evaluates every step (evaluating moves no
    weight), NaN elsewhere; the steps in meta; training itself untouched; the estimate
    prices only the evaluations made."""
    net = tp.MLP(tp.mup(2), 2, 1, phi="tanh")
    r = tp.Routine(X=np.tile(D1["X"], (4, 1)), Y=np.tile(D1["Y"], (4, 1)),
                   eval_inputs=D1["eval_inputs"], lr=0.5)
    every = tp.train_finite(net, r, 64, seed=3, record=("stats",))
    some = tp.train_finite(net, r, 64, seed=3, record=("stats",), eval_every=4)
    T = len(every.loss)
    steps = sorted(set(range(0, T + 1, 4)) | {T})
    assert some.meta["eval_steps"] == steps and every.meta["eval_steps"] == list(range(T + 1))
    others = [t for t in range(T + 1) if t not in steps]
    assert others and np.all(np.isnan(some.f_eval[others]))
    np.testing.assert_array_equal(some.f_eval[steps], every.f_eval[steps])
    np.testing.assert_array_equal(some.loss, every.loss)
    np.testing.assert_array_equal(some.f_train, every.f_train)
    for key in ("h_rms", "dh_rms", "dWx_rms", "feature_kernel", "frobenius_ratio"):
        np.testing.assert_array_equal(some.stats[key][steps], every.stats[key][steps])
        assert np.all(np.isnan(some.stats[key][others])), key
    assert some.meta["time_estimate_s"] < every.meta["time_estimate_s"]
    with pytest.raises(tp.SpecError, match="eval_every"):
        tp.train_finite(net, r, 64, eval_every=0)
