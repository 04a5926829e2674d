"""Residual MLPs (tp_limits/spec/residual.py, docs/theory.md §12): the finite network's
backward pass against finite differences, the exact linear limit at initialization against
its closed form, the exact and Monte Carlo limits against each other and against finite
networks, and the refusals."""
import numpy as np
import pytest
from conftest import D1, N8_LONG, exact_against_monte_carlo, t_quantile, welch_dof

import tp_limits as tp
from tp_limits.engine.backend import numpy_backend
from tp_limits.engine.meta import problem_meta
from tp_limits.finite.network import FiniteNetwork
from tp_limits.spec import Problem


def test_presets_keep_the_summed_update_constant():
    """γ = 1 − p α with p the times an update carries the branch multiplier (SGD 2, else 1)."""
    assert tp.Residual.depth_mup("sgd") == tp.Residual(0.5, 0.0)
    assert tp.Residual.depth_mup("adam") == tp.Residual(0.5, 0.5)
    assert tp.Residual.depth_mup("muon") == tp.Residual(0.5, 0.5)
    assert tp.Residual.completep("adam") == tp.Residual(1.0, 0.0, block_depth=2)
    assert tp.Residual.completep("sgd", block_depth=1) == tp.Residual(1.0, -1.0)
    net = tp.MLP(tp.mup(5), 3, 1, lr_mult=[1, 2, 3, 4, 5, 6], residual=tp.Residual(0.5, 0.25))
    assert net.branch == (1.0, 0.5, 0.5, 0.5, 0.5, 1.0)                 # K = 4
    np.testing.assert_allclose(net.effective_lr_mult, [1, 2 / 4 ** 0.25, 3 / 4 ** 0.25,
                                                       4 / 4 ** 0.25, 5 / 4 ** 0.25, 6])
    c = net.finite_constants(64, lr=0.1)
    assert c.branch == net.branch
    plain = tp.MLP(tp.mup(5), 3, 1, lr_mult=[1, 2, 3, 4, 5, 6]).finite_constants(64, lr=0.1)
    np.testing.assert_allclose(np.divide(c.lr, plain.lr), [1] + [4 ** -0.25] * 4 + [1])
    assert net.limit_constants(0.1).eta[2] == pytest.approx(0.1 * 3 / 4 ** 0.25)


@pytest.mark.parametrize("kw, match", [
    (dict(alpha=float("nan")), "alpha = nan must be a finite number"),
    (dict(gamma="fast"), "gamma = 'fast' must be a number"),
    (dict(block_depth=3), "block_depth = 3 exceeds the largest supported value 2"),
    (dict(phi_inside=1), "phi_inside = 1 must be True or False"),
    (dict(phi_inside=True), "needs block_depth=2, got block_depth = 1"),
])
def test_bad_residual_settings_are_refused(kw, match):
    with pytest.raises(tp.SpecError, match=match):
        tp.Residual(**kw)


def test_residual_networks_need_whole_blocks():
    with pytest.raises(tp.SpecError, match=r"need L = 1 \+ K·1 hidden layers .* got L = 1"):
        tp.MLP(tp.mup(1), 2, 1, residual=tp.Residual())
    with pytest.raises(tp.SpecError, match=r"groups of 2: they need L = 1 \+ K·2 .* got L = 4"):
        tp.MLP(tp.mup(4), 2, 1, residual=tp.Residual(block_depth=2))
    net = tp.MLP(tp.mup(5), 2, 1, residual=tp.Residual(1.0, block_depth=2))    # K = 2
    assert net.skips == (-1, -1, 0, -1, 2, -1) and net.branch == (1, 1, 0.5, 1, 0.5, 1)
    with pytest.raises(tp.SpecError, match="residual must be a tp.Residual"):
        tp.MLP(tp.mup(2), 2, 1, residual=0.5)


def _loss(W, X, Y, net, alpha):
    """½ mean_i ‖f(ξ_i) − y_i‖², the residual network written out block by block."""
    c, depth = net.branch[net.residual.block_depth], net.residual.block_depth
    h = X @ W[0].T
    for k in range(net.residual.blocks(net.L)):
        if depth == 1:
            h = h + c * (np.tanh(h) @ W[1 + k].T)
        else:                                      # h + c W_b φ(W_a φ(h))
            u = np.tanh(h) @ W[1 + 2 * k].T
            h = h + c * (np.tanh(u) @ W[2 + 2 * k].T)
    f = alpha * np.tanh(h) @ W[-1].T
    return 0.5 * np.mean(np.sum((f - Y) ** 2, axis=1))


