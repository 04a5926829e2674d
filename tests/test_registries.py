"""Every registered optimizer and nonlinearity against every engine, read from the
registries themselves, so a new entry enrolls itself: each pair either runs and agrees
(finite networks approach the limit, exact = Monte Carlo where an exact engine applies,
the empirical NTK approaches the limiting one), or is refused with an error that names
what cannot run.  (Layer kinds: tests/test_norms.py parametrizes over spec.layers.NORMS.)
"""
import numpy as np
import pytest
from conftest import N8_LONG, exact_against_monte_carlo, t_quantile

import tp_limits as tp
from tp_limits.nonlinearities import NONLINEARITIES
from tp_limits.spec.optimizers import OPTIMIZERS

#: the registered optimizers with their defaults
OPTS = {name: cls() for name, cls in OPTIMIZERS.items()}
LIMIT_ENGINES = ("one hidden layer", "deep")


def _problem(opt, L, phi="tanh"):
    net = tp.MLP(tp.mup(L, optimizer=opt.exponents), 3, 2, phi=phi)
    lr = 0.3 if opt.linear else 0.03
    return net, tp.Routine(lr=lr, optimizer=opt, **N8_LONG)


def _engine_kw(engine, opt):
    """The one-hidden-layer particle engine runs its array twin (kernel='numpy'): the
    compiled sweep is specialized per φ and update rule, which costs 20–60 s of compiling
    per pair on a cold cache (as in CI), and it is checked against the twin for every φ
    and rule in tests/test_limit_one_hidden_sweep.py; what this file checks is that the
    engine's arithmetic is right for every registered entry."""
    return {"kernel": "numpy"} if engine == "one hidden layer" and not opt.pair_matrix else {}


def _converges(net, r, **limit_kw):
    """The finite networks of widths 256 and 2048 (6 seeds) and the limit: the distance
    falls by about √8 (at least 1/0.6 here), and the limit moves the outputs."""
    limit = tp.simulate_limit(net, r, particles=2 ** 13, replicates=4, record=(), **limit_kw)
    assert np.abs(limit.f_eval[-1] - limit.f_eval[0]).max() > 1e-3
    study = tp.convergence(net, r, [256, 2048], seeds=6, limit=limit, executor="serial")
    assert study.rms[1] < 0.6 * study.rms[0], study.table()
    return limit


@pytest.mark.parametrize("name", list(OPTS))
@pytest.mark.parametrize("engine", LIMIT_ENGINES)
def test_every_optimizer_converges_to_its_limit(name, engine):
    opt = OPTS[name]
    net, r = _problem(opt, 1 if engine == "one hidden layer" else 2)
    _converges(net, r, **({"partners": 64} if opt.partners and engine == "deep" else {}),
               **_engine_kw(engine, opt))


@pytest.mark.parametrize("name", list(OPTS))
def test_every_optimizer_has_an_exact_linear_limit_or_is_refused(name):
    opt = OPTS[name]
    net, r = _problem(opt, 2, phi="id")
    if opt.exact_linear:
        exact, _, _ = exact_against_monte_carlo(net, r)
        assert np.abs(exact.f_eval[-1] - exact.f_eval[0]).max() > 1e-3
    else:
        with pytest.raises(tp.SpecError, match=r"method='exact' follows"):
            tp.simulate_limit(net, r, method="exact")


@pytest.mark.parametrize("name", list(OPTS))
def test_every_optimizer_runs_in_the_kernel_regime_or_says_why_not(name):
    """Kernel gradient descent for the optimizers linear in the gradients (NTP-SGD here);
    for the others the refusal names the optimizer and the regime."""
    opt = OPTS[name]
    why = opt.kernel_refusal("kernel")
    if why is None:
        net = tp.MLP(tp.ntp(2), 3, 2, phi="tanh")
        lim = tp.simulate_limit(net, tp.Routine(lr=0.3, optimizer=opt, **N8_LONG))
        assert lim.meta["engine"].startswith("limit/kernel")
    else:
        assert str(opt).split("(")[0] in why and "kernel regime" in why


@pytest.mark.parametrize("phi", list(NONLINEARITIES))
@pytest.mark.parametrize("engine", LIMIT_ENGINES)
def test_every_nonlinearity_converges_to_its_limit(phi, engine):
    net, r = _problem(OPTS["sgd"], 1 if engine == "one hidden layer" else 2, phi=phi)
    _converges(net, r, method="monte_carlo", **_engine_kw(engine, OPTS["sgd"]))


@pytest.mark.parametrize("phi", list(NONLINEARITIES))
def test_every_nonlinearity_has_its_kernels(phi):
    """The limiting NTK (closed form or quadrature of the pair moments) against the
    empirical NTK of width-2048 networks (8 seeds) within the t bound plus an O(1/n)
    allowance."""
    X = N8_LONG["X"][:4]
    net = tp.MLP(tp.ntp(2), 3, 1, phi=phi)
    Ks = np.array([tp.empirical_ntk(net, X, width=2048, seed=s) for s in range(8)])
    mean, se = Ks.mean(axis=0), Ks.std(axis=0, ddof=1) / np.sqrt(len(Ks))
    assert np.all(np.abs(mean - tp.ntk(net, X)) < t_quantile(7) * se + 5e-3)


@pytest.mark.parametrize("phi", list(NONLINEARITIES))
def test_every_nonlinearity_has_an_exact_limit_only_if_linear(phi):
    net, r = _problem(OPTS["sgd"], 2, phi=phi)
    if phi == "id":
        assert tp.simulate_limit(net, r).meta["method"] == "exact"
    else:
        with pytest.raises(tp.SpecError, match=f"needs phi='id'.*phi='{phi}'"):
            tp.simulate_limit(net, r, method="exact")
