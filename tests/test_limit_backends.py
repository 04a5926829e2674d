"""The limit engines' backend-generic code (the path a GPU run takes), checked on the CPU.

A stand-in backend named ``array`` holds NumPy but is not ``numpy``, so the
engines take every branch a CuPy run takes (the whole-array passes over the
histories, the array sweep of one hidden layer, device-side draws) while
running here.  With ``random="host"`` it must reproduce the NumPy engines to
rounding; with its own generator it is another Monte Carlo sample of the same
law.  The same comparisons on a real GPU are in test_limit_gpu.py.
"""
import dataclasses

import numpy as np
import pytest
from conftest import N8, agree

import tp_limits as tp
from tp_limits.engine import backend as backends
from tp_limits.errors import SpecError
from tp_limits.limit import base
from tp_limits.limit.montecarlo import montecarlo
from tp_limits.limit.montecarlo.passes import ArrayPasses, HostPasses
from tp_limits.limit.options import LimitOptions
from tp_limits.limit.select import select_engine
from tp_limits.spec import Problem


@pytest.fixture
def array_backend(monkeypatch):
    """Install the stand-in backend 'array' where the engines look backends up."""
    host = backends.numpy_backend()
    fake = dataclasses.replace(host, name="array", generator=lambda rng: np.random.default_rng(
        int(rng.integers(2 ** 63))))
    real = backends.get_backend

    def lookup(name="numpy"):
        return fake if name == "array" else real(name)
    monkeypatch.setattr(base, "get_backend", lookup)
    monkeypatch.setattr(montecarlo, "get_backend", lookup)
    return fake


