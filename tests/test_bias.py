"""Biases, each a weight with input 1 (docs/theory.md §13): the finite network's gradient,
the limit's bias particles against an independent route and against finite networks, the
kernels with bias variance against closed forms, and the refusals."""
import numpy as np
import pytest
from conftest import N8_LONG, exact_against_monte_carlo, t_quantile, welch_dof, within_se

import tp_limits as tp
from tp_limits.engine.backend import numpy_backend
from tp_limits.finite.network import FiniteNetwork

RNG = np.random.default_rng(11)
X6 = RNG.standard_normal((12, 3)) / np.sqrt(3)
Y6 = np.tanh(X6[:, :1] - X6[:, 1:2])


def _routine(lr=0.3, optimizer=None, **kw):
    return tp.Routine(X6, Y6, lr=lr, batch_size=2, eval_inputs=X6[:3], optimizer=optimizer, **kw)


def _loss(nw, X, Y):
    f = nw.forward(X, step=0)[2]
    return 0.5 * np.mean(np.sum((f - Y) ** 2, axis=1))


@pytest.mark.parametrize("residual", [None, tp.Residual(0.5, 0.5)], ids=["plain", "residual"])
def test_a_bias_moves_by_its_rate_times_the_loss_gradient(residual):
    """One plain SGD step moves every bias by −(its W-space rate) × ∂loss/∂b, the gradient
    taken by central differences of the network's own loss (hidden biases inside a residual
    branch and the readout's)."""
    net = tp.MLP(tp.mup(3), 3, 2, phi="tanh", residual=residual,
                 bias=tp.Bias(sigma=0.4, lr_mult=[1.0, 2.0, 0.5, 3.0]))
    X, Y = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 2))
    nw = FiniteNetwork(net, 24, 0.1, 5, numpy_backend(), np.float64)
    before = [b.copy() for b in nw.bias.values()]
    grads = []
    for b in nw.bias.values():
        g = np.zeros_like(b)
        for i in range(len(b)):
            b[i] += 1e-6
            up = _loss(nw, X, Y)
            b[i] -= 2e-6
            down = _loss(nw, X, Y)
            b[i] += 1e-6
            g[i] = (up - down) / 2e-6
        grads.append(g)
    hs, xs, f = nw.forward(X, step=0)
    nw.step(hs, xs, (f - Y) / len(X))                  # χ = ∇ℓ / B for the batch-mean mse
    for l, (b0, b1, g) in enumerate(zip(before, nw.bias.values(), grads)):
        lr = nw.const.bias.lr[l]     # the differences' rounding: ~1e-16 / 1e-6 per unit rate
        np.testing.assert_allclose(b1 - b0, -lr * g, rtol=1e-6, atol=1e-9 * lr)
    assert np.all(np.abs(grads[1]) > 0)


def test_zero_biases_leave_the_initial_network_as_it_was():
    """Biases are drawn after every matrix: with zero-initialized biases f_0 is bit for bit
    the bias-free network's of the same seed, and the first step already moves it."""
    r = _routine()
    plain = tp.train_finite(tp.MLP(tp.mup(2), 3, 1), r, 128, seed=2, progress=False)
    biased = tp.train_finite(tp.MLP(tp.mup(2), 3, 1, bias=True), r, 128, seed=2,
                             progress=False)
    assert np.array_equal(plain.f_eval[0], biased.f_eval[0])
    assert not np.allclose(plain.f_eval[1], biased.f_eval[1])


def test_one_hidden_layer_biases_are_an_input_of_one():
    """The input layer's bias with σ_b = σ_1 and m_b = m_1 is one more input coordinate equal
    to 1: the deep engine's bias particles (L = 1) against the one-hidden-layer engine on
    the augmented inputs, two independent Monte Carlo runs, within the t bound."""
    net = tp.MLP(tp.mup(1), 3, 1, phi="tanh", bias=tp.Bias(sigma=1.0, readout=False))
    aug = tp.MLP(tp.mup(1), 4, 1, phi="tanh")
    Xa = np.hstack([X6, np.ones((len(X6), 1))])
    ra = tp.Routine(Xa, Y6, lr=0.3, batch_size=2, eval_inputs=Xa[:3])
    a = tp.simulate_limit(net, _routine(), particles=2 ** 14, replicates=8, progress=False)
    b = tp.simulate_limit(aug, ra, particles=2 ** 14, replicates=8, progress=False)
    assert a.meta["method"] == b.meta["method"] == "monte_carlo"
    se = np.hypot(a.f_eval_se, b.f_eval_se)[1:]
    within_se(a.f_eval[1:], b.f_eval[1:], se, welch_dof(a.f_eval_se[1:], 7, b.f_eval_se[1:], 7))
    assert np.abs(a.f_eval[-1] - a.f_eval[0]).max() > 50 * se.max()


