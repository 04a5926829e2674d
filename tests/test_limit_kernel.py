"""The kernel regime: NNGP/NTK kernels, kernel gradient descent, finite networks tracking it."""
import numpy as np
import pytest
from conftest import D1

import tp_limits as tp
from tp_limits.limit.kernel import kernels, pair_moments

X3 = D1["eval_inputs"]


def arccos_relu(a, b, c):
    """Hand-written ReLU moments (Cho & Saul): independent of the library's code."""
    s = np.sqrt(a * b)
    th = np.arccos(c / s)
    return s * (np.sin(th) + (np.pi - th) * np.cos(th)) / (2 * np.pi), (np.pi - th) / (2 * np.pi)


def test_relu_nngp_and_ntk_by_hand_L1_L2():
    # L = 1, σ = 1: V^1(ξ, ζ) with |ξ|² = 1, |ζ|² = 1, ξ·ζ = 0.6
    V, Vd = arccos_relu(1.0, 1.0, 0.6)
    net1 = tp.MLP(tp.ntp(1), 2, 1, phi="relu")
    assert tp.nngp(net1, X3)[0, 1] == pytest.approx(V, rel=1e-12)
    assert tp.ntk(net1, X3)[0, 1] == pytest.approx(V + Vd * 0.6, rel=1e-12)   # K_2 + K_1
    # L = 2 at the pair (ξ, ξ): Σ^2 = V^1 = 1/2, so V^2(ξ, ξ) = 1/4, V̇ = 1/2
    net2 = tp.MLP(tp.ntp(2), 2, 1, phi="relu")
    V1_pair = arccos_relu(1.0, 1.0, 0.6)[0]
    V2, V2d = arccos_relu(0.5, 0.5, V1_pair)
    assert tp.nngp(net2, X3)[0, 1] == pytest.approx(V2, rel=1e-12)
    K = V2 + V2d * V1_pair + V2d * Vd * 0.6                # K_3 + K_2 + K_1
    assert tp.ntk(net2, X3)[0, 1] == pytest.approx(K, rel=1e-12)


def test_erf_closed_form_by_hand_and_vs_quadrature():
    net = tp.MLP(tp.ntp(1), 2, 1, phi="erf", sigma=[1.5, 1.0])
    a, c = 1.5 ** 2, 1.5 ** 2 * 0.6
    V = (2 / np.pi) * np.arcsin(2 * c / (1 + 2 * a))
    assert tp.nngp(net, X3)[0, 1] == pytest.approx(V, rel=1e-12)
    closed = kernels.layer_kernels("erf", (1.2, 0.9, 1.1), X3)
    quad = pair_moments._quadrature("erf")
    S = 1.2 ** 2 * X3 @ X3.T
    Vq, Vdq = kernels._pairwise(S, quad)
    assert np.allclose(Vq, closed["V"][0], atol=1e-7) and np.allclose(Vdq, closed["Vdot"][0], atol=1e-7)


def test_tanh_quadrature_vs_monte_carlo():
    rng = np.random.default_rng(0)
    a, b, c = 1.0, 2.0, 0.9
    Vq, Vdq = pair_moments._quadrature("tanh")(np.array(a), np.array(b), np.array(c))
    z = rng.standard_normal((2, 2_000_000))
    u = np.sqrt(a) * z[0]
    v = c / np.sqrt(a) * z[0] + np.sqrt(b - c * c / a) * z[1]
    prod = np.tanh(u) * np.tanh(v)
    assert abs(prod.mean() - Vq) < 5 * prod.std() / np.sqrt(prod.size)
    dprod = (1 - np.tanh(u) ** 2) * (1 - np.tanh(v) ** 2)
    assert abs(dprod.mean() - Vdq) < 5 * dprod.std() / np.sqrt(dprod.size)


def test_n8_linear_components():
    net = tp.MLP(tp.mup(2), 3, 2, phi="id", sigma=[1.3, 0.7, 1.2])
    one = np.ones((1, 3))
    comps = tp.ntk(net, one, components=True, layers=(1, 2, 3))
    assert [comps[l][0, 0] / 3 for l in (1, 2, 3)] == pytest.approx([0.7056, 2.4336, 0.8281])


def test_kernel_components_follow_the_classification():
    full = tp.ntk(tp.MLP(tp.ntp(2), 2, 1, phi="relu"), X3, components=True)
    sp = tp.ntk(tp.MLP(tp.sp(2, c=1), 2, 1, phi="relu"), X3, components=True)
    assert set(full) == {1, 2, 3} and set(sp) == {2, 3}          # no input-layer term
    assert np.allclose(sp[2], full[2]) and np.allclose(sp[3], full[3])
    sp1 = tp.ntk(tp.MLP(tp.sp(1, c=1), 2, 1, phi="relu"), X3, components=True)
    assert set(sp1) == {2}                                        # L = 1: readout only


