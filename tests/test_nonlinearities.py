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
