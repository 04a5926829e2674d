"""Shared test data and helpers.

The routines are the standard problems of docs/theory.md §9 (data D1, N2,
N8); tests import them with ``from conftest import ...``.  Monte Carlo
comparisons take their tolerance from the estimator's standard error and
its degrees of freedom (:func:`within_se`).
"""
import os

import matplotlib
import numpy as np

matplotlib.use("Agg")

#: the thread pools a test process (and the kernels and workers it starts) would size to
#: the machine's cores
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_configure(config):
    """Under ``pytest -n W`` (pytest-xdist) each of the W worker processes computes on one
    thread: W processes each sizing their BLAS and Numba pools to every core would ask the
    machine for W times its cores, which made a two-core run slower than a serial one.
    Numba keeps its full pool (a test may still ask for more threads) and only its default
    becomes one: NUMBA_NUM_THREADS is not touched, since Numba rereads its environment when
    it compiles and refuses a pool size changed after its threads started.  Notebook kernels
    and the process pools the tests start inherit one BLAS thread each."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import numba
    from threadpoolctl import threadpool_limits

    for var in _THREAD_VARS:
        os.environ[var] = "1"
    numba.set_num_threads(1)
    threadpool_limits(1)


def child_env():
    """The environment of a process a test starts (a notebook's kernel): under
    ``pytest -n W`` also one Numba thread, which the test process itself cannot put in its
    own environment (see :func:`pytest_configure`).  Two Numba threads in a kernel beside a
    busy worker made a parallel kernel wait on its slower thread: notebook 07 took 225 s
    instead of 27.  None outside pytest-xdist: the kernel inherits the test's own."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return {**os.environ, "NUMBA_NUM_THREADS": "1"}

# D1: d = 2, d_out = 1, B = 1, three steps; eval inputs (1, 0), (0.6, 0.8), (1, 1)
D1 = dict(X=np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]]), Y=np.array([[1.0], [-1.0], [1.0]]),
          eval_inputs=np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 1.0]]))
# N2: d = 3, d_out = 2, B = 2, two steps
N2 = dict(X=np.array([[1, 0, 0], [0, 1, 0], [0.5, 0.5, 0.5], [1, -1, 0]], float),
          Y=np.array([[1, 0], [0, -1], [0.5, 0.5], [1, 0]], float),
          eval_inputs=np.array([[0, 0, 1], [1, 1, 1]], float), batch_size=2)
# N8: the N2 batches with eval inputs (1, 1, 1), (0, 0, 1); N8_LONG adds a third step
N8 = dict(X=N2["X"], Y=N2["Y"], eval_inputs=np.array([[1, 1, 1], [0, 0, 1]], float),
          batch_size=2)
N8_LONG = dict(X=np.vstack([N2["X"], [[0, 0, 1], [1, 1, 0]]]),
               Y=np.vstack([N2["Y"], [[0, 1], [-0.5, 0.5]]]),
               eval_inputs=N8["eval_inputs"], batch_size=2)


def d1(lr=0.5, **kw):
    import tp_limits as tp
    return tp.Routine(lr=lr, **D1, **kw)


#: Two-sided level of the Monte Carlo comparisons: a true difference of zero fails one
#: comparison with probability 1e-4 (±3.9 SE for a Gaussian, ±5.2 SE with 15 degrees of
#: freedom, ±7.9 with 7), whatever the degrees of freedom of the standard error.
LEVEL = 1 - 1e-4


def t_quantile(dof, level=LEVEL):
    """Two-sided Student-t quantile for ``dof`` degrees of freedom (Gaussian for None/inf)."""
    from scipy.stats import norm, t
    dof = np.asarray(dof if dof is not None else np.inf, float)
    return np.where(np.isfinite(dof), t.ppf(0.5 + level / 2, np.where(np.isfinite(dof), dof, 1)),
                    norm.ppf(0.5 + level / 2))


def welch_dof(se1, dof1, se2, dof2):
    """Welch–Satterthwaite degrees of freedom of the difference of two independent estimates."""
    v1, v2 = np.square(se1), np.square(se2)
    d1 = np.inf if dof1 is None else dof1
    d2 = np.inf if dof2 is None else dof2
    with np.errstate(divide="ignore", invalid="ignore"):
        den = v1 ** 2 / d1 + v2 ** 2 / d2
        out = np.where(den > 0, (v1 + v2) ** 2 / np.where(den > 0, den, 1), np.inf)
    return out


