"""SGD with momentum and weight decay: the recursions, finite nets, every limit engine.

Monte Carlo comparisons use the Student-t bound of conftest (probability 1e-4 of
failing on a true difference of zero), with the standard error's own degrees of
freedom; finite nets enter through their seed mean and its standard error.
"""
import numpy as np
import pytest
from conftest import D1, N8_LONG, finite_mean, t_quantile

import tp_limits as tp
from tp_limits.engine.backend import numpy_backend
from tp_limits.finite.network import FiniteNetwork

OPT = tp.SGD(momentum=0.8, weight_decay=0.3)
NESTEROV = tp.SGD(momentum=0.8, weight_decay=0.3, nesterov=True)


@pytest.mark.parametrize("mu, delta", [(0.0, 0.0), (0.9, 0.0), (0.0, 0.2), (0.8, 0.12),
                                       (0.5, 1.0)])
def test_schedule_reproduces_the_buffer_recursion(mu, delta):
    """W_t = ρ_t W_0 − Σ_s C[t, s] γ G_s against the heavy-ball buffers run on random
    matrices (any linear state obeys the same scalar coefficients), and against the
    recursion of docs/theory.md §10.2 written out (bit for bit: the schedule is derived
    from the optimizer's own rule, whose additions are the recursion's)."""
    rng = np.random.default_rng(0)
    T = 7
    opt = tp.SGD(momentum=mu, weight_decay=1.0)          # a rule with its buffer
    W0, G = rng.standard_normal((4, 3)), rng.standard_normal((T, 4, 3))
    W, state, path = W0, opt.rule.zeros(W0), [W0]
    for t in range(T):
        W, state = opt.rule.apply(W, G[t], state, opt.coordinate(1.0, 1.0, delta, t + 1)[1])
        path.append(W)
    rho, C = opt.schedule(delta, T)
    rho_ref, C_ref, pi, E = np.ones(T + 1), np.zeros((T + 1, T)), 0.0, np.zeros(T)
    for t in range(T):
        pi = mu * pi + delta * rho_ref[t]
        E = mu * E - delta * C_ref[t]
        E[t] = 1.0
        rho_ref[t + 1] = rho_ref[t] - pi
        C_ref[t + 1] = C_ref[t] + E
    assert np.array_equal(rho, rho_ref) and np.array_equal(C, C_ref)
    assert np.array_equal(opt.init_factor(delta, T), rho)
    for t in range(T + 1):
        assert np.allclose(path[t], rho[t] * W0 - np.einsum("s,sij->ij", C[t], G), atol=1e-12)
    assert np.all(np.triu(C[:T]) == 0)                      # only earlier gradients
    if mu == delta == 0.0:
        assert np.all(rho == 1) and np.array_equal(C[1:], np.tril(np.ones((T, T))))


def _w_space_reference(net, routine, n, seed, opt):
    """A one-hidden-layer linear net trained in w-space with PyTorch's SGD rules
    (d = ∇_w + λ_l w, buf ← μ buf + d, w ← w − s_t lr_l buf, or with Nesterov
    w ← w − s_t lr_l (d + μ buf); lr_l = η n^{-c_l}, λ_l = λ n^{c_l}, s_t the factor of a
    learning-rate schedule, which torch's schedulers put on the step), written from the
    definitions, independently of FiniteNetwork's W-space form."""
    a, b, c = (tuple(float(x) for x in v) for v in net.param._fractions)
    rng = np.random.default_rng(seed)
    d = net.d_in
    # FiniteNetwork draws W^l = σ n^{-(a+b)} G in layer order: the same G here
    G1, G2 = rng.standard_normal((n, d)), rng.standard_normal((1, n))
    w = [G1 * n ** -b[0], G2 * n ** -b[1]]
    buf = [np.zeros_like(x) for x in w]
    lr = [routine.lr * n ** -c[0], routine.lr * n ** -c[1]]
    lam = [opt.weight_decay * n ** c[0], opt.weight_decay * n ** c[1]]
    X, Y = routine.X, routine.Y
    for t in range(routine.steps):
        W1, W2 = n ** -a[0] * w[0], n ** -a[1] * w[1]
        x = X[t:t + 1]
        f = W2 @ (W1 @ x.T)
        chi = (f - Y[t]).T                                       # mse gradient, B = 1
        gW2, gW1 = chi.T @ (W1 @ x.T).T, (W2.T @ chi.T) @ x
        grads = [n ** -a[0] * gW1, n ** -a[1] * gW2]            # ∇_w = n^{-a} ∇_W
        for l in range(2):
            d_p = grads[l] + lam[l] * w[l]
            buf[l] = opt.momentum * buf[l] + d_p
            w[l] = w[l] - routine.rates[t] * lr[l] * (
                d_p + opt.momentum * buf[l] if opt.nesterov else buf[l])
    return [n ** -a[0] * w[0], n ** -a[1] * w[1]]


