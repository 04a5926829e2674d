"""MLP / Routine validation, nonlinearities and losses."""
import numpy as np
import pytest

import tp_limits as tp
from tp_limits.backend import get_backend
from tp_limits.losses import get_loss
from tp_limits.nonlinearities import NONLINEARITIES

NP = get_backend("numpy")
D1_X = np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]])
D1_Y = np.array([[1.0], [-1.0], [1.0]])


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


def test_routine_defaults_and_batches():
    r = tp.Routine(D1_X, D1_Y, lr=0.5)
    assert r.steps == 3 and r.batch_size == 1
    assert np.array_equal(r.eval_inputs, D1_X[:2])       # distinct inputs, first-seen order
    r2 = tp.Routine(np.zeros((6, 2)), np.zeros(6), lr=1, batch_size=2)
    assert r2.steps == 3 and r2.targets(1).shape == (6, 1)
    assert tp.Routine(np.zeros((7, 2)), np.zeros(7), lr=1, batch_size=2, steps=3).steps == 3


def test_xent_targets():
    r = tp.Routine(np.eye(3), np.array([0, 2, 1]), lr=1, loss="xent")
    assert np.array_equal(r.targets(4), np.eye(4)[[0, 2, 1]])
    with pytest.raises(tp.SpecError, match="needs d_out > 2"):
        r.targets(2)
    with pytest.raises(tp.SpecError, match="one-hot"):
        tp.Routine(np.eye(2), np.array([[0.5, 0.5], [1, 0]]), lr=1, loss="xent")


@pytest.mark.parametrize("kwargs, match", [
    (dict(X=np.zeros(3), Y=np.zeros(3)), "2-D"),
    (dict(X=[[0, np.nan]], Y=[[0]]), "NaN or inf .*row 0, column 1"),
    (dict(X=[[0, 1]], Y=[[np.inf]]), "NaN or inf"),
    (dict(X=np.zeros((3, 2)), Y=np.zeros((2, 1))), "Y has 2 rows but X has 3"),
    (dict(X=np.zeros((3, 2)), Y=np.zeros(3), batch_size=2), "not a multiple"),
    (dict(X=np.zeros((3, 2)), Y=np.zeros(3), steps=4), "exceeds"),
    (dict(X=np.zeros((3, 2)), Y=np.zeros(3), loss="hinge"), "unknown loss"),
    (dict(X=np.zeros((3, 2)), Y=np.zeros(3), lr=-1), "positive"),
    (dict(X=np.zeros((3, 2)), Y=np.zeros(3), lr=float("nan")), "positive"),
    (dict(X=np.zeros((3, 2)), Y=np.zeros(3), eval_inputs=np.zeros((2, 3))), "dimension 3"),
    (dict(X=np.zeros((3, 2)), Y=np.zeros(3), batch_size=0), "batch_size"),
])
def test_bad_routines(kwargs, match):
    kwargs.setdefault("lr", 0.1)
    with pytest.raises(tp.SpecError, match=match):
        tp.Routine(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(phi="swish"), "unknown nonlinearity"),
    (dict(d_in=0), "d_in"),
    (dict(sigma=[1, 2]), "sigma has 2 entries"),
    (dict(lr_mult=[1, -1, 1]), "positive"),
    (dict(readout_multiplier=0), "readout_multiplier"),
    (dict(output_scale=0), "output_scale"),
])
def test_bad_mlps(kwargs, match):
    args = dict(param=tp.mup(2), d_in=2, d_out=1)
    args.update(kwargs)
    with pytest.raises(tp.SpecError, match=match):
        tp.MLP(**args)


def test_mlp_rejects_symbolic_and_non_abc():
    import sympy
    with pytest.raises(tp.SpecError, match="free symbols"):
        tp.MLP(tp.sp(2, c=sympy.Symbol("c")), 2, 1)
    with pytest.raises(tp.SpecError, match="tp.ABC"):
        tp.MLP("mup", 2, 1)


def test_output_scale_constants():
    net = tp.MLP(tp.mup(2), 2, 1, sigma=[1, 2, 3], readout_multiplier=2.0, output_scale=0.5)
    assert net.effective_sigma == (0.5, 1.0, 1.5)
    assert net.output_multiplier == pytest.approx(2.0 * 0.5 ** -3)
