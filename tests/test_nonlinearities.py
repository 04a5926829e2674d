"""Nonlinearities φ with φ′ and φ″."""
import numpy as np
import pytest

from tp_limits.engine.backend import get_backend
from tp_limits.nonlinearities import NONLINEARITIES

NP = get_backend("numpy")


@pytest.mark.parametrize("name", sorted(NONLINEARITIES))
def test_derivatives_match_finite_differences(name):
    nl = NONLINEARITIES[name]
    x = np.linspace(-3, 3, 61) + 1e-3          # avoid relu's kink at 0
    h = 1e-6
    fd1 = (nl.phi(x + h, NP) - nl.phi(x - h, NP)) / (2 * h)
    fd2 = (nl.dphi(x + h, NP) - nl.dphi(x - h, NP)) / (2 * h)
    assert np.allclose(nl.dphi(x, NP), fd1, atol=1e-7)
    assert np.allclose(nl.d2phi(x, NP), fd2, atol=1e-6)


def test_nonlinearity_values():
    x = np.array([-2.0, 0.0, 1.5])
    assert np.allclose(NONLINEARITIES["gelu"].phi(x, NP), [-0.04550026, 0.0, 1.39978919])
    assert np.allclose(NONLINEARITIES["softplus"].phi(np.array([800.0, -800.0]), NP), [800.0, 0.0])
    assert np.allclose(NONLINEARITIES["sigmoid"].phi(np.array([-800.0, 0.0]), NP), [0.0, 0.5])
    assert NONLINEARITIES["relu"].homogeneous and not NONLINEARITIES["tanh"].homogeneous


@pytest.mark.parametrize("name", sorted(n for n, nl in NONLINEARITIES.items()
                                        if nl.dphi_of_value is not None))
def test_derivative_from_the_value(name):
    """dphi_of_value(φ(x)) is φ′(x), at the kink and far in the tails too."""
    nl = NONLINEARITIES[name]
    x = np.concatenate([np.linspace(-40, 40, 8001), [0.0, -0.0, 1e-300, -1e-300]])
    assert np.allclose(nl.dphi_of_value(nl.phi(x, NP)), nl.dphi(x, NP), rtol=1e-15,
                       atol=1e-16)


# ---- silu: a nonlinearity added as one registry entry ------------------------------------
def test_silu_is_x_times_the_logistic_without_overflow():
    nl = NONLINEARITIES["silu"]
    x = np.array([-800.0, -30.0, -1.0, 0.0, 0.7, 30.0, 800.0])
    with np.errstate(over="ignore"):
        ref = x / (1.0 + np.exp(-x))
    assert np.allclose(nl.phi(x, NP), ref, rtol=1e-14, atol=1e-15)     # an ulp of O(1)
    assert np.all(np.isfinite(nl.dphi(x, NP))) and np.all(np.isfinite(nl.d2phi(x, NP)))
    assert nl.smooth and not (nl.homogeneous or nl.odd or nl.piecewise_linear)


def test_silu_kernels_by_quadrature_match_monte_carlo():
    """The NNGP and NTK of a silu NTP network: the nested quadrature of the kernels (no
    closed form) against their Monte Carlo estimates from 4·10⁶ Gaussian pairs, per layer
    recursion written out here, within 5 standard errors."""
    import tp_limits as tp
    X = np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 1.0]])
    net = tp.MLP(tp.ntp(1), 2, 1, phi="silu")
    K = tp.nngp(net, X)
    Sigma = X @ X.T                                          # σ_1 = 1: Σ¹ = ξ·ζ
    rng = np.random.default_rng(0)
    z = rng.standard_normal((4_000_000, 3)) @ np.linalg.cholesky(Sigma + 1e-15 * np.eye(3)).T
    nl = NONLINEARITIES["silu"]
    prod = nl.phi(z, NP)[:, :, None] * nl.phi(z, NP)[:, None, :]
    mc, se = prod.mean(axis=0), prod.std(axis=0) / np.sqrt(len(z))
    assert np.all(np.abs(K - mc) <= 5 * se), np.max(np.abs(K - mc) / se)


def test_silu_in_the_limit_engines_and_finite_networks():
    """One hidden layer: Monte Carlo (the array twin) against the Gauss–Hermite rule;
    deep (L = 2): the Monte Carlo limit against wide finite networks."""
    from conftest import N8, d1, within_se

    import tp_limits as tp
    one = tp.MLP(tp.mup(1), 2, 1, phi="silu")
    quad = tp.simulate_limit(one, d1(), particles=40 ** 3, method="quadrature", kernel="numpy")
    mc = tp.simulate_limit(one, d1(), particles=2 ** 16, kernel="numpy")
    within_se(mc.f_eval[1:], quad.f_eval[1:], np.hypot(mc.f_eval_se[1:], quad.f_eval_se[1:]),
              mc.se_dof)
    deep = tp.MLP(tp.mup(2), 3, 2, phi="silu")
    r = tp.Routine(lr=0.4, **N8)
    lim = tp.simulate_limit(deep, r, particles=2 ** 14)
    fin = np.array([tp.train_finite(deep, r, 4096, seed=s, record=()).f_eval[-1]
                    for s in range(6)])
    se = np.hypot(fin.std(axis=0, ddof=1) / np.sqrt(len(fin)), lim.f_eval_se[-1])
    assert np.all(np.abs(fin.mean(axis=0) - lim.f_eval[-1]) <= 4 * se)
    assert np.abs(lim.f_eval[-1] - lim.f_eval[0]).max() > 10 * se.max()   # it did learn