@pytest.mark.parametrize("L, res", [(4, tp.Residual(0.5, 0.3)),
                                    (5, tp.Residual(1.0, -0.5, block_depth=2))],
                         ids=["blocks of 1", "blocks of 2"])
def test_the_finite_step_is_gradient_descent_on_the_residual_network(L, res):
    """One SGD step moves each W^l by its rate times the gradient of the loss written out
    above (central differences, every layer)."""
    rng = np.random.default_rng(0)
    net = tp.MLP(tp.mup(L), 3, 2, phi="tanh", residual=res)
    X, Y = rng.standard_normal((2, 3)), rng.standard_normal((2, 2))
    nw = FiniteNetwork(net, 12, 0.1, 0, numpy_backend(), np.float64)
    W0 = [w.copy() for w in nw.W]
    hs, xs, f = nw.forward(X, 0)
    nw.step(hs, xs, (f - Y) / 2)
    eps = 1e-6
    for l in range(net.L + 1):
        grad = (W0[l] - nw.W[l]) / nw.const.lr[l]
        for i, j in ((0, 0), (1, 2), (5, 1)):
            if i >= W0[l].shape[0] or j >= W0[l].shape[1]:
                continue
            Wp = [w.copy() for w in W0]
            Wp[l][i, j] += eps
            Wm = [w.copy() for w in W0]
            Wm[l][i, j] -= eps
            fd = (_loss(Wp, X, Y, net, nw.alpha) - _loss(Wm, X, Y, net, nw.alpha)) / (2 * eps)
            assert grad[i, j] == pytest.approx(fd, rel=1e-6, abs=1e-10)


@pytest.mark.parametrize("alpha", [0.5, 1.0])
@pytest.mark.parametrize("K", [2, 4])
def test_blocks_of_two_at_initialization(K, alpha):
    """φ = id, σ = 1: a block h + c W_b W_a h multiplies E‖h‖² by 1 + c² = 1 + K^{−2α}."""
    net = tp.MLP(tp.mup(1 + 2 * K), 2, 1, phi="id",
                 residual=tp.Residual(alpha, 0.0, block_depth=2))
    tr = tp.simulate_limit(net, tp.Routine(lr=0.1, **D1), record=("stats",))
    h = tr.stats["h_rms"][0] ** 2
    np.testing.assert_allclose(h[2::2] / h[:-1:2], 1 + K ** (-2 * alpha), rtol=1e-12)
    np.testing.assert_allclose(h[-1] / h[0], (1 + K ** (-2 * alpha)) ** K, rtol=1e-12)


@pytest.mark.parametrize("K", [1, 2, 4, 8])
def test_the_linear_limit_at_initialization_grows_like_one_plus_one_over_k(K):
    """α = ½, σ = 1 (hidden weights of variance 1/n): E‖h^{l+1}‖² = (1 + 1/K) E‖h^l‖², so
    ‖h^L‖²/‖h^1‖² = (1 + 1/K)^K, in the exact engine's second moments."""
    net = tp.MLP(tp.mup(K + 1), 2, 1, phi="id", residual=tp.Residual(0.5, 0.0))
    tr = tp.simulate_limit(net, tp.Routine(lr=0.1, **D1), record=("stats",))
    h = tr.stats["h_rms"][0] ** 2                               # (L, E)
    np.testing.assert_allclose(h[-1] / h[0], (1 + 1 / K) ** K, rtol=1e-12)
    np.testing.assert_allclose(h[1:] / h[:-1], 1 + 1 / K, rtol=1e-12)


@pytest.mark.parametrize("opt, depth", [(None, 1), (tp.Muon(), 1), (None, 2)],
                         ids=["sgd", "muon", "sgd, blocks of 2"])
def test_exact_linear_residual_limit_matches_monte_carlo(opt, depth):
    exps = "sgd" if opt is None else opt.exponents
    net = tp.MLP(tp.mup(5 if depth == 2 else 4, optimizer=exps), 3, 2, phi="id",
                 residual=tp.Residual.depth_mup(exps, block_depth=depth))
    r = tp.Routine(lr=0.3 if opt is None else 0.05, optimizer=opt, **N8_LONG)
    exact, mc, q = exact_against_monte_carlo(net, r)
    if opt is None:                      # the comparison tells a plain network apart
        plain = tp.simulate_limit(tp.MLP(net.param, 3, 2, phi="id"), r)
        assert np.any(np.abs(plain.f_eval[1:] - mc.f_eval[1:]) > q * mc.f_eval_se[1:])