@pytest.mark.parametrize("lr", [0.3, [0.1, 0.3, 0.05]], ids=["constant", "schedule"])
@pytest.mark.parametrize("opt", [OPT, NESTEROV])
@pytest.mark.parametrize("param", [tp.mup(1), tp.ABC([0, 0], [0, 1], [-1, 1])])
def test_finite_network_is_pytorch_sgd_with_width_free_decay(param, opt, lr):
    net = tp.MLP(param, 2, 1, phi="id")
    r = tp.Routine(lr=lr, optimizer=opt, **D1)
    n = 64
    nw = FiniteNetwork(net, n, r.lr, 3, numpy_backend(), np.float64, optimizer=opt)
    P = tp.spec.Problem(net, r)
    for t in range(r.steps):
        Xb, Yb = P.batch(t)
        hs, xs, f = nw.forward(Xb, t)
        nw.step(hs, xs, f - Yb, r.rates[t])
    ref = _w_space_reference(net, r, n, 3, opt)
    for W, Wr in zip(nw.W, ref):
        assert np.allclose(W, Wr, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("opt", [OPT, NESTEROV])
@pytest.mark.parametrize("L", [1, 2])
def test_exact_linear_limits_match_monte_carlo(L, opt):
    """φ = id: the closed forms (one hidden layer; deep linear) against the particle
    engines run on the same linear network, within 5 standard errors (8 replicates).
    (The one-hidden-layer particles run on the array twin, so that no fused kernel is
    compiled for φ = id with momentum; the kernel is checked against the twin in
    test_limit_one_hidden_sweep.py.)"""
    net = tp.MLP(tp.mup(L), 3, 2, phi="id")
    r = tp.Routine(lr=0.4, optimizer=opt, **N8_LONG)
    exact = tp.simulate_limit(net, r)
    assert exact.meta["method"] == "exact"
    mc = tp.simulate_limit(net, r, method="monte_carlo", particles=2 ** 14, replicates=8, seed=1,
                           **({"kernel": "numpy"} if L == 1 else {}))
    bound = 5 * mc.f_eval_se[1:]
    assert np.all(np.abs(mc.f_eval[1:] - exact.f_eval[1:]) <= bound)
    plain = tp.simulate_limit(net, tp.Routine(lr=0.4, **N8_LONG))
    assert np.abs(plain.f_eval[-1] - exact.f_eval[-1]).max() > 20 * bound.max()



def test_deep_linear_limit_matches_finite_networks_at_width_8192():
    net = tp.MLP(tp.mup(2), 3, 2, phi="id")
    r = tp.Routine(lr=0.4, optimizer=OPT, **N8_LONG)
    exact = tp.simulate_limit(net, r)
    mean, se = finite_mean(net, r, 8192, 6)
    assert np.all(np.abs(mean[1:] - exact.f_eval[1:]) <= 3 * se[1:])


@pytest.mark.parametrize("L", [1, 2])
def test_tanh_limits_match_finite_networks_at_width_8192(L):
    """Momentum 0.8 and weight decay 0.3 (a shrink of 0.18 per step): the Monte Carlo
    limit against 6 finite nets, within 3 combined standard errors."""
    net = tp.MLP(tp.mup(L), 3, 2, phi="tanh")
    r = tp.Routine(lr=0.6, optimizer=OPT, **N8_LONG)
    lim = tp.simulate_limit(net, r, particles=2 ** 15, replicates=8, progress=False)
    mean, se = finite_mean(net, r, 8192, 6)
    combined = np.hypot(se[-1], lim.f_eval_se[-1])
    assert np.all(np.abs(mean[-1] - lim.f_eval[-1]) <= 3 * combined), (mean[-1], lim.f_eval[-1])
    plain = tp.simulate_limit(net, tp.Routine(lr=0.6, **N8_LONG), particles=2 ** 15,
                              replicates=8, progress=False)
    assert np.abs(plain.f_eval[-1] - lim.f_eval[-1]).max() > 10 * combined.max()


@pytest.mark.parametrize("nesterov", [False, True])
def test_kernel_regime_takes_momentum_networks_follow(nesterov):
    """NTP: kernel gradient descent with heavy-ball (or Nesterov) momentum in function
    space; each network against the recursion started from its own f_0: error ~ n^{-1/2}
    or faster."""
    net = tp.MLP(tp.ntp(2), 2, 1, phi="relu")
    r = tp.Routine(lr=0.5, optimizer=tp.SGD(momentum=0.7, nesterov=nesterov), **D1)
    study = tp.convergence(net, r, [256, 1024, 4096], seeds=8, progress=False)
    assert study.conditioned
    assert study.exponent <= -0.4, (study.exponent, study.rms)
    plain = tp.simulate_limit(net, tp.Routine(lr=0.5, **D1), f0="zero")
    heavy = tp.simulate_limit(net, r, f0="zero")
    assert np.abs(plain.f_eval[-1] - heavy.f_eval[-1]).max() > 0.05


@pytest.mark.parametrize("shift, slope", [(0.0, 0.0), (-0.5, -0.5)])
def test_weight_decay_exponents_by_coordinate_check(shift, slope):
    """μP in its a = 0 form, where the classifier's decay exponents c_l = (−1, 0, 1)
    differ per layer.  With λ n^{c_l} the decay changes every layer's h_rms by Θ(1) at
    every width (slope 0); with λ n^{c_l − 1/2} the change vanishes like n^{-1/2}."""
    param = tp.mup(2, form="a0")
    assert [str(e) for e in param.classify().weight_decay_exponents] == ["-1", "0", "1"]
    net = tp.MLP(param, 2, 1, phi="tanh")
    widths = [256, 1024, 4096]
    effects = []
    for n in widths:
        opt = tp.SGD(weight_decay=0.5 * n ** shift)
        runs = [tp.train_finite(net, tp.Routine(lr=0.5, optimizer=o, **D1), n, seed=0,
                                record=("stats",)).stats["h_rms"][-1] for o in (opt, tp.SGD())]
        effects.append(np.abs(runs[0] - runs[1]))                 # per layer
    slopes = np.polyfit(np.log(widths), np.log(np.array(effects)), 1)[0]
    assert slopes.shape == (2,) and np.all(np.array(effects) > 1e-4)
    assert np.all(np.abs(slopes - slope) < 0.15), slopes


def test_momentum_and_decay_refusals_name_the_fix():
    r = tp.Routine(lr=0.5, optimizer=tp.SGD(weight_decay=0.1), **D1)
    with pytest.raises(tp.UnsupportedError, match="kernel regime.*momentum is supported"):
        tp.simulate_limit(tp.MLP(tp.ntp(2), 2, 1, phi="relu"), r)
    with pytest.raises(tp.SpecError, match="zdot='stein'"):
        tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1), r, zdot="tangent")
    with pytest.raises(tp.SpecError, match="exponents are for sgd"):
        tp.train_finite(tp.MLP(tp.mup(2), 2, 1), tp.Routine(lr=0.5, optimizer=tp.Adam(), **D1),
                        16)


