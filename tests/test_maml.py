"""First-order MAML for the linear one-hidden-layer network: its inner step against the
generic engines, its outer step against a numerical gradient, task sampling, and finite
widths converging to the exact limit (docs/theory.md §15.5)."""
import math

import numpy as np
import pytest
from scipy import stats

import tp_limits as tp
from tp_limits.datasets import digits_fewshot
from tp_limits.tasks.maml import (MAML, FewShot, _xent, adapt, maml_network, meta_step,
                                  query_outputs, train_maml)
from conftest import interrupt_on_call

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def pools():
    return digits_fewshot(shots=1, queries=5)


def one_task(pool, seed=0):
    return pool.sample(np.random.default_rng(seed), 1)


@pytest.mark.parametrize("param,width,limit", [(tp.mup(1), 40, None),
                                               (tp.mup(1), math.inf, "feature"),
                                               (tp.ntp(1), math.inf, "gp")])
def test_inner_step_is_one_step_of_the_generic_engines(pools, param, width, limit):
    """From meta-learned-looking weights (one generic step on another task first), one
    inner step equals the generic engine's next step on the support set."""
    train, _ = pools
    net = maml_network(param, train.d_in, 5)
    a, b = one_task(train, 1), one_task(train, 2)
    X = np.vstack([a.Xs[0], b.Xs[0]])
    y = np.concatenate([a.ys[0], b.ys[0]])
    r = tp.Routine(X, y, lr=0.7, loss="xent", batch_size=5, eval_inputs=b.Xq[0])
    if width == math.inf:
        ref = tp.simulate_limit(net, r)
        one = tp.simulate_limit(net, tp.Routine(X[:5], y[:5], lr=0.7, loss="xent",
                                                batch_size=5, eval_inputs=b.Xq[0]))
        # state after the first task, in the pair's coordinates: replay the first step
        from tp_limits.tasks.pair import initial, rates
        E_in, E_out, _ = initial(net, width)
        lr_in, lr_out, alpha = rates(net, width, 0.7, limit)
        A, C = adapt(E_in, E_out, a.Xs, a.ys, lr_in, lr_out, alpha)
        assert np.abs(query_outputs(A, C, b.Xq, alpha)[0] - one.f_eval[1]).max() <= 1e-12
        A2, C2 = adapt(A[0], C[0], b.Xs, b.ys, lr_in, lr_out, alpha)
        got = query_outputs(A2, C2, b.Xq, alpha)[0]
    else:
        ref = tp.train_finite(net, r, width, seed=3, keep_weights=True)
        W1, W2 = ref.weights.initial
        from tp_limits.tasks.pair import rates
        lr_in, lr_out, alpha = rates(net, width, 0.7)
        A, C = adapt(W1.T, W2, a.Xs, a.ys, lr_in, lr_out, alpha)
        A2, C2 = adapt(A[0], C[0], b.Xs, b.ys, lr_in, lr_out, alpha)
        got = query_outputs(A2, C2, b.Xq, alpha)[0]
        F1, F2 = ref.weights.final
        assert np.abs(A2[0] - F1.T).max() <= 1e-12 * np.abs(F1).max()
    scale = np.abs(ref.f_eval[-1]).max()
    assert scale > 1e-3
    assert np.abs(got - ref.f_eval[-1]).max() <= 1e-12 * max(scale, 1.0)


def test_outer_step_is_the_first_order_gradient(pools):
    train, _ = pools
    rng = np.random.default_rng(0)
    tasks = train.sample(rng, 3)
    d, m = train.d_in, 6
    E_in, E_out = rng.normal(size=(d, m)), 0.3 * rng.normal(size=(5, m))
    inner, alpha = (0.7, 0.4), 1.3
    A, C = adapt(E_in, E_out, tasks.Xs, tasks.ys, *inner, alpha)

    def loss(A, C):
        return _xent(query_outputs(A, C, tasks.Xq, alpha), tasks.yq)[0].mean()
    h = 1e-6
    gA = np.zeros((d, m))
    for i in range(d):
        for j in range(m):
            P, M = A.copy(), A.copy()
            P[:, i, j] += h
            M[:, i, j] -= h
            gA[i, j] = (loss(P, C) - loss(M, C)) / (2 * h)
    gC = np.zeros((5, m))
    for i in range(5):
        for j in range(m):
            P, M = C.copy(), C.copy()
            P[:, i, j] += h
            M[:, i, j] -= h
            gC[i, j] = (loss(A, P) - loss(A, M)) / (2 * h)
    Ei, Eo = E_in.copy(), E_out.copy()
    value = meta_step(Ei, Eo, tasks, inner, (0.5, 2.0), alpha)
    assert value == pytest.approx(loss(A, C), rel=1e-14)
    assert np.abs((E_in - Ei) / 0.5 - gA).max() <= 1e-7 * np.abs(gA).max()
    assert np.abs((E_out - Eo) / 2.0 - gC).max() <= 1e-7 * np.abs(gC).max()