def _finite_against_limit(net, r, phi):
    """(mean of 6 finite nets at width 4096, the t bound of its distance to the limit,
    the limit) after every step: exact for φ = id (the seeds' 5 dof), Monte Carlo of
    2^14 particles × 8 replicates otherwise (Welch's dof)."""
    kw = {} if phi == "id" else dict(particles=2 ** 14, replicates=8)
    lim = tp.simulate_limit(net, r, **kw)
    F = np.array([tp.train_finite(net, r, 4096, seed=s, record=()).f_eval for s in range(6)])
    mean, se = F.mean(0)[1:], F.std(0, ddof=1)[1:] / np.sqrt(6)
    lse = np.zeros_like(se) if phi == "id" else lim.f_eval_se[1:]
    dof = 5 if phi == "id" else welch_dof(se, 5, lse, lim.status.se_dof)
    return mean, t_quantile(dof) * np.hypot(se, lse), lim.f_eval[1:], kw


@pytest.mark.slow
@pytest.mark.parametrize("phi", ["id", "tanh"])
def test_residual_limit_matches_finite_networks_at_width_4096(phi):
    """μP with Depth-μP blocks (K = 2, SGD): 6 finite nets at width 4096 against the limit
    (exact for φ = id, Monte Carlo for tanh) within the t bound at every evaluated step."""
    net = tp.MLP(tp.mup(3), 3, 2, phi=phi, residual=tp.Residual.depth_mup("sgd"))
    mean, bound, limit, _ = _finite_against_limit(net, tp.Routine(lr=0.3, **N8_LONG), phi)
    assert np.all(np.abs(mean - limit) <= bound)


@pytest.mark.slow
@pytest.mark.parametrize("phi", ["id", "tanh"])
def test_phi_inside_the_branches_limit_matches_finite_networks_at_width_4096(phi):
    """Pre-norm blocks with φ inside the branches only, h + K^(−α) W_b φ(W_a N(h)) and the
    readout on N(h^L) (K = 2): 6 finite nets at width 4096 within the t bound of the limit
    (exact for φ = id, Monte Carlo for tanh) at every evaluated step; the limit of the same
    blocks with φ on the stream, x = φ(N(h)), lies outside it (σ = 1.5, so that even for
    φ = id the inner layer's norm, dividing by about σ, changes the branch)."""
    def net(inside):
        return tp.MLP(tp.mup(5), 3, 2, phi=phi, norm="layer", sigma=1.5,
                      residual=tp.Residual(0.5, 0.0, 2, phi_inside=inside))
    r = tp.Routine(lr=0.5, **N8_LONG)
    mean, bound, limit, kw = _finite_against_limit(net(True), r, phi)
    assert np.all(np.abs(mean - limit) <= bound)
    outside = tp.simulate_limit(net(False), r, **kw).f_eval[1:]
    assert np.any(np.abs(mean - outside) > bound)


X4 = np.random.default_rng(0).standard_normal((4, 3))


def _residual_kernels(X, sigma, c, lr_mult):
    """NNGP and NTK of a residual net (L = 3, one output) written out for φ = id, from the
    definitions: h^{l+1} = h^l + c W^{l+1} h^l, so covariances add along the skip, and each
    layer's kernel is its gradient kernel times its input kernel."""
    G = X @ X.T
    S1 = sigma[0] ** 2 * G
    S2 = S1 + c ** 2 * sigma[1] ** 2 * S1
    S3 = S2 + c ** 2 * sigma[2] ** 2 * S2
    P3 = sigma[3] ** 2 * np.ones_like(G)             # φ′ = 1
    P2 = P3 + c ** 2 * sigma[2] ** 2 * P3
    P1 = P2 + c ** 2 * sigma[1] ** 2 * P2
    K = [P1 * G, c ** 2 * P2 * S1, c ** 2 * P3 * S2, S3]
    return sigma[3] ** 2 * S3, sum(m * k for m, k in zip(lr_mult, K))


