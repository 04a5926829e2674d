"""Per-example losses and their gradients."""
import numpy as np
import pytest

from tp_limits.losses import get_loss


@pytest.mark.parametrize("loss", ["mse", "xent"])
def test_loss_gradients(loss):
    rng = np.random.default_rng(1)
    f = rng.standard_normal((4, 3))
    y = np.eye(3)[[0, 2, 1, 1]] if loss == "xent" else rng.standard_normal((4, 3))
    L = get_loss(loss)
    h = 1e-6
    fd = np.zeros_like(f)
    for i in range(4):
        for j in range(3):
            e = np.zeros_like(f)
            e[i, j] = h
            fd[i, j] = (L.value(f + e, y, np) - L.value(f - e, y, np))[i] / (2 * h)
    assert np.allclose(L.grad(f, y, np), fd, atol=1e-7)