def test_adam_eps_is_width_free():
    """ε is in units of the Θ(1)-rescaled gradient entry: the finite net's w-unit ε is
    ε n^{-g_l} with the classifier's g_l (μP-Adam: g = (1/2, 1, 1/2) in TP4 form)."""
    param = tp.mup(2, optimizer="adam")
    assert [str(g) for g in param.classify().eps_exponents] == ["1/2", "1", "1/2"]
    net = tp.MLP(param, 2, 1)
    nw = FiniteNetwork(net, 400, 0.1, 0, numpy_backend(), np.float64,
                       optimizer=tp.Adam(eps=1e-3))
    eps = [nw.opt.eps * s for s in nw.const.eps_scale]        # what Adam's step uses
    assert np.allclose(eps, [1e-3 * 400 ** -0.5, 1e-3 / 400, 1e-3 * 400 ** -0.5])


# ---- Adam ------------------------------------------------------------------------------
def _adam_problem(L):
    """tanh μP-Adam, d = 3, d_out = 2, batch 2, 10 steps on a fixed teacher."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((20, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    Y = np.tanh(X @ rng.standard_normal((3, 2)))
    E = rng.standard_normal((3, 3))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    net = tp.MLP(tp.mup(L, optimizer="adam"), 3, 2, phi="tanh")
    r = tp.Routine(X, Y, lr=0.05, batch_size=2, eval_inputs=E,
                   optimizer=tp.Adam(eps=1e-4, betas=(0.9, 0.99)))
    return net, r


@pytest.mark.parametrize("L, widths, limit_kw", [
    (1, [256, 1024, 4096, 8192], dict(particles=200_000)),
    (2, [256, 512, 1024, 2048], dict(particles=2 ** 13, partners=128))])
def test_adam_finite_networks_converge_to_the_adam_limit(L, widths, limit_kw):
    """Finite μP-Adam nets (8 seeds per width) against the Adam limit: the per-network
    error falls with a fitted exponent in [−0.7, −0.3], and the widest nets' seed mean
    sits within 3 combined standard errors of the limit."""
    net, r = _adam_problem(L)
    lim = tp.simulate_limit(net, r, replicates=8, **limit_kw)
    study = tp.convergence(net, r, widths, seeds=8, limit=lim, keep_runs=True, record=())
    assert -0.7 <= study.exponent <= -0.3, (study.exponent, study.rms)
    F = np.array([run.f_eval[-1] for run in study.runs[-1]])
    se = np.hypot(F.std(axis=0, ddof=1) / np.sqrt(len(F)), lim.f_eval_se[-1])
    assert np.all(np.abs(F.mean(axis=0) - lim.f_eval[-1]) <= 3 * se)
    sgd = tp.MLP(tp.mup(L), 3, 2, phi="tanh")
    plain = tp.simulate_limit(sgd, tp.Routine(r.X, r.Y, lr=0.05, batch_size=2,
                                              eval_inputs=r.eval_inputs), particles=2 ** 14)
    assert np.abs(plain.f_eval[-1] - lim.f_eval[-1]).max() > 10 * se.max()


def test_deep_adam_partner_bias_is_removed():
    """The deep Adam limit at M, 2M and 4M partners: each bias-removed estimate
    2 f(2M) − f(M) agrees with the others within the t-bound of their standard errors,
    and the raw M and 2M estimates are reported beside it with their own errors."""
    net, r = _adam_problem(2)
    r = tp.Routine(r.X[:12], r.Y[:12], lr=0.05, batch_size=2, eval_inputs=r.eval_inputs,
                   optimizer=r.optimizer)
    runs = {M: tp.simulate_limit(net, r, particles=4_000, replicates=8, partners=M)
            for M in (32, 64, 128)}
    for M, tr in runs.items():
        assert tr.meta["partners"] == M and tr.meta["debias_partners"]
        raw_M, raw_2M = tr.stats["f_eval_partners_M"], tr.stats["f_eval_partners_2M"]
        assert np.allclose(tr.f_eval, 2 * raw_2M - raw_M)
        assert np.all(tr.stats["f_eval_partners_M_se"][1:] > 0)
    bound = t_quantile(7)
    for a, b in [(32, 64), (64, 128), (32, 128)]:
        diff = np.abs(runs[a].f_eval[-1] - runs[b].f_eval[-1])
        assert np.all(diff <= bound * np.hypot(runs[a].f_eval_se[-1], runs[b].f_eval_se[-1]))
    # nested partners: the M-run of 2M partners is the 2M-run of M partners, bit for bit
    assert np.array_equal(runs[64].stats["f_eval_partners_M"],
                          runs[32].stats["f_eval_partners_2M"])


def test_adam_limit_refusals():
    net, r = _adam_problem(2)
    with pytest.raises(tp.SpecError, match="2 × partners <= particles"):
        tp.simulate_limit(net, r, particles=100, partners=100)   # QMC: N = 128
    with pytest.raises(tp.SpecError, match="Adam training only"):
        tp.simulate_limit(tp.MLP(tp.mup(2), 3, 2), tp.Routine(r.X, r.Y, lr=0.1, batch_size=2),
                          partners=8)
    with pytest.raises(tp.UnsupportedError, match="nonlinear kernel"):
        ntk_adam = tp.ABC([0, "1/2", "1/2"], [0, 0, 0], ["1/2", 1, "1/2"], optimizer="adam")
        assert ntk_adam.classify().regime == "kernel"
        tp.simulate_limit(tp.MLP(ntk_adam, 3, 2), r)
    with pytest.raises(tp.SpecError, match="no closed form"):
        tp.simulate_limit(tp.MLP(tp.mup(1, optimizer="adam"), 3, 2, phi="id"), r,
                          method="exact")
    lin = tp.simulate_limit(tp.MLP(tp.mup(1, optimizer="adam"), 3, 2, phi="id"), r,
                            particles=2_000, replicates=2, kernel="numpy")
    assert lin.meta["method"] == "monte_carlo"


@pytest.mark.parametrize("eps", [1e-8, 0.0])
def test_adam_direction_matches_the_textbook_formula(eps):
    """The in-place Adam direction (one scratch array) against the formula written out,
    over several steps, with a row of always-zero gradients (ψ = 0 there when ε = 0)."""
    rng = np.random.default_rng(5)
    betas = (0.9, 0.99)
    m, v = np.zeros((3, 7)), np.zeros((3, 7))
    m_ref, v_ref = m.copy(), v.copy()
    for t in range(1, 5):
        g = rng.standard_normal((3, 7))
        g[1] = 0.0
        g_before = g.copy()
        psi = tp.Adam(betas=betas, eps=eps).direction((m, v), g, t, np)
        m_ref = betas[0] * m_ref + (1 - betas[0]) * g_before
        v_ref = betas[1] * v_ref + (1 - betas[1]) * g_before ** 2
        den = np.sqrt(v_ref / (1 - betas[1] ** t)) + eps
        with np.errstate(invalid="ignore", divide="ignore"):
            ref = np.where(den > 0, (m_ref / (1 - betas[0] ** t)) / den, 0.0)
        assert np.array_equal(g, g_before)                       # g is left as it was
        assert np.allclose(m, m_ref, rtol=1e-14, atol=0) and np.allclose(v, v_ref, rtol=1e-14)
        assert np.allclose(psi, ref, rtol=1e-13, atol=0)
        assert np.all(psi[1] == 0.0) and np.all(np.isfinite(psi))


# ---- Nesterov: an optimizer added as one module (spec/optimizers/sgd.py) ------------------
def test_nesterov_schedule_is_the_rule_on_matrices():
    """The deep engines' schedule of Nesterov, derived from its coordinate rule, reproduces
    the rule run on random matrices (W_t = ρ_t W_0 − Σ_s C[t, s] G_s), and differs from
    the heavy ball's."""
    rng = np.random.default_rng(3)
    T, delta = 6, 0.1
    W0, G = rng.standard_normal((3, 4)), rng.standard_normal((T, 3, 4))
    W, state = W0, NESTEROV.rule.zeros(W0)
    rho, C = NESTEROV.schedule(delta, T)
    for t in range(T):
        W, state = NESTEROV.rule.apply(W, G[t], state,
                                       NESTEROV.coordinate(1.0, 1.0, delta, t + 1)[1])
        assert np.allclose(W, rho[t + 1] * W0 - np.einsum("s,sij->ij", C[t + 1], G),
                           rtol=1e-13, atol=1e-13)
    assert C[1, 0] == 1.8 and not np.allclose(C, OPT.schedule(delta, T)[1])  # 1 + μ at once


