"""The limit engines on a GPU (CuPy) against the NumPy engines.  Skipped without CuPy and
a CUDA device (CI has none); run them on a GPU machine with ``pytest tests/test_limit_gpu.py``.

With ``random="host"`` both backends see identical random inputs, so in float64
they must agree to 1e-10 (the sums run in another order on the device); with
the device's own generator a GPU run is an independent sample of the same law.
"""
import numpy as np
import pytest
from conftest import N8, N8_LONG, agree

import tp_limits as tp
from tp_limits.engine.backend import get_backend
from tp_limits.errors import BackendUnavailableError, MemoryBudgetError
from tp_limits.limit.simulate import prepare_limit


def _gpu_or_skip():
    try:
        get_backend("cupy")
    except BackendUnavailableError as exc:
        pytest.skip(f"no GPU here: {exc}")


pytestmark = pytest.mark.usefixtures("gpu")


@pytest.fixture
def gpu():
    _gpu_or_skip()


def _problem(L, adam=False):
    net = tp.MLP(tp.mup(L, optimizer="adam") if adam else tp.mup(L), 3, 2, phi="tanh")
    return net, tp.Routine(lr=0.05 if adam else 0.4, optimizer=tp.Adam() if adam else tp.SGD(),
                           **N8)


def _newer_engine(case):
    """(net, routine, options) of the engines added after the first device check: Muon
    (one hidden layer through the deep engine, Newton–Schulz and exact polar, Adam on the
    vector layers), residual blocks of one and two layers, biases, a learning-rate
    schedule."""
    schedule = tp.schedules.warmup_cosine(0.4, tp.Routine(lr=0.4, **N8_LONG).steps, warmup=1)
    half = dict(batch_size=2, eval_inputs=N8_LONG["eval_inputs"])
    X, Y = N8_LONG["X"], N8_LONG["Y"]

    def phases(lr, train, optimizer=None):
        """Pretrain on the first two batches, then train only ``train`` on the third."""
        return tp.Routine.phases(
            tp.Routine(X[:4], Y[:4], lr=lr, optimizer=optimizer, **half),
            tp.Routine(X[4:], Y[4:], lr=lr, optimizer=optimizer, train=train, **half))
    muon = dict(lr=0.05, **N8_LONG)
    return {
        "muon L=1": (tp.MLP(tp.mup(1, optimizer="muon"), 3, 2, phi="tanh"),
                     tp.Routine(optimizer=tp.Muon(), **muon), {}),
        "muon L=2 newton-schulz": (tp.MLP(tp.mup(2, optimizer="muon"), 3, 2, phi="tanh"),
                                   tp.Routine(optimizer=tp.Muon(), **muon), {}),
        "muon L=2 polar decay": (tp.MLP(tp.mup(2, optimizer="muon"), 3, 2, phi="tanh"),
                                 tp.Routine(optimizer=tp.Muon(ns_steps=None, nesterov=False,
                                                              momentum=0.8, weight_decay=0.3),
                                            **muon), {}),
        "muon L=2 adam vectors": (tp.MLP(tp.mup(2, optimizer="muon_adam"), 3, 2, phi="tanh"),
                                  tp.Routine(optimizer=tp.Muon(vector_layers="adam"), **muon),
                                  {}),
        "residual K=2": (tp.MLP(tp.mup(3), 3, 2, phi="tanh",
                                residual=tp.Residual.depth_mup("sgd")),
                         tp.Routine(lr=0.3, **N8_LONG), {}),
        "residual blocks of 2": (tp.MLP(tp.mup(5), 3, 2, phi="tanh",
                                        residual=tp.Residual.completep("sgd")),
                                 tp.Routine(lr=0.3, **N8_LONG), {}),
        "residual muon": (tp.MLP(tp.mup(3, optimizer="muon"), 3, 2, phi="tanh",
                                 residual=tp.Residual.depth_mup("muon")),
                          tp.Routine(optimizer=tp.Muon(), **muon), {}),
        "biases deep": (tp.MLP(tp.mup(2), 3, 2, phi="tanh", bias=tp.Bias(0.5, 2.0)),
                        tp.Routine(lr=0.3, **N8_LONG), {}),
        "schedule deep momentum": (tp.MLP(tp.mup(2), 3, 2, phi="tanh"),
                                   tp.Routine(lr=schedule, optimizer=tp.SGD(momentum=0.8),
                                              **N8_LONG), {}),
        "schedule one hidden adam": (tp.MLP(tp.mup(1, optimizer="adam"), 3, 2, phi="tanh"),
                                     tp.Routine(lr=schedule / 8, optimizer=tp.Adam(), **N8_LONG),
                                     {}),
        "norm layer deep": (tp.MLP(tp.mup(2), 3, 2, phi="tanh", norm="layer"),
                            tp.Routine(lr=0.3, **N8_LONG), {}),
        "norm rms residual adam": (tp.MLP(tp.mup(3, optimizer="adam"), 3, 2, phi="tanh",
                                          norm="rms", residual=tp.Residual.depth_mup("adam")),
                                   tp.Routine(lr=0.02, optimizer=tp.Adam(), **N8_LONG),
                                   dict(partners=16)),
        "norm layer one hidden": (tp.MLP(tp.mup(1), 3, 2, phi="relu", norm="layer"),
                                  tp.Routine(lr=0.3, **N8_LONG), {}),
        "phases deep momentum": (tp.MLP(tp.mup(2), 3, 2, phi="tanh"),
                                 phases(0.4, ("W2",), tp.SGD(momentum=0.8)), {}),
        "phases deep adam": (tp.MLP(tp.mup(2, optimizer="adam"), 3, 2, phi="tanh"),
                             phases(0.05, ("W1", "W3"), tp.Adam()), dict(partners=16)),
    }[case]


