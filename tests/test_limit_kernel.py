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


def test_erf_closed_form_by_hand_and_vs_the_numerical_rule():
    net = tp.MLP(tp.ntp(1), 2, 1, phi="erf", sigma=[1.5, 1.0])
    a, c = 1.5 ** 2, 1.5 ** 2 * 0.6
    V = (2 / np.pi) * np.arcsin(2 * c / (1 + 2 * a))
    assert tp.nngp(net, X3)[0, 1] == pytest.approx(V, rel=1e-12)
    # the numerical rule against erf's closed form, from norm 0.1 to 10 (variance 100)
    for scale in (0.1, 1.0, 10.0):
        closed = kernels.layer_kernels("erf", (1.2, 0.9, 1.1), scale * X3)
        numerical = pair_moments._numerical("erf")
        S = 1.2 ** 2 * scale ** 2 * X3 @ X3.T
        Vq, Vdq = pair_moments.pairwise(S, numerical)
        for got, want in ((Vq, closed["V"][0]), (Vdq, closed["Vdot"][0])):
            norm = np.sqrt(np.outer(np.diag(want), np.diag(want)))
            assert np.max(np.abs(got - want) / norm) < 1e-10, scale


def test_tanh_numerical_rule_vs_monte_carlo():
    rng = np.random.default_rng(0)
    a, b, c = 1.0, 2.0, 0.9
    Vq, Vdq = pair_moments._numerical("tanh")(np.array(a), np.array(b), np.array(c))
    z = rng.standard_normal((2, 2_000_000))
    u = np.sqrt(a) * z[0]
    v = c / np.sqrt(a) * z[0] + np.sqrt(b - c * c / a) * z[1]
    prod = np.tanh(u) * np.tanh(v)
    assert abs(prod.mean() - Vq) < 5 * prod.std() / np.sqrt(prod.size)
    dprod = (1 - np.tanh(u) ** 2) * (1 - np.tanh(v) ** 2)
    assert abs(dprod.mean() - Vdq) < 5 * dprod.std() / np.sqrt(dprod.size)


# ---- kernel accuracy at every input scale, against an independent integration ------------
NUMERICAL = ("tanh", "gelu", "sigmoid", "softplus")


def reference_moments(phi, a, b, c):
    """E[φ(u)φ(v)], E[φ′(u)φ′(v)] by SciPy's adaptive cubature (relative tolerance 1e-12),
    on the whitened square [−12, 12]² split at the origin; 1-D adaptive quadrature on the
    diagonal (c² = ab).  Nothing here is shared with the library's rule."""
    from scipy.integrate import cubature, quad
    nl = {"tanh": (np.tanh, lambda x: 1 / np.cosh(x) ** 2),
          "sigmoid": (lambda x: 0.5 * (1 + np.tanh(x / 2)),
                      lambda x: 0.25 / np.cosh(x / 2) ** 2),
          "softplus": (lambda x: np.logaddexp(0, x), lambda x: 0.5 * (1 + np.tanh(x / 2))),
          "gelu": (lambda x: 0.5 * x * (1 + erf_(x / np.sqrt(2))),
                   lambda x: 0.5 * (1 + erf_(x / np.sqrt(2)))
                   + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)),
          "erf": (erf_, lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x))}[phi]
    if abs(c * c - a * b) <= 1e-12 * a * b:               # one Gaussian: a 1-D integral
        r = np.sqrt(b / a) * np.sign(c)
        out = []
        for f in nl:
            def g(z, f=f):
                return f(np.sqrt(a) * z) * f(r * np.sqrt(a) * z) * np.exp(-z * z / 2)
            out.append(sum(quad(g, lo, hi, epsabs=1e-17, epsrel=1e-12, limit=400)[0]
                           for lo, hi in ((-12, -1), (-1, 0), (0, 1), (1, 12))) / np.sqrt(2 * np.pi))
        return np.array(out)
    L = np.linalg.cholesky(np.array([[a, c], [c, b]]))

    def f(x):
        uv = x @ L.T
        w = np.exp(-0.5 * np.sum(x * x, axis=-1)) / (2 * np.pi)
        return np.stack([nl[0](uv[:, 0]) * nl[0](uv[:, 1]) * w,
                         nl[1](uv[:, 0]) * nl[1](uv[:, 1]) * w], axis=-1)
    res = cubature(f, [-12.0, -12.0], [12.0, 12.0], rtol=1e-12, atol=1e-15,
                   max_subdivisions=100_000, points=[np.zeros(2)])
    assert res.status == "converged"
    return res.estimate


def erf_(x):
    from scipy.special import erf
    return erf(x)


