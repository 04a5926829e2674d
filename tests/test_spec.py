"""The problem description: MLP, Routine, Problem, and the per-layer constants."""
import numpy as np
import pytest

import tp_limits as tp

D1_X = np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]])
D1_Y = np.array([[1.0], [-1.0], [1.0]])


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


def test_finite_constants_are_the_abc_powers_of_n():
    """init std σ n^{-(a+b)} and W-space rate η n^{-(2a+c)} (SGD), Adam η n^{-c} on w."""
    net = tp.MLP(tp.mup(2), 2, 1, sigma=[1.5, 1.0, 2.0], lr_mult=[1.0, 3.0, 1.0])
    c = net.finite_constants(64, lr=0.5)
    assert c.init_std == pytest.approx((1.5, 64 ** -0.5, 2.0 / 64))
    assert c.lr == pytest.approx((0.5 * 64, 1.5, 0.5 / 64))
    assert c.adam_lr == pytest.approx((0.5, 1.5, 0.5)) and c.w_scale == pytest.approx((8, 1, 1 / 8))
    zero = tp.MLP(tp.ABC([0, 0], [0, "oo"], [-1, 1]), 2, 1).finite_constants(16)
    assert zero.init_std[-1] == 0.0
    assert net.lr_exponents() == (-1, 0, 1)                       # TP4 μP: 2a + c
    assert tp.MLP(tp.mup(2, optimizer="adam"), 2, 1).lr_exponents() == (0, 1, 1)   # a + c


def test_limit_constants_carry_the_switches():
    frozen = tp.MLP(tp.ABC([0] * 4, [0, "1/2", "1/2", 1], [0, 0, 0, 1]), 2, 1, lr_mult=2.0)
    c = frozen.limit_constants(0.25)
    assert c.eta == (0.0, 0.5, 0.5, 0.5) and c.readout_init
    with pytest.raises(tp.SpecError, match="feature-learning"):
        tp.MLP(tp.ntp(2), 2, 1).limit_constants(0.5)


def test_problem_batches_and_targets():
    from tp_limits.spec import Problem
    r = tp.Routine(D1_X, np.array([0, 1, 0]), lr=0.5, loss="xent")
    p = Problem(tp.MLP(tp.mup(1), 2, 2), r)
    X1, Y1 = p.batch(1)
    assert np.array_equal(X1, D1_X[1:2]) and np.array_equal(Y1, [[0.0, 1.0]])
    X1[0, 0] = 99.0                                    # a fresh copy: the routine is untouched
    assert r.X[1, 0] == 0.6
    with pytest.raises(tp.SpecError, match="d_out > 1"):
        Problem(tp.MLP(tp.mup(1), 2, 1), r)
    assert np.array_equal(tp.kernel_points(r), D1_X[:2])


def test_a_zero_rate_multiplier_freezes_its_layer():
    """lr_mult_l = 0 keeps layer l at its initialization (the published infinite-depth
    analysis fixes the input layer and the readout); all zero is refused."""
    rng = np.random.default_rng(0)
    r = tp.Routine(rng.standard_normal((6, 3)), rng.standard_normal((6, 2)), lr=0.1,
                   batch_size=2)
    net = tp.MLP(tp.mup(2), 3, 2, lr_mult=[0, 1.5, 0])
    w = tp.train_finite(net, r, 64, seed=0, keep_weights=True, record=()).weights
    assert np.array_equal(w.initial[0], w.final[0]) and np.array_equal(w.initial[2], w.final[2])
    assert not np.array_equal(w.initial[1], w.final[1])
    with pytest.raises(tp.SpecError, match="nothing would train"):
        tp.MLP(tp.mup(2), 3, 2, lr_mult=[0, 0, 0])


def test_a_routine_from_a_dataset_draws_shuffled_epochs():
    """Routine.from_arrays: each epoch a seeded permutation, incomplete batches dropped, the
    steps cycling through the epochs; the same seed gives the same batches; without
    shuffle the data in order."""
    X = np.arange(20.0).reshape(10, 2)
    y = np.arange(10)
    r = tp.Routine.from_arrays(X, y, lr=0.1, batch_size=3, epochs=2, seed=4, loss="xent")
    assert r.steps == 6 and r.batch_size == 3                  # ⌊10/3⌋ = 3 batches per epoch
    first, second = r.Y[:9], r.Y[9:]
    assert len(set(first)) == 9 and len(set(second)) == 9     # no example twice in an epoch
    assert not np.array_equal(first, second)                  # a fresh permutation each epoch
    assert np.array_equal(r.X[:, 0], 2.0 * r.Y)               # rows stay with their targets
    again = tp.Routine.from_arrays(X, y, lr=0.1, batch_size=3, epochs=2, seed=4, loss="xent")
    assert np.array_equal(again.Y, r.Y)
    steps = tp.Routine.from_arrays(X, y, lr=0.1, batch_size=4, steps=5, shuffle=False,
                                   loss="xent")
    assert steps.steps == 5 and list(steps.Y[:8]) == list(range(8))   # 2 batches a pass
    assert list(steps.Y[8:12]) == list(range(4))
    with pytest.raises(tp.SpecError, match="not both"):
        tp.Routine.from_arrays(X, y, lr=0.1, steps=3, epochs=1)
    with pytest.raises(tp.SpecError, match="Y has 9 rows but X has 10"):
        tp.Routine.from_arrays(X, y[:9], lr=0.1)
    with pytest.raises(tp.SpecError, match="batch_size = 11 exceeds the 10 examples"):
        tp.Routine.from_arrays(X, y, lr=0.1, batch_size=11)
    with pytest.raises(tp.SpecError, match="shuffle"):
        tp.Routine.from_arrays(X, y, lr=0.1, shuffle="yes")