def _run(net, routine, backend, random, **options):
    o = dataclasses.replace(LimitOptions.of(**options), backend=backend, random=random)
    engine = select_engine(Problem(net, routine), o)
    return engine, engine.run(lambda t: None)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_array_passes_match_host_passes(dtype):
    rng = np.random.default_rng(0)
    k, m, N = 37, 5, 3001
    R = rng.standard_normal((k, N)).astype(dtype)
    V, C = rng.standard_normal((m, N)), rng.standard_normal((k, m))
    Z0 = rng.standard_normal((m, N))
    host, arr = HostPasses(), ArrayPasses(np)
    assert np.allclose(arr.rows_times(R, V), host.rows_times(R, V), rtol=1e-12, atol=1e-10)
    assert np.allclose(arr.times_rows(C, R), host.times_rows(C, R), rtol=1e-12, atol=1e-12)
    Za, Zh = Z0.copy(), Z0.copy()
    ca, ch = arr.mean_and_cross(C, R, Za, 3), host.mean_and_cross(C, R, Zh, 3)
    tol = 1e-12 if dtype == np.float64 else 2e-7        # float32 rounding of the new hats
    assert np.allclose(Za, Zh, rtol=tol, atol=tol) and not np.allclose(Za, Z0)
    assert np.allclose(ca, ch, rtol=tol, atol=tol * N)
    if dtype == np.float32:                              # the stored values are float32
        assert np.array_equal(Za, Za.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_host_histories_start_on_cache_lines(dtype):
    """The NumPy backend's stored rows start on 64-byte lines (every row does, N being a
    multiple of 16), so the history kernels' vector loads do not straddle two lines; the
    generic passes keep plain zeros."""
    from tp_limits.engine.aligned import LINE
    from tp_limits.limit.montecarlo.families import Family
    from tp_limits.limit.montecarlo.passes import passes_for
    f = Family(4096, 6, 1.0, dtype, passes_for(backends.get_backend("numpy")))
    for rows in (f.vec, f.hat):
        assert rows.shape == (6, 4096) and rows.dtype == dtype and not rows.any()
        assert rows.ctypes.data % LINE == 0 and rows.flags.c_contiguous
    g = Family(10, 2, 1.0, dtype, ArrayPasses(np))
    assert g.vec.shape == (2, 10) and g.vec.dtype == dtype and not g.vec.any()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_family_grown_mid_run_samples_what_a_large_one_does(dtype):
    """Family.reserve keeps the stored rows, Gram matrices and Cholesky factors: a family
    sized for 4 rows and grown to 9 once full draws and stores the same hats, and gives the
    same Stein coefficients, as one sized for 9 from the start."""
    from tp_limits.limit.montecarlo.families import Family
    from tp_limits.limit.montecarlo.passes import passes_for
    from tp_limits.limit.sampling import Draws
    b = backends.get_backend("numpy")
    V = np.tanh(np.random.default_rng(0).standard_normal((9, 512)))
    out = []
    for cap in (4, 9):
        f, draws = Family(512, cap, 0.7, dtype, passes_for(b)), Draws(b, np.random.default_rng(1))
        hats = []
        for a, z in ((0, 4), (4, 7), (7, 9)):
            if f.k == cap:
                f.reserve(9)
            h, info = f.sample(V[a:z], draws, store_rows=z - a)
            f.store(V[a:z], h, info)
            hats.append(h)
        out.append((np.concatenate(hats), f.stein_coefficients(V[:2] ** 2)))
    assert out[0][0].shape == (9, 512)
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


@pytest.mark.parametrize("case", ["deep stein float64", "deep stein float32", "deep tangent",
                                  "deep adam", "one hidden", "one hidden momentum"])
def test_array_backend_reproduces_numpy_with_host_draws(case, array_backend):
    """Same random inputs (random='host'): the generic path equals the NumPy engines to
    rounding; with the backend's own generator it is an independent sample (within 5 SE)."""
    L = 1 if "one" in case else 2
    adam = "adam" in case
    net = tp.MLP(tp.mup(L, optimizer="adam") if adam else tp.mup(L), 3, 2, phi="tanh")
    opt = (tp.Adam() if adam else tp.SGD(momentum=0.8, weight_decay=0.3) if "momentum" in case
           else tp.SGD())
    r = tp.Routine(lr=0.05 if adam else 0.4, optimizer=opt, **N8)
    opts = dict(particles=4000, replicates=4, seed=3,
                dtype=np.float32 if "float32" in case else np.float64,
                zdot="tangent" if "tangent" in case else "stein",
                **(dict(partners=8) if adam else {}),
                # Sobol' points come from the host whatever the source: draw pseudo-random
                sampler="antithetic", **(dict(kernel="numpy") if L == 1 else {}))
    _, ref = _run(net, r, "numpy", "backend", **opts)
    eng, same = _run(net, r, "array", "host", **opts)
    assert eng.backend == "array"
    tol = 1e-6 if "float32" in case else 1e-12
    assert np.allclose(same.f_eval, ref.f_eval, rtol=tol, atol=tol)
    _, other = _run(net, r, "array", "backend", **opts)
    assert not np.allclose(other.f_eval[1:], ref.f_eval[1:], rtol=1e-8, atol=1e-8)
    agree(other, ref)


def test_backend_options_are_checked_before_work():
    net, r = tp.MLP(tp.mup(2), 3, 2, phi="tanh"), tp.Routine(lr=0.4, **N8)
    with pytest.raises(SpecError, match="backend"):
        tp.simulate_limit(net, r, backend="tpu")
    with pytest.raises(SpecError, match="random"):
        tp.simulate_limit(net, r, random="device")


def test_exact_engines_run_on_the_host(array_backend):
    """The closed forms work on small matrices: meta['backend'] says they ran on the host."""
    net, r = tp.MLP(tp.mup(2), 3, 2, phi="id"), tp.Routine(lr=0.4, **N8)
    eng, _ = _run(net, r, "array", "backend")
    assert eng.backend == "numpy"


def test_kernels_are_refused_off_their_device(array_backend):
    net, r = tp.MLP(tp.mup(1), 3, 2, phi="tanh"), tp.Routine(lr=0.4, **N8)
    with pytest.raises(SpecError, match="kernel='numba' runs on the CPU"):
        _engine(net, r, "array", kernel="numba")
    with pytest.raises(SpecError, match="kernel='cuda' runs on a GPU"):
        tp.simulate_limit(net, r, kernel="cuda")
    assert _engine(net, r, "array").kernel == "cuda"          # the GPU default
    wide = tp.MLP(tp.mup(1), 100, 2, phi="tanh")
    X = np.random.default_rng(0).standard_normal((4, 100))
    wide_r = tp.Routine(X, X[:, :2], lr=0.4, batch_size=2)
    assert _engine(wide, wide_r, "array").kernel == "numpy"   # too wide for its registers
    with pytest.raises(SpecError, match="dimension <= 64"):
        _engine(wide, wide_r, "array", kernel="cuda")


def _engine(net, routine, backend, **options):
    o = dataclasses.replace(LimitOptions.of(**options), backend=backend)
    return select_engine(Problem(net, routine), o)


def test_qmc_scrambling_comes_from_the_host(array_backend):
    """Sobol' scramblings are drawn by the host generator on every backend: a device run
    of a seed reproduces the host run of that seed."""
    net, r = tp.MLP(tp.mup(1), 3, 2, phi="tanh"), tp.Routine(lr=0.4, **N8)
    _, ref = _run(net, r, "numpy", "backend", particles=4096, replicates=4, seed=3,
                  kernel="numpy")
    eng, dev = _run(net, r, "array", "backend", particles=4096, replicates=4, seed=3,
                    kernel="numpy")
    assert eng.sampler == "qmc"
    assert np.allclose(dev.f_eval, ref.f_eval, rtol=1e-12, atol=1e-12)