def within_se(value, reference, se, dof=None, level=LEVEL, skip_zero=False):
    """Assert |value − reference| <= q·se entrywise, q the two-sided t quantile for ``dof``
    (a number or an array like se).  Entries with se = 0 must agree exactly unless
    ``skip_zero``.  Returns the largest |difference|/se."""
    value, reference, se = map(np.asarray, (value, reference, se))
    q = np.broadcast_to(t_quantile(dof, level), se.shape)
    dev = np.abs(value - reference)
    if skip_zero:
        keep = se > 0
        dev, se, q = dev[keep], se[keep], q[keep]
    z = dev / np.where(se > 0, se, np.inf)
    assert np.all(dev <= q * se), (float(np.max(z)), float(np.min(q)))
    return float(np.max(z)) if z.size else 0.0


def agree(a, b, rows=slice(1, None), level=LEVEL):
    """Two limit Trajectories agree within their combined standard error (Welch degrees
    of freedom) at the given rows of f_eval (default: every step after 0)."""
    sa, sb = a.f_eval_se[rows], b.f_eval_se[rows]
    se = np.hypot(sa, sb)
    return within_se(a.f_eval[rows], b.f_eval[rows], se, welch_dof(sa, a.se_dof, sb, b.se_dof),
                     level)


def differ(a, b, times, rows=slice(1, None)):
    """The largest difference of two limit Trajectories exceeds ``times`` combined SE."""
    se = np.hypot(a.f_eval_se[rows], b.f_eval_se[rows])
    return float(np.max(np.abs(a.f_eval[rows] - b.f_eval[rows]) / se)) > times


def against_reference(net, mine, ref, n: int, seed: int = 4) -> None:
    """Train the same width-n network side by side under the optimizer ``mine`` and a
    reference implementation ``ref`` (six steps of batch 2, the N8_LONG batches twice,
    under a warm-up cosine schedule) and assert that every layer moved and that the two
    agree to 1e-10 relative."""
    import tp_limits as tp
    from tp_limits.engine.backend import numpy_backend
    from tp_limits.finite.network import FiniteNetwork
    from tp_limits.spec import Problem
    X, Y = np.vstack([N8_LONG["X"]] * 2), np.vstack([N8_LONG["Y"]] * 2)
    r = tp.Routine(X, Y, lr=tp.schedules.warmup_cosine(0.05, 6, warmup=2), batch_size=2,
                   optimizer=mine)
    P = Problem(net, r)

    def network(opt):
        return FiniteNetwork(net, n, r.lr, seed, numpy_backend(), np.float64, optimizer=opt)
    nets = [network(mine), network(ref)]
    for t in range(P.T):
        Xb, Yb = P.batch(t)
        for nw in nets:
            hs, xs, f = nw.forward(Xb, t)
            nw.step(hs, xs, P.loss.grad(f, Yb, np) / 2, r.rates[t])
    for Wa, Wb, W0 in zip(nets[0].W, nets[1].W, network(mine).W):
        moved = np.abs(Wb - W0).max()
        assert moved > 0
        assert np.abs(Wa - Wb).max() <= 1e-10 * max(moved, np.abs(Wb).max())


def finite_mean(net, routine, n: int, seeds: int):
    """(mean, SE) over seeds 0 … seeds − 1 of finite nets' f_eval at width n (seeds − 1 dof)."""
    import tp_limits as tp
    F = np.array([tp.train_finite(net, routine, n, seed=s, record=(), progress=False).f_eval
                  for s in range(seeds)])
    return F.mean(axis=0), F.std(axis=0, ddof=1) / np.sqrt(seeds)


def exact_against_monte_carlo(net, routine, particles=2 ** 13, replicates=8, seed=3):
    """(exact, Monte Carlo, t quantile) for a linear network, after asserting that the
    exact engine ran and that the Monte Carlo limit (plain draws) is within the t bound of
    its replicates' standard error at every evaluated step."""
    import tp_limits as tp
    exact = tp.simulate_limit(net, routine)
    assert exact.meta["method"] == "exact"
    mc = tp.simulate_limit(net, routine, method="monte_carlo", particles=particles,
                           replicates=replicates, sampler="mc", seed=seed)
    q = t_quantile(mc.status.se_dof)
    assert np.all(np.abs(mc.f_eval[1:] - exact.f_eval[1:]) <= q * mc.f_eval_se[1:])
    return exact, mc, q


def interrupt_on_call(monkeypatch, module, name: str, n: int) -> list:
    """Replace ``module.name`` by a wrapper that calls the real one and raises
    KeyboardInterrupt (a Ctrl-C) at its ``n``-th call instead; returns the list of the calls'
    positional arguments, which grows as they happen."""
    real, calls = getattr(module, name), []

    def interrupted(*args, **kw):
        calls.append(args)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(module, name, interrupted)
    return calls