def test_kernel_gd_first_step_and_mean_path():
    net = tp.MLP(tp.ntp(2), 2, 1, phi="relu")
    r = tp.Routine(lr=0.5, **D1)
    zero = tp.simulate_limit(net, r, f0="zero")
    K = tp.ntk(net, X3, D1["X"][:1])
    assert np.allclose(zero.f_eval[1, :, 0], 0.5 * K[:, 0] * 1.0)    # χ_0 = (0 - 1)/1
    sampled = tp.simulate_limit(net, r, samples=400, seed=1)
    assert sampled.stats["f_eval_samples"].shape == (400, 4, 3, 1)
    # MSE: f_t is affine in f_0, so the mean over NNGP samples is the zero path
    assert np.all(np.abs(sampled.f_eval - zero.f_eval)[1:] < 5 * sampled.f_eval_se[1:])
    assert sampled.meta["engine"] == "limit/kernel" and sampled.meta["regime"] == "kernel"


def test_trivial_limit_is_constant():
    net = tp.MLP(tp.ntp(2, c="1/2"), 2, 1, phi="tanh")
    tr = tp.simulate_limit(net, tp.Routine(lr=0.5, **D1), samples=8)
    assert tr.meta["engine"] == "limit/trivial"
    assert np.all(tr.f_eval == tr.f_eval[0]) and np.any(tr.f_eval[0] != 0)


def test_conditioned_f0_must_fit_the_kernel_points():
    net = tp.MLP(tp.ntp(2), 2, 1, phi="relu")
    r = tp.Routine(lr=0.5, **D1)
    Z = tp.kernel_points(r)
    assert len(Z) == 3 and np.array_equal(Z[:2], D1["X"][:2])
    f0 = tp.initial_outputs(net, r, 256, seed=2)
    assert f0.shape == (3, 1)
    fin = tp.train_finite(net, r, 256, seed=2, record=())
    assert np.allclose(fin.f_eval[0, :, 0], f0[[0, 1, 2], 0])
    with pytest.raises(tp.SpecError, match="expected \\(3, 1\\)"):
        tp.simulate_limit(net, r, f0=np.zeros((2, 1)))
    with pytest.raises(tp.SpecError, match="samples"):
        tp.simulate_limit(net, r, samples=0)
    with pytest.raises(tp.SpecError, match="f0 = 'random'"):
        tp.simulate_limit(net, r, f0="random")


@pytest.mark.parametrize("param", [tp.ntp(2), tp.sp(2, c=1)])
def test_kernel_regime_networks_track_kernel_gd(param):
    """Each network vs kernel GD started from its own f_0: error ~ n^{-1/2}."""
    net = tp.MLP(param, 2, 1, phi="relu")
    study = tp.convergence(net, tp.Routine(lr=0.5, **D1), [512, 1024, 2048, 4096, 8192],
                           seeds=12, executor="serial")
    assert study.conditioned and study.limit is None
    assert -0.6 <= study.exponent <= -0.4, (study.exponent, study.exponent_ci)


@pytest.mark.parametrize("param, inequality", [
    (tp.sp(3), "r = -1 < 0"), (tp.sp(3), "q = 0 < 1"), (tp.ntp(2, c="-1/2"), "q = 1/2 < 1")])
def test_unstable_parametrizations_name_the_violated_inequality(param, inequality):
    with pytest.raises(tp.UnstableParametrizationError, match=inequality):
        tp.simulate_limit(tp.MLP(param, 2, 1), tp.Routine(lr=0.5, **D1))


def test_erf_nngp_by_hand_L2():
    def V(a, b, c):
        return (2 / np.pi) * np.arcsin(2 * c / np.sqrt((1 + 2 * a) * (1 + 2 * b)))

    s1, s2 = 1.5, 0.8
    a, b, c = s1 ** 2 * 1.0, s1 ** 2 * 1.0, s1 ** 2 * 0.6          # inputs (1,0), (0.6,0.8)
    V1 = V(a, b, c)
    V1aa, V1bb = V(a, a, a), V(b, b, b)
    V2 = V(s2 ** 2 * V1aa, s2 ** 2 * V1bb, s2 ** 2 * V1)
    net = tp.MLP(tp.ntp(2), 2, 1, phi="erf", sigma=[s1, s2, 1.0])
    assert tp.nngp(net, X3)[0, 1] == pytest.approx(V2, rel=1e-12)