def test_residual_kernels_of_a_linear_network_are_the_written_out_recursion():
    sigma, lr_mult = [1.0, 0.8, 1.3, 0.9], [1.0, 2.0, 0.5, 1.5]
    net = tp.MLP(tp.ntp(3), 3, 1, phi="id", sigma=sigma, lr_mult=lr_mult,
                 residual=tp.Residual(0.5, 0.5))                     # K = 2
    c, k = 2 ** -0.5, 2 ** -0.5
    nngp, ntk = _residual_kernels(X4, sigma, c, [1.0, 2.0 * k, 0.5 * k, 1.5])
    np.testing.assert_allclose(tp.nngp(net, X4), nngp, rtol=1e-13)
    np.testing.assert_allclose(tp.ntk(net, X4), ntk, rtol=1e-13)
    # the kernel-regime engine descends with it
    r = tp.Routine(X4, np.ones((4, 1)), lr=0.1, eval_inputs=X4[:2])
    assert tp.simulate_limit(net, r).meta["method"] == "kernel_gd"


@pytest.mark.parametrize("phi, L, res", [
    ("tanh", 4, tp.Residual(0.5, 0.3)), ("relu", 4, tp.Residual(0.5, 0.3)),
    ("tanh", 5, tp.Residual(1.0, 0.0, block_depth=2)),
    ("tanh", 5, tp.Residual(1.0, 0.0, block_depth=2, phi_inside=True))],
    ids=["tanh", "relu", "tanh, blocks of 2", "tanh, phi inside the branches"])
def test_residual_ntk_is_the_limit_of_the_empirical_one(phi, L, res):
    """8 finite networks at width 4096 (their empirical NTK through the skips) against the
    limiting NTK within the t bound of their mean, plus the O(1/n) finite-width bias."""
    net = tp.MLP(tp.ntp(L), 3, 1, phi=phi, residual=res)
    Ks = np.array([tp.empirical_ntk(net, X4, width=4096, seed=s) for s in range(8)])
    mean, se = Ks.mean(axis=0), Ks.std(axis=0, ddof=1) / np.sqrt(len(Ks))
    limit = tp.ntk(net, X4)
    assert np.all(np.abs(mean - limit) < t_quantile(7) * se + 2e-3 * np.abs(limit).max())
    plain = tp.ntk(tp.MLP(tp.ntp(L), 3, 1, phi=phi), X4)
    assert np.any(np.abs(mean - plain) > t_quantile(7) * se + 2e-3 * np.abs(limit).max())


def test_what_residual_networks_do_not_have_yet_is_refused():
    r = tp.Routine(lr=0.5, **D1)
    mup = tp.MLP(tp.mup(2), 2, 1, residual=tp.Residual())
    with pytest.raises(tp.SpecError, match="zdot='tangent' follows plain MLPs only"):
        tp.simulate_limit(mup, r, zdot="tangent")


def test_the_residual_blocks_are_part_of_the_problem():
    r = tp.Routine(lr=0.5, **D1)
    meta = problem_meta(Problem(tp.MLP(tp.mup(3), 2, 1, residual=tp.Residual(1, 0)), r))
    assert meta["residual"] == {"alpha": 1.0, "gamma": 0.0, "block_depth": 1}
    assert problem_meta(Problem(tp.MLP(tp.mup(3), 2, 1), r))["residual"] is None


def test_experiment_files_take_residual_blocks():
    from tp_limits.experiment import ExperimentError, build
    cfg = {"parametrization": {"preset": "mup", "L": 3}, "data": {"generator": "d1"},
           "routine": {"lr": 0.5, "steps": 3},
           "model": {"residual_alpha": 0.5, "residual_gamma": 0.25}}
    assert build(cfg).net.residual == tp.Residual(0.5, 0.25)
    cfg["parametrization"]["L"] = 5
    cfg["model"]["residual_block_depth"] = 2
    assert build(cfg).net.residual == tp.Residual(0.5, 0.25, block_depth=2)
    cfg["model"]["residual_phi_inside"] = True
    assert build(cfg).net.residual == tp.Residual(0.5, 0.25, 2, phi_inside=True)
    cfg["model"] = {"residual_gamma": 1.0}
    with pytest.raises(ExperimentError, match="residual_gamma needs model.residual_alpha"):
        build(cfg)