CASES = ["deep L=3 stein", "deep L=2 tangent", "deep L=2 adam", "deep L=3 stein float32",
         "one hidden", "one hidden adam", "muon L=1", "muon L=2 newton-schulz",
         "muon L=2 polar decay", "muon L=2 adam vectors", "residual K=2",
         "residual blocks of 2", "residual muon", "biases deep", "schedule deep momentum",
         "schedule one hidden adam", "norm layer deep", "norm rms residual adam",
         "norm layer one hidden", "phases deep momentum", "phases deep adam"]


@pytest.mark.parametrize("case", CASES)
def test_gpu_engine_matches_cpu_engine_number_for_number(case):
    if case.startswith(("muon", "residual", "schedule", "biases", "norm", "phases")):
        net, r, extra = _newer_engine(case)
    else:
        L = 1 if "one" in case else int(case.split("L=")[1][0])
        net, r = _problem(L, adam="adam" in case)
        extra = dict(**(dict(zdot="tangent") if "tangent" in case else {}),
                     **(dict(partners=16) if "deep" in case and "adam" in case else {}))
    opts = dict(particles=20_000, replicates=2, seed=5, random="host",
                dtype=np.float32 if "float32" in case else np.float64, **extra)
    cpu = tp.simulate_limit(net, r, **opts)
    gpu = tp.simulate_limit(net, r, backend="cupy", **opts)
    assert gpu.meta["backend"] == "cupy" and cpu.meta["backend"] == "numpy"
    assert gpu.meta["method"] == cpu.meta["method"] == "monte_carlo"
    tol = 1e-5 if "float32" in case else 1e-10        # float32: hats rounded on either side
    assert np.allclose(gpu.f_eval, cpu.f_eval, rtol=tol, atol=tol), \
        float(np.max(np.abs(gpu.f_eval - cpu.f_eval)))
    assert np.allclose(gpu.f_eval_se, cpu.f_eval_se, rtol=1e-6, atol=1e-9)
    # the runs train: a check of two constant trajectories would be vacuous
    assert np.abs(cpu.f_eval[-1] - cpu.f_eval[0]).max() > 1e-3


@pytest.mark.parametrize("case", ["muon", "residual blocks of 2 with adam", "spectral init",
                                  "biases", "norms", "phases"])
def test_gpu_finite_network_matches_numpy(case):
    """Finite networks of the newer layer kinds and optimizers: the same weights (drawn on
    the host) trained on either backend agree to 1e-10 in float64."""
    if case == "muon":
        net, r = tp.MLP(tp.mup(3, optimizer="muon"), 3, 2, phi="tanh"), \
            tp.Routine(lr=0.05, optimizer=tp.Muon(), **N8_LONG)
    elif case == "biases":
        net, r = tp.MLP(tp.mup(2), 3, 2, phi="tanh", bias=tp.Bias(0.5, 2.0)), \
            tp.Routine(lr=0.3, optimizer=tp.SGD(momentum=0.9), **N8_LONG)
    elif case == "norms":
        net, r = tp.MLP(tp.mup(3, optimizer="adam"), 3, 2, phi="tanh", norm="rms",
                        residual=tp.Residual.depth_mup("adam")), \
            tp.Routine(lr=0.02, optimizer=tp.Adam(), **N8_LONG)
    elif case == "phases":
        net, r = tp.MLP(tp.mup(2, optimizer="adam"), 3, 2, phi="tanh"), tp.Routine.phases(
            tp.Routine(lr=0.02, optimizer=tp.Adam(), train=("W2", "W3"), **N8_LONG),
            tp.Routine(lr=0.02, optimizer=tp.Adam(), **N8_LONG))
    elif case == "spectral init":
        net, r = tp.MLP(tp.mup(2), 3, 2, phi="tanh", init="spectral"), \
            tp.Routine(lr=0.3, **N8_LONG)
    else:
        net = tp.MLP(tp.mup(5, optimizer="adam"), 3, 2, phi="tanh",
                     residual=tp.Residual.completep("adam"))
        r = tp.Routine(lr=0.02, optimizer=tp.Adam(), **N8_LONG)
    a = tp.train_finite(net, r, 384, seed=3, progress=False)
    b = tp.train_finite(net, r, 384, seed=3, backend="cupy", progress=False)
    assert np.max(np.abs(a.f_eval - b.f_eval)) < 1e-10
    assert np.abs(a.f_eval[-1] - a.f_eval[0]).max() > 1e-3