def test_the_exact_linear_bias_is_an_input_of_one():
    """φ = id: the exact engine's bias primitive (L = 1, through the deep linear engine)
    equals the one-hidden-layer closed form on the inputs augmented by a 1, to 1e-12."""
    net = tp.MLP(tp.mup(1), 3, 2, phi="id", bias=tp.Bias(sigma=1.0, readout=False))
    aug = tp.MLP(tp.mup(1), 4, 2, phi="id")
    ones = lambda A: np.hstack([A, np.ones((len(A), 1))])  # noqa: E731
    r = tp.Routine(lr=0.2, optimizer=tp.SGD(momentum=0.7), **N8_LONG)
    ra = tp.Routine(ones(N8_LONG["X"]), N8_LONG["Y"], lr=0.2, batch_size=2,
                    eval_inputs=ones(N8_LONG["eval_inputs"]), optimizer=tp.SGD(momentum=0.7))
    a, b = tp.simulate_limit(net, r), tp.simulate_limit(aug, ra)
    assert a.meta["method"] == b.meta["method"] == "exact"
    np.testing.assert_allclose(a.f_eval, b.f_eval, rtol=1e-12, atol=1e-14)
    assert np.abs(a.f_eval[-1] - a.f_eval[0]).max() > 0.05


@pytest.mark.parametrize("L, residual, opt", [
    (2, None, None), (3, tp.Residual(0.5, 0.0), tp.SGD(momentum=0.8, weight_decay=0.2))],
    ids=["plain", "residual, momentum and decay"])
def test_exact_linear_biases_match_monte_carlo(L, residual, opt):
    net = tp.MLP(tp.mup(L), 3, 2, phi="id", residual=residual,
                 bias=tp.Bias(sigma=0.6, lr_mult=2.0))
    exact, mc, q = exact_against_monte_carlo(net, tp.Routine(lr=0.2, optimizer=opt, **N8_LONG))
    plain = tp.simulate_limit(tp.MLP(net.param, 3, 2, phi="id", residual=residual),
                              tp.Routine(lr=0.2, optimizer=opt, **N8_LONG))
    assert np.any(np.abs(plain.f_eval[1:] - mc.f_eval[1:]) > q * mc.f_eval_se[1:])


@pytest.mark.slow
@pytest.mark.parametrize("L, opt", [(1, "adam"), (2, "sgd")])
def test_biased_limit_matches_finite_networks_at_width_4096(L, opt):
    """tanh μP with random hidden biases and a readout bias: 8 finite nets at width 4096
    against the Monte Carlo limit within the t bound at every evaluated step; the limit
    without biases is far outside it."""
    optimizer = tp.Adam() if opt == "adam" else tp.SGD(momentum=0.5)
    bias = tp.Bias(sigma=0.7, lr_mult=2.0)
    net = tp.MLP(tp.mup(L, optimizer=opt), 3, 1, phi="tanh", bias=bias)
    r = _routine(lr=0.02 if opt == "adam" else 0.3, optimizer=optimizer)
    lim = tp.simulate_limit(net, r, particles=2 ** 14, replicates=8, progress=False)
    F = np.array([tp.train_finite(net, r, 4096, seed=s, record=(), progress=False).f_eval
                  for s in range(8)])
    mean, se = F.mean(axis=0)[1:], F.std(axis=0, ddof=1)[1:] / np.sqrt(8)
    combined = np.hypot(se, lim.f_eval_se[1:])
    q = t_quantile(welch_dof(se, 7, lim.f_eval_se[1:], lim.status.se_dof))
    assert np.all(np.abs(mean - lim.f_eval[1:]) <= q * combined)
    plain = tp.simulate_limit(tp.MLP(net.param, 3, 1, phi="tanh"), r, particles=2 ** 14,
                              replicates=8, progress=False)
    assert np.any(np.abs(plain.f_eval[-1] - lim.f_eval[-1]) > q[-1] * combined[-1])


def _arccos(S, sw2, sb2):
    """relu's NNGP step, written out: σ_w² √(s_ii s_jj) (sin θ + (π − θ) cos θ)/(2π) + σ_b²."""
    d = np.sqrt(np.diag(S))
    cos = np.clip(S / np.outer(d, d), -1.0, 1.0)
    th = np.arccos(cos)
    return sw2 * np.outer(d, d) * (np.sin(th) + (np.pi - th) * cos) / (2 * np.pi) + sb2


def _arcsin(S, sw2, sb2):
    """erf's NNGP step: σ_w² (2/π) arcsin(2 s_ij / √((1 + 2 s_ii)(1 + 2 s_jj))) + σ_b²."""
    g = 1.0 + 2.0 * np.diag(S)
    return sw2 * 2.0 / np.pi * np.arcsin(2.0 * S / np.sqrt(np.outer(g, g))) + sb2