def reference_kernels(phi, sigma, X):
    """NNGP and NTK by the recursion of docs/theory.md §5.3 on reference moments."""
    n, L = len(X), len(sigma) - 1
    S = sigma[0] ** 2 * X @ X.T
    Vs, Vds = [], []
    for l in range(L):
        V, Vd = np.empty((n, n)), np.empty((n, n))
        for i in range(n):
            for j in range(i, n):
                V[i, j], Vd[i, j] = V[j, i], Vd[j, i] = reference_moments(phi, S[i, i], S[j, j],
                                                                          S[i, j])
        Vs.append(V)
        Vds.append(Vd)
        S = sigma[l + 1] ** 2 * V
    Pi = sigma[L] ** 2 * Vds[-1]
    ntk = Vs[-1] + Pi * (Vs[-2] if L >= 2 else X @ X.T)
    for l in range(L - 1, 0, -1):
        Pi = sigma[l] ** 2 * Pi * Vds[l - 1]
        ntk = ntk + Pi * (Vs[l - 2] if l >= 2 else X @ X.T)
    return sigma[L] ** 2 * Vs[-1], ntk


def test_the_reference_itself_against_erfs_closed_form():
    """The reference integration reproduces a closed form to far better than 1e-9."""
    for a, b, corr in ((0.01, 0.02, 0.3), (1.0, 2.0, 0.9), (100.0, 64.0, 0.5), (49.0, 49.0, 1.0)):
        c = corr * np.sqrt(a * b)
        V, Vd = reference_moments("erf", a, b, c)
        q = (1 + 2 * a) * (1 + 2 * b)
        assert abs(V - 2 / np.pi * np.arcsin(2 * c / np.sqrt(q))) < 1e-11
        if corr < 1:
            assert abs(Vd - 4 / np.pi / np.sqrt(q - 4 * c * c)) < 1e-11 * (4 / np.pi / np.sqrt(q))


@pytest.mark.parametrize("phi", NUMERICAL)
def test_kernels_accurate_at_every_input_scale(phi):
    """NNGP and NTK at input norms 0.1 to 10 and depths 1 to 4 against the reference: the
    worst error relative to the kernel's own scale √(K(ξ,ξ) K(ζ,ζ)) is below 1e-10 (the
    old fixed 80-node rule was off by 11 % at norm 4).  Matrices are exactly symmetric."""
    unit = np.array([[1.0, 0.0], [0.6, 0.8], [-0.28, 0.96]])
    sigma = (1.0, 1.2, 0.9, 1.1, 1.3)
    worst = 0.0
    for norm in (0.1, 1.0, 4.0, 10.0):
        X = norm * unit
        for L in (1, 2, 3, 4):
            net = tp.MLP(tp.ntp(L), 2, 1, phi=phi, sigma=sigma[: L + 1])
            K_nngp, K_ntk = tp.nngp(net, X), tp.ntk(net, X)
            assert np.array_equal(K_nngp, K_nngp.T) and np.array_equal(K_ntk, K_ntk.T)
            ref_nngp, ref_ntk = reference_kernels(phi, sigma[: L + 1], X)
            for got, want in ((K_nngp, ref_nngp), (K_ntk, ref_ntk)):
                scale = np.sqrt(np.outer(np.diag(want), np.diag(want)))
                worst = max(worst, float(np.max(np.abs(got - want) / scale)))
    assert worst < 1e-10, worst


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
    study = tp.convergence(net, tp.Routine(lr=0.5, **D1), [256, 512, 1024, 2048, 4096],
                           seeds=12)
    assert study.conditioned and study.limit is None
    assert -0.6 <= study.exponent <= -0.4, (study.exponent, study.exponent_ci)


def test_tanh_networks_at_large_inputs_follow_the_accurate_kernel():
    """NTP, tanh, inputs of norm 4 (pre-activation variance 16, where the old fixed rule
    had E[φ′φ′] 15 % off and the residual stalled at 0.02-0.04): networks of widths
    4096-65536 track kernel gradient descent from their own f_0 with a residual that
    falls like n^{-1/2}."""
    unit = np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0], [-0.28, 0.96]])
    r = tp.Routine(4 * unit, np.array([[1.0], [-1.0], [1.0], [0.5]]), lr=0.3,
                   eval_inputs=4 * unit[[0, 1, 3]])
    net = tp.MLP(tp.ntp(1), 2, 1, phi="tanh")
    study = tp.convergence(net, r, [4096, 16384, 65536], seeds=8, executor="serial")
    assert study.conditioned
    assert np.all(np.diff(np.log(study.rms)) < 0)
    assert -0.7 <= study.exponent <= -0.3, (study.exponent, study.exponent_ci, study.rms)


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