def test_networks_rebuild_at_another_depth():
    for preset in (tp.mup, tp.sp, tp.ntp):
        assert tp.MLP(preset(3), 2, 1).with_depth(6).param == preset(6)
    net = tp.MLP(tp.mup(3, optimizer="adam"), 2, 1, sigma=[1.0, 0.5, 0.5, 2.0],
                 residual=tp.Residual.completep("adam"))
    deep = net.with_blocks(4)
    assert deep.L == 9 and deep.param == tp.mup(9, optimizer="adam")
    assert deep.sigma == (1.0,) + (0.5,) * 8 + (2.0,) and deep.residual == net.residual
    with pytest.raises(tp.SpecError, match="hidden layers' sigma differ"):
        tp.MLP(tp.mup(3), 2, 1, sigma=[1, 2, 3, 4]).with_depth(5)
    with pytest.raises(tp.TPError, match="no hidden matrix to repeat"):
        tp.MLP(tp.mup(1), 2, 1).with_depth(3)
    with pytest.raises(tp.SpecError, match="with_blocks needs a residual network"):
        tp.MLP(tp.mup(3), 2, 1).with_blocks(2)


def _depth_task():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    Y = np.tanh(X @ rng.standard_normal((3, 1)))
    return tp.Routine(X, Y, lr=1.0, batch_size=2, eval_inputs=X[:2], eval_targets=Y[:2])


@pytest.mark.filterwarnings("ignore:lr_sweep")
def test_depth_sweep_finds_the_optimum_at_every_depth():
    """Exact linear limits (deterministic): with α = 1 and no rate compensation (γ = 0) the
    blocks' summed update shrinks like 1/K, so the optimal rate grows with K."""
    net = tp.MLP(tp.mup(2), 3, 1, phi="id", residual=tp.Residual(1.0, 0.0))
    ds = tp.depth_sweep(net, _depth_task(), [2.0 ** k for k in range(-3, 6)], [1, 2, 4, 8],
                        metric="eval_loss", refine=4, progress=False)
    assert ds.depths == (1, 2, 4, 8)
    lr = [ds.optimal_lr[K]["inf"][0] for K in ds.depths]
    assert np.all(np.diff(lr) > 0) and ds.slope() > 0.1
    assert len(ds.table().rows) == 4
    import matplotlib
    matplotlib.use("Agg")
    assert ds.plot() is not None


def test_depth_sweep_refuses_what_it_cannot_sweep():
    r = _depth_task()
    with pytest.raises(tp.SpecError, match="depth_sweep needs a residual network"):
        tp.depth_sweep(tp.MLP(tp.mup(2), 3, 1), r, [0.1, 1, 10], [1, 2])
    net = tp.MLP(tp.mup(2), 3, 1, residual=tp.Residual())
    with pytest.raises(tp.SpecError, match="at least two distinct block counts"):
        tp.depth_sweep(net, r, [0.1, 1, 10], [2, 2])
    with pytest.raises(tp.SpecError, match="depths"):
        tp.depth_sweep(net, r, [0.1, 1, 10], [1, 0])
    with pytest.raises(tp.SpecError, match="depths = '12' must be a list"):
        tp.depth_sweep(net, r, [0.1, 1, 10], "12")
    # every depth's sweep is checked before the first runs: the deepest one's memory, and
    # the arguments lr_sweep refuses
    ran = []
    import tp_limits.analysis.depth_sweep as ds_module
    real = ds_module.lr_sweep
    try:
        ds_module.lr_sweep = lambda *a, **k: ran.append(1)
        with pytest.raises(tp.MemoryBudgetError, match="at K = 400 blocks"):
            tp.depth_sweep(net, r, [0.1, 1, 10], [1, 2, 400], widths=[32, 64],
                           particles=2 ** 20)
        with pytest.raises(tp.SpecError, match="at K = 1 blocks: lr_sweep sets"):
            tp.depth_sweep(net, r, [0.1, 1, 10], [1, 2], widths=[32], record=("stats",))
    finally:
        ds_module.lr_sweep = real
    assert not ran
    with pytest.raises(tp.SpecError, match=r"slope\(999\): this study has no optimum"):
        tp.DepthSweep("x", (), {}).slope(999)


@pytest.mark.filterwarnings("ignore:lr_sweep")
def test_an_interrupted_depth_sweep_says_so_and_what_it_skipped(monkeypatch):
    """Ctrl-C in the second depth's sweep: the study keeps the depths that ran, flags
    ``interrupted``, names the depths never started and warns."""
    import tp_limits.analysis.depth_sweep as ds_module
    real = ds_module.lr_sweep

    def sweep(net, routine, lrs, **kw):
        out = real(net, routine, lrs, **kw)
        if net.L > 2:                              # K = 2: as if Ctrl-C stopped it
            object.__setattr__(out, "interrupted", True)
        return out
    monkeypatch.setattr(ds_module, "lr_sweep", sweep)
    net = tp.MLP(tp.mup(2), 3, 1, phi="id", residual=tp.Residual(1.0, 0.0))
    with pytest.warns(RuntimeWarning, match=r"interrupted at K = 2.*not started: \(4,\)"):
        ds = tp.depth_sweep(net, _depth_task(), [0.5, 1.0, 2.0], [1, 2, 4], refine=0,
                            progress=False)
    assert ds.interrupted and ds.depths == (1, 2) and ds.skipped == (4,)