def test_tasks_are_drawn_as_described(pools):
    train, test = pools
    assert set(train.classes).isdisjoint(test.classes) and len(train.classes) == 40
    t = train.sample(np.random.default_rng(4), 50)
    assert t.Xs.shape == (50, 5, train.d_in) and t.Xq.shape == (50, 25, train.d_in)
    assert np.all(t.Xs[..., -1] == 1.0)                        # the input bias coordinate
    assert np.array_equal(t.ys[0], np.arange(5)) and np.array_equal(t.yq[0],
                                                                   np.repeat(np.arange(5), 5))
    # within a task: the support and query examples of a class are distinct images
    both = np.concatenate([t.Xs[0], t.Xq[0]])
    assert len({row.tobytes() for row in both}) == len(both)


def test_finite_networks_converge_to_the_limit(pools):
    """Meta-test loss after meta-training: the seed mean approaches the exact limit (gap
    within 3 SE, seeds − 1 dof) and the rms distance falls like n^(−1/2)."""
    train, test = pools
    net = maml_network(tp.mup(1), train.d_in, 5)
    maml = MAML(1.0, 0.1, meta_batch=4, steps=30, seed=0)
    lim = train_maml(net, maml, train, test, math.inf, test_tasks=40)
    widths, seeds = (64, 256, 1024), 8
    rms, last = [], None
    for w in widths:
        runs = np.array([train_maml(net, maml, train, test, w, seed=s, test_tasks=40).test_loss
                         for s in range(seeds)])
        rms.append(np.sqrt(np.mean((runs - lim.test_loss) ** 2)))
        last = runs.mean(axis=1) - lim.test_loss.mean()
    fit = stats.linregress(np.log(widths), np.log(rms))
    assert -0.65 <= fit.slope <= -0.35, (fit.slope, rms)
    z = last.mean() / (last.std(ddof=1) / np.sqrt(seeds))
    assert abs(z) <= 3.0, z


def test_gp_limit_keeps_the_features(pools):
    train, test = pools
    net = maml_network(tp.mup(1), train.d_in, 5)
    r = train_maml(net, MAML(1.0, 0.3, 4, 10), train, test, math.inf, limit="gp",
                   test_tasks=20)
    E_in, E_out = r.weights
    assert np.array_equal(E_in, np.eye(train.d_in)) and np.abs(E_out).max() > 0
    assert r.status.complete and np.all((r.accuracy >= 0) & (r.accuracy <= 1))


def test_bad_inputs_are_named(pools):
    train, test = pools
    net = maml_network(tp.mup(1), train.d_in, 5)
    with pytest.raises(tp.SpecError, match="inner_lr"):
        MAML(-1.0, 0.1)
    with pytest.raises(tp.SpecError, match="limit"):
        train_maml(net, MAML(1.0, 0.1), train, test, math.inf, limit="ntk")
    with pytest.raises(tp.SpecError, match="ways"):
        train_maml(maml_network(tp.mup(1), train.d_in, 4), MAML(1.0, 0.1), train, test)
    with pytest.raises(tp.SpecError, match="maml_network"):
        train_maml(tp.MLP(tp.mup(1), train.d_in, 5, phi="id"), MAML(1.0, 0.1), train, test)
    with pytest.raises(tp.SpecError, match="class"):
        FewShot.of(train.X, train.y, train.classes, shots=500)
    with pytest.raises(tp.SpecError, match="train_digits"):
        digits_fewshot(train_digits=range(10))


def test_divergence_is_reported_with_its_step(pools):
    train, test = pools
    net = maml_network(tp.mup(1), train.d_in, 5)
    r = train_maml(net, MAML(50.0, 50.0, 4, 50), train, test, 64, test_tasks=5)
    assert r.status.diverged and len(r.loss) == r.status.divergence.step
    assert np.isnan(r.accuracy).all()


def test_ctrl_c_keeps_the_finished_meta_steps(pools, monkeypatch):
    from tp_limits.tasks import maml as module
    train, test = pools
    interrupt_on_call(monkeypatch, module, "meta_step", 3)
    net = maml_network(tp.mup(1), train.d_in, 5)
    r = train_maml(net, MAML(1.0, 0.1, 4, 10), train, test, math.inf, test_tasks=10)
    assert r.status.interrupted and r.status.completed_steps == 2 and len(r.loss) == 2
    assert np.isfinite(r.accuracy).all()          # the meta-test ran on the weights reached


@pytest.mark.parametrize("kw", [dict(bias=True), dict(norm="layer")], ids=["bias", "norm"])
def test_a_network_beyond_the_pair_is_refused(kw):
    """The pair's limit is a plain linear network: its own builder's network passes, the same
    network with a bias or a norm (program.plain false) is refused, naming the builder."""
    from tp_limits.tasks.pair import check_network
    net = maml_network(tp.mup(1), 4, 3)
    check_network(net, "MAML", "maml_network")
    other = tp.MLP(net.param, net.d_in, net.d_out, net.phi, **kw)
    with pytest.raises(tp.SpecError, match="no biases or norms: build the network with "
                                           "maml_network"):
        check_network(other, "MAML", "maml_network")