def test_nesterov_needs_momentum_and_is_recorded():
    with pytest.raises(tp.SpecError, match="nesterov=True needs a momentum"):
        tp.SGD(nesterov=True)
    with pytest.raises(tp.SpecError, match="nesterov = 'yes' must be True or False"):
        tp.SGD(momentum=0.9, nesterov="yes")
    assert str(NESTEROV) == "SGD(momentum=0.8, weight_decay=0.3, nesterov=True)"
    assert str(OPT) == "SGD(momentum=0.8, weight_decay=0.3)"     # as recorded before


@pytest.mark.parametrize("L", [1, 2])
def test_nesterov_silu_limits_match_finite_networks(L):
    """silu μP networks trained with Nesterov momentum and weight decay: the Monte Carlo
    limit (the fused kernel for L = 1, the deep engine for L = 2) against 8 finite nets
    per width at 256–4096: the seed-mean gap at 4096 within 3 combined standard errors,
    the RMS distance falling like n^(−1/2), and plain SGD's limit far from it."""
    net = tp.MLP(tp.mup(L), 3, 2, phi="silu")
    r = tp.Routine(lr=0.6, optimizer=NESTEROV, **N8_LONG)
    lim = tp.simulate_limit(net, r, particles=2 ** 15, replicates=8, progress=False)
    study = tp.convergence(net, r, [256, 1024, 4096], seeds=8, limit=lim, executor="serial")
    assert -0.75 <= study.exponent <= -0.3, (study.exponent, study.rms)
    mean, se = finite_mean(net, r, 4096, 8)
    combined = np.hypot(se[-1], lim.f_eval_se[-1])
    assert np.all(np.abs(mean[-1] - lim.f_eval[-1]) <= 3 * combined), (mean[-1], lim.f_eval[-1])
    # heavy ball on the array twin for L = 1 (no fused kernel compiled for silu with it)
    heavy = tp.simulate_limit(net, tp.Routine(lr=0.6, optimizer=OPT, **N8_LONG),
                              particles=2 ** 12, replicates=4, progress=False,
                              **({"kernel": "numpy"} if L == 1 else {}))
    gap = np.abs(heavy.f_eval[-1] - lim.f_eval[-1])
    assert gap.max() > 10 * np.hypot(combined, heavy.f_eval_se[-1]).max(), gap
