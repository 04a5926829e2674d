"""The exact deep linear limit (docs/theory.md §4.5) against theory values and finite networks."""
import numpy as np
import pytest
from conftest import D1, N8, N8_LONG, t_quantile

import tp_limits as tp
from tp_limits.limit.exact.program import deep_linear
from tp_limits.spec import Problem


def test_n3_first_step_true_and_decoupled():
    net = tp.MLP(tp.mup(2), 2, 1, phi="id")
    r = tp.Routine(lr=0.5, **D1)
    true = tp.simulate_limit(net, r)
    dec = tp.simulate_limit(net, r, backprop="decoupled")
    assert true.meta["engine"] == "limit/deep_linear" and np.all(true.f_eval_se == 0)
    assert np.allclose(true.f_eval[1, :, 0], [1.5, 0.9, 1.5], atol=1e-12)
    assert np.allclose(dec.f_eval[1, :, 0], [1.0, 0.6, 1.0], atol=1e-12)
    assert np.all(true.f_eval[0] == 0)


def test_n8_first_step_is_one_kernel_step():
    net = tp.MLP(tp.mup(2), 3, 2, phi="id", sigma=[1.3, 0.7, 1.2])
    tr = tp.simulate_limit(net, tp.Routine(lr=0.4, **N8_LONG))
    # K = (0.7056 + 2.4336 + 0.8281) ξ·ζ, χ_0 = (-1/2, 0), (0, 1/2)
    assert np.allclose(tr.f_eval[1, 0], [0.79346, -0.79346], atol=1e-5)


def test_one_hidden_layer_reduces_to_the_closed_form():
    r = tp.Routine(lr=0.7, **N8)
    net = tp.MLP(tp.mup(1), 3, 2, phi="id", sigma=[1.3, 0.8], readout_multiplier=1.4)
    res = deep_linear(Problem(net, r), net.limit_constants(r.lr), False, range(r.steps + 1))
    assert np.allclose(res.f_eval, tp.simulate_limit(net, r).f_eval, atol=1e-12)


def test_symmetry_orbit_and_switches():
    r = tp.Routine(lr=0.25, **D1)
    a = tp.simulate_limit(tp.MLP(tp.mup(3), 2, 1, phi="id"), r)
    b = tp.simulate_limit(tp.MLP(tp.mup(3, form="a0"), 2, 1, phi="id"), r)
    assert np.allclose(a.f_eval, b.f_eval, atol=1e-12)
    frozen = tp.ABC([0] * 4, [0, "1/2", "1/2", 1], [0, 0, 0, 1])        # S9: r_1 = 1
    c = tp.simulate_limit(tp.MLP(frozen, 2, 1, phi="id"), r)
    assert c.meta["switches"]["train_layers"] == [False, True, True]
    assert np.all(c.stats["dh_rms"][:, 0] == 0) and np.all(c.stats["dh_rms"][2:, 1] > 0)


@pytest.mark.parametrize("case", ["D1, L=2", "D1, L=3", "N8, L=2"])
def test_matches_finite_networks(case):
    """Exact limit vs the seed mean of finite networks at n = 4096 (10 seeds): the rms
    deviation is 0.6–1.4 standard errors of the mean in all three cases (0.4–1.0 at
    8192, four times the cost)."""
    if case == "D1, L=2":
        net, r = tp.MLP(tp.mup(2), 2, 1, phi="id"), tp.Routine(lr=0.5, **D1)
    elif case == "D1, L=3":
        net, r = tp.MLP(tp.mup(3), 2, 1, phi="id"), tp.Routine(lr=0.25, **D1)
    else:
        net = tp.MLP(tp.mup(2), 3, 2, phi="id", sigma=[1.3, 0.7, 1.2])
        r = tp.Routine(lr=0.4, **N8_LONG)
    limit = tp.simulate_limit(net, r)
    fin = np.array([tp.train_finite(net, r, 4096, seed=s, record=()).f_eval for s in range(10)])
    mean, se = fin.mean(axis=0)[1:], fin.std(axis=0, ddof=1)[1:] / np.sqrt(len(fin))
    dev = mean - limit.f_eval[1:]
    assert np.sqrt(np.mean(dev ** 2)) <= 3 * np.sqrt(np.mean(se ** 2))
    assert np.all(np.abs(dev) < t_quantile(9) * se + 1e-3)     # 10 seeds, O(1/n) bias
    # negative control: the decoupled limit is not what true-backprop networks do
    if net.L >= 2:
        dec = tp.simulate_limit(net, r, backprop="decoupled")
        assert np.sqrt(np.mean((mean - dec.f_eval[1:]) ** 2)) > 10 * np.sqrt(np.mean(se ** 2))


def test_statistics_match_finite_networks():
    net, r = tp.MLP(tp.mup(2), 2, 1, phi="id"), tp.Routine(lr=0.5, **D1)
    limit = tp.simulate_limit(net, r)
    fin = np.array([tp.train_finite(net, r, 4096, seed=s, record=("stats",)).stats["dh_rms"]
                    for s in range(6)])
    se = fin.std(axis=0, ddof=1) / np.sqrt(len(fin))
    dev = np.abs(fin.mean(axis=0) - limit.stats["dh_rms"])[1:]
    assert np.all(dev < t_quantile(5) * se[1:] + 0.02)       # 6 seeds, O(1/n) bias


def test_deep_limits_not_yet_supported_are_refused():
    r = tp.Routine(lr=0.5, **D1)
    with pytest.raises(tp.SpecError, match="no closed form"):
        tp.simulate_limit(tp.MLP(tp.mup(2, optimizer="adam"), 2, 1, phi="id"), r, method="exact")
    with pytest.raises(tp.SpecError, match="decoupled"):
        tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1, phi="id"), r, backprop="decoupled")
    with pytest.raises(tp.SpecError, match="backprop"):
        tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1, phi="id"), r, backprop="partial")
