"""LayerNorm and RMSNorm as layer kinds (spec/layers/, docs/theory.md §14): their arithmetic
on every representation, finite networks converging to their limit, the exact linear limit
against Monte Carlo, the empirical NTK against the limiting one, the classifier's
verdicts, the torch export, and the refusals."""
import importlib.util

import numpy as np
import pytest
from conftest import D1, N8, exact_against_monte_carlo, t_quantile

import tp_limits as tp
from tp_limits.spec.layers import NORMS, LayerNorm, RMSNorm

RNG = np.random.default_rng(11)


class _Rows:
    representation, xp = "rows", np


@pytest.mark.parametrize("kind", [LayerNorm(1e-3), RMSNorm(1e-3)])
def test_rows_forward_is_the_definition_and_backward_its_jacobian(kind):
    """N on rows is (h − mean h)/√(var h + ε) (no centering for RMSNorm) along the last axis,
    and its backward is the transpose of its Jacobian (central differences)."""
    h = RNG.standard_normal((3, 40)) * 2.0 + 0.7
    y = kind.forward("rows", h, _Rows)
    c = h - h.mean(axis=1, keepdims=True) if kind.center else h
    want = c / np.sqrt((c * c).mean(axis=1, keepdims=True) + kind.eps)
    assert np.allclose(y, want, rtol=1e-14, atol=1e-14)
    g = RNG.standard_normal(h.shape)
    back = kind.backward("rows", h, g, _Rows)
    num = np.zeros_like(h)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            e = np.zeros_like(h)
            e[i, j] = 1e-6
            num[i, j] = np.sum(g * (kind.forward("rows", h + e, _Rows)
                                    - kind.forward("rows", h - e, _Rows))) / 2e-6
    assert np.allclose(back, num, rtol=1e-6, atol=1e-8)


def test_every_norm_kind_has_every_representation():
    """The registry's kinds run on each representation the engines use (none refused)."""
    from tp_limits.spec.program import REPRESENTATIONS
    for kind in NORMS.values():
        for rep in REPRESENTATIONS:
            assert kind().refusal(rep) is None
            assert callable(getattr(kind, rep)) and callable(getattr(kind, rep + "_backward",
                                                                     lambda: None))


@pytest.mark.parametrize("norm", list(NORMS))
@pytest.mark.parametrize("residual", [None, tp.Residual(0.5, 0.0)], ids=["plain", "residual"])
def test_exact_linear_limit_with_norms_equals_monte_carlo(norm, residual):
    """φ = id with a normalization stays linear in the Gaussians (N is a deterministic
    rescaling there): the exact engine against Monte Carlo within the t bound of its
    replicates, plain and pre-norm residual, with biases."""
    net = tp.MLP(tp.mup(3), 3, 2, phi="id", norm=norm, residual=residual, bias=tp.Bias(0.5))
    exact, mc, _ = exact_against_monte_carlo(net, tp.Routine(lr=0.3, **N8))
    assert exact.meta["engine"] == "limit/deep_linear"
    assert np.abs(exact.f_eval[-1] - exact.f_eval[0]).max() > 1e-2


def test_exact_linear_limit_of_one_hidden_layer_with_a_norm():
    """L = 1 with a normalization runs in the deep engines (the fused sweep takes plain
    programs only): exact = Monte Carlo there too."""
    net = tp.MLP(tp.mup(1), 3, 2, phi="id", norm="rms")
    exact, _, _ = exact_against_monte_carlo(net, tp.Routine(lr=0.3, **N8))
    assert exact.meta["engine"] == "limit/deep_linear"
    assert tp.simulate_limit(tp.MLP(tp.mup(1), 3, 2, phi="tanh", norm="rms"),
                             tp.Routine(lr=0.3, **N8), particles=1024,
                             replicates=2).meta["engine"] == "limit/deep_monte_carlo"


@pytest.mark.parametrize("norm", list(NORMS))
@pytest.mark.parametrize("residual", [None, tp.Residual(0.5, 0.0)], ids=["plain", "residual"])
def test_empirical_ntk_with_norms_converges_to_the_limit(norm, residual):
    """At width 4096, 8 seeds: the empirical NTK of an NTP network with a normalization
    (and biases) equals the limiting NTK, whose pair covariances are rescaled by each
    input's variance, within the t bound plus the O(1/n) bias of test_finite_ntk.py."""
    X = D1["eval_inputs"] * np.array([[1.0], [2.0], [0.5]])
    net = tp.MLP(tp.ntp(3), 2, 1, phi="tanh", norm=norm, residual=residual,
                 bias=tp.Bias(0.5))
    Ks = np.array([tp.empirical_ntk(net, X, width=4096, seed=s) for s in range(8)])
    mean, se = Ks.mean(axis=0), Ks.std(axis=0, ddof=1) / np.sqrt(len(Ks))
    limit = tp.ntk(net, X)
    assert np.all(np.abs(mean - limit) < t_quantile(7) * se + 2e-3)
    # the normalization matters: the same network without it has another kernel
    plain = tp.ntk(tp.MLP(tp.ntp(3), 2, 1, phi="tanh", residual=residual, bias=tp.Bias(0.5)),
                   X)
    assert np.max(np.abs(plain - limit)) > 2 * np.max(t_quantile(7) * se + 2e-3)