@pytest.mark.parametrize("residual, optimizer", [
    (tp.Residual(0.5, -1.0), "sgd"), (tp.Residual(1.0, 0.0), "sgd"),
    (tp.Residual.depth_mup("adam"), "adam")],
    ids=["alpha 1/2 gamma -1", "alpha 1 gamma 0", "depth-mup adam"])
def test_depth_check_measures_the_predicted_exponents_in_k(residual, optimizer):
    """One step of K = 4…64 blocks at width 512 (4 seeds): the block update, the feature
    change and the output change scale like K^{−(pα+γ)}, K^{max(0, 1−pα−γ)} and the same,
    each within 0.15 over the three largest depths (docs/theory.md §12.5); one class each
    (Depth-μP with SGD runs in examples/11_depth.ipynb, with the same bound)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 3)) / np.sqrt(3)
    adam = optimizer == "adam"
    r = tp.Routine(X, np.tanh(X[:, :1] - X[:, 1:2]), lr=0.01 if adam else 0.1, batch_size=2,
                   eval_inputs=X[:4], optimizer=tp.Adam() if adam else None)
    net = tp.MLP(tp.mup(3, optimizer=optimizer), 3, 1, phi="tanh", residual=residual)
    dc = tp.depth_check(net, r, [4, 8, 16, 32, 64], width=512, seeds=4, executor="serial")
    verdict = residual.classify(optimizer).verdict
    assert verdict == {0: "Depth-μP", 1: "unstable in training", -1: "trivial in depth"}[
        int(residual.classify(optimizer).summed_update)]
    for q, (slope, _) in dc.slopes.items():
        assert abs(slope - dc.predicted[q]) < 0.15, (q, slope, dc.predicted[q])
    assert not dc.mismatches and "exponent in K" in str(dc.table())


def test_depth_check_refuses_what_it_cannot_fit():
    net = tp.MLP(tp.mup(3), 3, 1, phi="tanh")
    r = tp.Routine(lr=0.1, **N8_LONG)
    with pytest.raises(tp.SpecError, match="residual network"):
        tp.depth_check(net, r, [2, 4])
    res = tp.MLP(tp.mup(3), 3, 2, phi="tanh", residual=tp.Residual(0.5, 0.0))
    with pytest.raises(tp.SpecError, match="at least two depths"):
        tp.depth_check(res, r, [4, 4])
    shallow = tp.MLP(tp.mup(3), 3, 2, phi="tanh", residual=tp.Residual(0.25, 0.0))
    assert set(tp.analysis.depth_check.depth_exponents(shallow).values()) == {None}


@pytest.mark.parametrize("optimizer, block_depth",
                         [("sgd", 1), ("adam", 1), ("muon", 1), ("sgd", 2), ("adam", 2)])
def test_depth_classes_on_a_21_by_21_grid_follow_the_written_inequalities(optimizer,
                                                                          block_depth):
    """Every (α, γ) of the default grid (α = 0…2, γ = −1…1, steps of 1/10) against the
    table of docs/theory.md §12.6 written out here on its own: α < ½ unstable at init;
    then pα + γ < 1 unstable in training, > 1 trivial in depth; on the line, α = ½
    Depth-μP, α = 1 with blocks of two CompleteP, α > 1 with blocks of two unfaithful, else
    redundant."""
    from fractions import Fraction as Fr

    from tp_limits.abc.depth import depth_grid
    p = 2 if optimizer == "sgd" else 1
    grid = depth_grid(optimizer, block_depth)
    assert len(grid) == 21 * 21
    for (a, g), verdict in grid.items():
        s = p * a + g
        expected = ("unstable at init" if a < Fr(1, 2) else "unstable in training" if s < 1
                    else "trivial in depth" if s > 1 else "Depth-μP" if a == Fr(1, 2)
                    else "CompleteP" if a == 1 and block_depth == 2
                    else "unfaithful" if a > 1 and block_depth == 2 else "redundant")
        assert verdict == expected, (a, g, verdict)
    assert sum(v == "Depth-μP" for v in grid.values()) == 1
    preset = tp.Residual.depth_mup(optimizer, block_depth).classify(optimizer)
    assert preset.verdict == "Depth-μP" and preset.maximal
    assert tp.Residual.completep(optimizer, block_depth).classify(optimizer).verdict == \
        ("CompleteP" if block_depth == 2 else "redundant")


def test_depth_phase_diagram_draws_the_classes():
    import matplotlib
    matplotlib.use("Agg")
    from tp_limits.analysis.phase_diagram import depth_phase_diagram
    fig = depth_phase_diagram("adam", 2)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "Depth-μP" in labels and "CompleteP" in labels
    with pytest.raises(tp.SpecError, match="optimizer"):
        tp.Residual(0.5, 0.0).classify("rmsprop")


@pytest.mark.parametrize("residual, L, bias", [
    (None, 2, None), (tp.Residual.depth_mup("sgd"), 4, None),
    (tp.Residual.completep("sgd"), 5, None), (tp.Residual(0.7, 0.3), 3, tp.Bias(0.5, 2.0))],
    ids=["plain", "depth-mup", "completep blocks of 2", "alpha 0.7 with biases"])
def test_the_exact_linear_limits_first_step_is_kernel_descent(residual, L, bias):
    """Two independent computations of the same number: the exact linear engine's f̊_1
    (Gaussian primitives, skips, Ż) and one step of descent with the kernel recursion of
    docs/theory.md §12.3 over every layer (f̊_0 = 0 in μP, so f̊_1 = −η K(ξ, ξ_0) χ_0), to
    1e-13, with per-layer σ and rate multipliers."""
    from tp_limits.spec import Problem
    net = tp.MLP(tp.mup(L), 3, 2, phi="id", residual=residual, bias=bias,
                 sigma=[1.1, 0.9, 1.2, 0.8, 1.0, 1.3][:L + 1],
                 lr_mult=[1.0, 2.0, 0.5, 1.5, 1.0, 0.7][:L + 1])
    r = tp.Routine(lr=0.3, **N8_LONG)
    lim = tp.simulate_limit(net, r)
    assert lim.meta["method"] == "exact" and not np.any(lim.f_eval[0])
    Xb, Yb = Problem(net, r).batch(0)
    layers = tuple(range(1, L + 2)) + (() if bias is None else
                                       tuple(f"b{l}" for l in range(1, L + 2)))
    K = tp.ntk(net, N8_LONG["eval_inputs"], Xb, layers=layers)
    np.testing.assert_allclose(lim.f_eval[1], -0.3 * K @ (-Yb / len(Yb)), rtol=1e-13,
                               atol=1e-14)


def _published_class(alpha, gamma_update):
    """The published classification of residual networks with blocks of one (its claims on
    stability at initialization and in training, nontriviality, faithfulness and
    redundancy, and its figure of regions), in its own exponents: branch multiplier
    L^{−α}, parameter update L^{−γ} (docs/theory.md §12.6)."""
    from fractions import Fraction as Fr
    if alpha < Fr(1, 2):
        return "unstable at init"
    if alpha + gamma_update < 1:
        return "unstable in training"
    if alpha + gamma_update > 1:
        return "trivial in depth"
    if alpha == Fr(1, 2):
        return "Depth-μP"
    return "unfaithful" if alpha > 1 else "redundant"


@pytest.mark.parametrize("optimizer, differences", [("sgd", 0), ("adam", 10)])
def test_depth_classes_against_the_published_classification(optimizer, differences):
    """The 21 × 21 grid against the published classes. Its γ is the exponent of the update:
    this package's rate exponent plus (p − 1)α (SGD's gradient carries the multiplier once
    more). The one difference is of architecture: the published blocks φ(W x) feed W's
    output to a nonlinearity, so α > 1 on the maximal line is unfaithful there; these
    blocks W φ(h) do not, and stay redundant. With blocks of two the inner W_a φ(h) is fed
    to φ, and the same points are unfaithful here too."""
    from tp_limits.abc.depth import BRANCH_POWERS, depth_grid
    p = BRANCH_POWERS[optimizer]
    grid = depth_grid(optimizer, 1)
    differ = {}
    for (a, g), verdict in grid.items():
        published = _published_class(a, g + (p - 1) * a)
        if verdict != published:
            differ[(a, g)] = (verdict, published)
    assert len(differ) == differences
    assert set(differ) == {(a, g) for a, g in grid if a > 1 and p * a + g == 1}
    assert set(differ.values()) <= {("redundant", "unfaithful")}
    two = depth_grid(optimizer, 2)
    assert all(two[point] == "unfaithful" for point in differ)
    assert sum(v == "unfaithful" for v in two.values()) == differences


def _published_linear_recursion(xi, y, L):
    """f̊_t of the published finite-depth recursion for a linear residual network (its
    Γ and C functions, written out from its lemma): x⁰ = ξ U, xˡ = xˡ⁻¹ + L^{−½} Wˡ xˡ⁻¹,
    f = ⟨x^L, nV⟩, U and V fixed, Wˡ of variance 1/n, SGD with rate 1 on one input per
    step and ℓ = ½(f − y)².  Γ[a][t, l] holds the coefficients of xˡ_t (a = 0) or δxˡ_t
    (a = 1) on U and nV (Gu) and, times √L, on the hats of layer m at step r, forward
    (b = 0) or backward (b = 1) (Gh); C[0][m] = ⟨x^{m−1}_t x^{m−1}_s⟩ and
    C[1][m] = ⟨δx^m_t δx^m_s⟩ are the hats' covariances."""
    T = len(xi)
    Gu = np.zeros((2, T, L + 1, 2))
    Gh = np.zeros((2, T, L + 1, T, 2, L + 1))
    C = np.zeros((2, L + 1, T, T))
    f = np.zeros(T)

    def cov(a, l, t, s):
        """Σ_{t′, s′, b} ∫ Γ_{t,t′,a,b}(l, q) C_{t′,s′,b}(q) Γ_{s,s′,a,b}(l, q) dq."""
        out = Gu[a, t, l] @ Gu[a, s, l]
        for b in (0, 1):
            out += np.einsum("im,mij,jm->", Gh[a, t, l, :, b, 1:], C[b, 1:],
                             Gh[a, s, l, :, b, 1:]) / L
        return out

    for t in range(T):
        Gu[0, t, 0, 0] = xi[t]
        for l in range(1, L + 1):                    # forward
            for s in range(t + 1):
                C[0, l, t, s] = C[0, l, s, t] = cov(0, l - 1, t, s)
            Gu[0, t, l], Gh[0, t, l] = Gu[0, t, l - 1], Gh[0, t, l - 1]
            Gh[0, t, l, t, 0, l] += 1.0
            for s in range(t):
                w = (Gh[0, t, l - 1, s, 1, l] - C[0, l, t, s]) / L
                Gu[0, t, l] += w * Gu[1, s, l]
                Gh[0, t, l] += w * Gh[1, s, l]
        f[t] = Gu[0, t, L, 1]
        Gu[1, t, L, 1] = f[t] - y[t]
        for l in range(L, 0, -1):                    # backward
            for s in range(t + 1):
                C[1, l, t, s] = C[1, l, s, t] = cov(1, l, t, s)
            Gu[1, t, l - 1], Gh[1, t, l - 1] = Gu[1, t, l], Gh[1, t, l]
            Gh[1, t, l - 1, t, 1, l] += 1.0
            for s in range(t):
                w = (Gh[1, t, l, s, 0, l] - C[1, l, t, s]) / L
                Gu[1, t, l - 1] += w * Gu[0, s, l - 1]
                Gh[1, t, l - 1] += w * Gh[0, s, l - 1]
    return f


@pytest.mark.parametrize("K", [1, 2, 4, 8])
def test_the_exact_linear_residual_engine_is_the_published_recursion(K):
    """Depth-μP (α = ½, γ = 0), SGD at rate 1, the input layer and the readout frozen
    (lr_mult 0): the exact engine's outputs on the training inputs equal the published
    recursion's, written out above, to 1e-10 at every step."""
    rng = np.random.default_rng(11)
    T = 7
    xi = rng.choice([-1.0, 1.0], T) * rng.uniform(0.6, 1.4, T)
    y = rng.standard_normal(T)
    published = _published_linear_recursion(xi, y, K)
    net = tp.MLP(tp.mup(K + 1), 1, 1, phi="id", residual=tp.Residual.depth_mup("sgd"),
                 lr_mult=[0.0] + [1.0] * K + [0.0])
    tr = tp.simulate_limit(net, tp.Routine(xi[:, None], y[:, None], lr=1.0, batch_size=1))
    assert np.max(np.abs(published[1:])) > 0.1        # the network has moved
    np.testing.assert_allclose(tr.f_train[:, 0, 0], published, rtol=0, atol=1e-10)