@pytest.mark.parametrize("L", [1, 3])
def test_gpu_generator_is_another_sample_of_the_same_law(L):
    net, r = _problem(L)
    # pseudo-random draws: a quasi-Monte Carlo run's points are host draws on every backend
    kw = dict(particles=20_000, replicates=8, seed=2, sampler="antithetic")
    cpu = tp.simulate_limit(net, r, **kw)
    gpu = tp.simulate_limit(net, r, backend="cupy", **kw)
    assert not np.allclose(gpu.f_eval[1:], cpu.f_eval[1:], rtol=1e-8, atol=1e-8)
    agree(gpu, cpu)


def test_memory_guard_counts_device_memory():
    net, r = _problem(3)
    with pytest.raises(MemoryBudgetError, match=r"\(cupy\).*at most [\d,]+ particles fit"):
        prepare_limit(net, r, particles=10 ** 9, backend="cupy")


@pytest.mark.parametrize("phi, mode", [(phi, 0) for phi in ("id", "tanh", "relu", "sigmoid",
                                                             "gelu", "erf", "softplus")]
                         + [("tanh", 1), ("tanh", 2), ("gelu", 1), ("softplus", 2)])
def test_cuda_sweep_matches_array_twin(phi, mode):
    """The fused CUDA kernel against the whole-array twin on the same device: every φ,
    plain SGD, heavy ball and Adam state, with and without statistics and a batch."""
    from tp_limits.limit.fused.contract import SweepData, sweep_args
    from tp_limits.limit.fused.sweep_cuda import sweep_cuda
    from tp_limits.limit.fused.sweep_numpy import sweep_numpy
    b = get_backend("cupy")
    cp = b.xp
    g = cp.random.default_rng(0)
    d, do, N, E, block = 3, 2, 10_037, 3, 512
    opt = (tp.SGD(), tp.SGD(momentum=0.8, weight_decay=0.1),
           tp.Adam(betas=(0.9, 0.99), eps=1e-3))[mode]
    # the first update (Adam's bias corrections 0.1, 0.01); δ, η of Z^U and Z^{nV}
    hu, hv = opt.coordinate(0.1, 1.0, 0.01, 1)[1], opt.coordinate(0.2, 1.0, 0.02, 1)[1]
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-5)):
        for B, stats in ((2, False), (2, True), (0, True)):
            U = g.standard_normal((d, N)).astype(dtype)
            V = g.standard_normal((do, N)).astype(dtype)
            S = [None, None] if mode == 0 else [cp.abs(g.standard_normal((mode, k, N))).astype(
                dtype) for k in (d, do)]
            Xb, Xn, Xe = g.standard_normal((B, d)), g.standard_normal((2, d)), \
                g.standard_normal((E, d))
            chi = g.standard_normal((B, do))
            w = np.full(1, 1.0 / N)
            runs = []
            for fn in (sweep_numpy, lambda a, b: sweep_cuda(a, b, "global", 1),
                       lambda a, b: sweep_cuda(a, b, "constant", 1),
                       lambda a, b: sweep_cuda(a, b, "constant", 2)):
                u, v = U.copy(), V.copy()
                su, sv = [None if s is None else s.copy().reshape(-1, N) for s in S]
                data = SweepData(u, v, w, U, Xb, chi, 0.3, 0.2, Xn, Xe, stats, block, su, sv)
                out = fn(sweep_args(data, opt, hu, hv, phi, cp), b)
                runs.append([out, u, v] + ([su, sv] if mode else []))
            for run in runs[1:]:          # inputs through pointers, and in constant memory
                for x, y in zip(runs[0], run):
                    x, y = cp.asnumpy(x).astype(np.float64), cp.asnumpy(y).astype(np.float64)
                    assert x.shape == y.shape and np.allclose(y, x, rtol=tol, atol=tol), \
                        (dtype, B, stats, float(np.max(np.abs(x - y))))


@pytest.mark.parametrize("ns_steps", [5, None])
def test_muon_core_on_the_device_matches_the_host(ns_steps):
    """The k × k work of a Muon limit step on the device against the same on the host."""
    cp = get_backend("cupy").xp
    rng = np.random.default_rng(1)
    k, B = 24, 4
    P, Q = rng.standard_normal((k, 40)), rng.standard_normal((k, 30))
    GP, GQ = P @ P.T, Q @ Q.T
    opt = tp.Muon(ns_steps=ns_steps)
    om_h, om_d = np.zeros((k, k)), cp.zeros((k, k))
    for t in range(3):
        opt.move_pairs(om_h, GP, GQ, k // B - 1 + t, B, 1.0, 0.1, 0.01)
        opt.move_pairs(om_d, cp.asarray(GP), cp.asarray(GQ), k // B - 1 + t, B, 1.0, 0.1,
                       0.01, cp)
    assert np.abs(om_h).max() > 1e-3
    assert np.allclose(cp.asnumpy(om_d), om_h, rtol=1e-10, atol=1e-12)