def test_nngp_with_a_norm_is_invariant_to_the_input_scale():
    """With ε small, N makes each pre-activation's scale irrelevant: the NNGP of inputs
    rescaled by different factors is (nearly) that of the unit inputs."""
    X = D1["eval_inputs"]
    net = tp.MLP(tp.ntp(2), 2, 1, phi="tanh", norm="rms", norm_eps=1e-12)
    scaled = tp.nngp(net, X * np.array([[3.0], [0.2], [7.0]]))
    assert np.allclose(scaled, tp.nngp(net, X), rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("norm, phi, opt", [("layer", "tanh", "sgd"), ("rms", "relu", "adam")])
def test_finite_networks_with_norms_converge_to_the_limit(norm, phi, opt):
    """Finite μP networks with a normalization approach the Monte Carlo limit like n^(−½),
    and the widest is within 3 combined standard errors of it (docs/theory.md §14.5 has
    the full table: tanh and relu, L = 2 and 3, SGD and Adam, plain and pre-norm residual)."""
    adam = opt == "adam"
    net = tp.MLP(tp.mup(2, optimizer=opt), 2, 1, phi=phi, norm=norm)
    r = tp.Routine(lr=0.02 if adam else 0.5, optimizer=tp.Adam() if adam else None, **D1)
    limit = tp.simulate_limit(net, r, particles=2 ** 15, replicates=8, record=(),
                              **(dict(partners=64) if adam else {}))
    study = tp.convergence(net, r, [256, 1024, 4096], seeds=8, limit=limit)
    assert -0.75 <= study.exponent <= -0.3, (study.exponent, study.exponent_ci)
    assert study.rms[-1] < 0.5 * study.rms[0]


@pytest.mark.parametrize("preset", [tp.sp(2, c=1), tp.ntp(2), tp.mup(2)])
def test_coordinate_check_with_norms_measures_the_predicted_exponents(preset):
    """Stable SP (learning rate 1/n), NTP and μP keep their width exponents with a
    normalization (docs/theory.md §14.4): no measured slope of a coordinate check misses
    the classifier's prediction, and the feature updates scale as predicted."""
    net = tp.MLP(preset, 2, 1, phi="tanh", norm="layer")
    r = tp.Routine(lr=0.5, **D1)
    cc = tp.coord_check(net, r, [256, 512, 1024, 2048, 4096], seeds=4, executor="serial",
                        record=("stats",))
    assert not cc.failures(), str(cc.table(t=2))
    for layer in (1, 2):
        f = cc.fit("delta_x", layer, 2)
        assert f.verdict == "ok" and abs(f.slope - f.predicted) <= 0.1, (layer, f)


def test_the_classifier_keeps_its_verdicts_and_refuses_what_it_cannot_derive():
    """SP, NTP and μP with norms: the same classification (their pre-activations are Θ(1) at
    init); a parametrization whose hidden pre-activations grow at init is refused with the
    reason, before any work."""
    for p in (tp.sp(3), tp.ntp(3), tp.mup(3)):
        assert tp.MLP(p, 2, 1, norm="layer").param.classify().regime == p.classify().regime
    grow = tp.ABC(a=[0, 0, 0], b=[0, 0, "1/2"], c=0)
    with pytest.raises(tp.SpecError, match=r"h\^2 at initialization blows up"):
        tp.MLP(grow, 2, 1, norm="rms")
    with pytest.raises(tp.SpecError, match="norm = 'batch'"):
        tp.MLP(tp.mup(2), 2, 1, norm="batch")
    with pytest.raises(tp.SpecError, match="norm_eps"):
        tp.MLP(tp.mup(2), 2, 1, norm="layer", norm_eps=0.0)
    with pytest.raises(tp.SpecError, match="norm_eps = 0.001 needs norm"):
        tp.MLP(tp.mup(2), 2, 1, norm_eps=1e-3)


def test_refusals_name_the_normalization():
    net = tp.MLP(tp.mup(2), 2, 1, phi="tanh", norm="layer")
    with pytest.raises(tp.SpecError, match="normalization"):
        tp.simulate_limit(net, tp.Routine(lr=0.5, **D1), zdot="tangent", particles=512)


def test_norms_change_the_limit_and_the_network():
    """A normalization is not a no-op: the limit and the finite network differ from the
    plain ones (by far more than the Monte Carlo error)."""
    r = tp.Routine(lr=0.5, **D1)
    a = tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1, phi="tanh"), r, particles=4096)
    b = tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1, phi="tanh", norm="layer"), r,
                          particles=4096)
    se = np.hypot(a.f_eval_se, b.f_eval_se)[1:]
    assert np.max(np.abs(a.f_eval - b.f_eval)[1:] / se) > 20


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
@pytest.mark.parametrize("norm", list(NORMS))
def test_to_torch_with_norms_trains_as_train_finite(norm):
    net = tp.MLP(tp.mup(3), 3, 2, phi="tanh", norm=norm, residual=tp.Residual(0.5, 0.0))
    r = tp.Routine(lr=0.3, **N8)
    want = tp.train_finite(net, r, 96, seed=5, progress=False).f_eval
    got = tp.to_torch(net, 96, seed=5, routine=r).train(r, net)
    assert np.max(np.abs(got - want)) < 1e-12