@pytest.mark.parametrize("phi, step", [("relu", _arccos), ("erf", _arcsin)])
def test_nngp_with_bias_variance_equals_its_closed_form(phi, step):
    """Σ^1 = σ_1² XXᵀ + σ_{b,1}², Σ^{l+1} = σ_{l+1}² E[φφ] + σ_{b,l+1}²: the NNGP of an L = 3
    network with per-layer bias variances against the arc-cosine / arc-sine recursions,
    to 1e-12."""
    sig, sb = [1.1, 0.9, 1.3, 0.8], [0.5, 0.3, 0.7]
    net = tp.MLP(tp.ntp(3), 3, 1, phi=phi, sigma=sig, bias=tp.Bias(sigma=sb))
    X = RNG.standard_normal((5, 3))
    S = sig[0] ** 2 * X @ X.T + sb[0] ** 2
    for l in (1, 2):
        S = step(S, sig[l] ** 2, sb[l] ** 2)
    ref = step(S, sig[3] ** 2, 0.0)
    np.testing.assert_allclose(tp.nngp(net, X), ref, rtol=1e-12, atol=1e-14)
    assert not np.allclose(ref, tp.nngp(tp.MLP(net.param, 3, 1, phi=phi, sigma=sig), X))


def test_the_bias_kernels_are_the_empirical_ones():
    """The limit's bias components (Π^l for the hidden biases, J for the readout's) against
    the empirical NTK of 8 width-4096 networks, within the t bound plus the O(1/n) bias the
    weights' components are allowed too (test_finite_ntk)."""
    net = tp.MLP(tp.ntp(2), 3, 1, phi="tanh", residual=tp.Residual(0.5, 0.0),
                 bias=tp.Bias(sigma=0.6, lr_mult=[1.0, 2.0, 0.5]))
    X = X6[:4]
    lim = tp.ntk(net, X, components=True)
    assert set(lim) == {1, 2, 3, "b1", "b2", "b3"}   # NTP: every layer; biases with layer 1
    emp = [tp.empirical_ntk(net, X, width=4096, seed=s, components=True) for s in range(8)]
    for key, K in lim.items():
        E = np.array([e[key] for e in emp])
        mean, se = E.mean(axis=0), E.std(axis=0, ddof=1) / np.sqrt(8)
        assert np.all(np.abs(mean - K) < t_quantile(7) * se + 2e-3), key
    np.testing.assert_allclose(lim["b3"], 0.5 * np.ones((4, 4)), rtol=1e-15)


def test_a_trivial_limit_moves_by_its_readout_bias_alone():
    """In the trivial regime nothing but the width-free readout bias moves: f̊ follows
    kernel descent with the kernel α² m_β J, i.e. every output moves by the same amount,
    −η m_β Σ_s Σ_i χ_{s,i} (mse: χ = (f − y)/B)."""
    trivial = tp.ABC([0, "1/2"], [0, 0], c=1, name="trivial")
    assert trivial.classify().regime == "trivial"
    net = tp.MLP(trivial, 3, 1, phi="tanh", bias=tp.Bias(lr_mult=[1.0, 1.0]))
    lim = tp.simulate_limit(net, _routine(lr=0.5), f0="zero", progress=False)
    f = np.diff(lim.f_eval[:, :, 0], axis=0)
    np.testing.assert_allclose(f, f[:, :1] * np.ones_like(f), rtol=1e-13, atol=1e-15)
    shift, beta = 0.0, []
    for t in range(len(f)):
        Yb = Y6[2 * t:2 * t + 2]
        shift -= 0.5 * np.sum((shift - Yb) / 2)
        beta.append(shift)
    np.testing.assert_allclose(lim.f_eval[1:, 0, 0], beta, rtol=1e-12)


def test_bad_bias_inputs_are_refused_before_any_work():
    with pytest.raises(tp.SpecError, match="sigma"):
        tp.Bias(sigma=-1.0)
    with pytest.raises(tp.SpecError, match="lr_mult"):
        tp.Bias(lr_mult=0.0)
    with pytest.raises(tp.SpecError, match="one per bias"):
        tp.MLP(tp.mup(2), 3, 1, bias=tp.Bias(sigma=[0.1, 0.2, 0.3]))
    with pytest.raises(tp.SpecError, match="bias must be"):
        tp.MLP(tp.mup(2), 3, 1, bias="yes")
    net = tp.MLP(tp.mup(2, optimizer="muon"), 3, 2, bias=True)
    with pytest.raises(tp.SpecError, match="bias vector"):
        tp.train_finite(net, tp.Routine(lr=0.05, optimizer=tp.Muon(), **N8_LONG), 64)
    biased = tp.MLP(tp.mup(2), 3, 2, phi="id", bias=True)
    r = tp.Routine(lr=0.1, **N8_LONG)
    with pytest.raises(tp.SpecError, match="biases"):
        tp.simulate_limit(tp.MLP(tp.mup(2), 3, 2, bias=True), r, zdot="tangent")
    with pytest.raises(tp.SpecError, match="without biases"):
        tp.to_torch(biased, 64, r)
    assert tp.simulate_limit(biased, r, method="monte_carlo", particles=256,
                             progress=False).meta["method"] == "monte_carlo"
