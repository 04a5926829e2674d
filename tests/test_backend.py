"""Array backends: NumPy's in-place BLAS products, and CuPy when present."""
import numpy as np
import pytest

import tp_limits as tp
from tp_limits.engine.aligned import LINE
from tp_limits.engine.backend import BACKENDS, get_backend


@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("B", [1, 3])
def test_numpy_add_outer_is_in_place_and_exact(layout, B):
    rng = np.random.default_rng(0)
    W = np.asarray(rng.standard_normal((7, 5)), order=layout)
    G, X = rng.standard_normal((B, 7)), rng.standard_normal((B, 5))
    expected = W + 0.3 * G.T @ X
    before = W.__array_interface__["data"][0]
    get_backend("numpy").add_outer(W, 0.3, G, X)
    assert np.allclose(W, expected, rtol=1e-14, atol=1e-14)
    assert W.__array_interface__["data"][0] == before


def test_numpy_matmul_matches_numpy():
    rng = np.random.default_rng(1)
    b = get_backend("numpy")
    A, B = rng.standard_normal((4, 6)), rng.standard_normal((6, 3))
    for a, c in ((A, B), (A.T.copy().T, B), (np.asfortranarray(A), np.asfortranarray(B))):
        assert np.allclose(b.matmul(a, c), A @ B, rtol=1e-14)
    assert b.available_bytes() > 0 and b.to_numpy(A) is not None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(1, 6, 5), (4, 6, 1), (1, 6, 1), (1, 1, 1), (1, 0, 3), (0, 6, 1), (1, 6, 0)])
def test_numpy_matmul_of_one_row_or_column(shape, dtype):
    """One row or one column goes to gemv: same values, shape and dtype as a @ b for C,
    Fortran and strided operands (a transposed weight matrix is a Fortran view)."""
    m, k, n = shape
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    mm = get_backend("numpy").matmul
    exact = A.astype(np.float64) @ B.astype(np.float64)
    tol = 1e-13 if dtype == np.float64 else 1e-5
    for a in (A, np.asfortranarray(A)):
        for c in (B, np.asfortranarray(B), np.repeat(B, 2, axis=1)[:, ::2]):
            out = mm(a, c)
            assert out.shape == (m, n) and out.dtype == dtype and out.flags.c_contiguous
            assert np.allclose(out, exact, rtol=tol, atol=tol)


def test_unknown_backend_is_refused():
    with pytest.raises(tp.SpecError, match="unknown backend"):
        get_backend("tpu")
    assert BACKENDS == ("numpy", "cupy")


def test_cupy_is_optional():
    try:
        import cupy  # noqa: F401
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        with pytest.raises(tp.BackendUnavailableError, match="numpy"):
            get_backend("cupy")
    else:
        assert get_backend("cupy").name == "cupy"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(3, 5), (16, 1000), (0,), (2, 0, 4)])
def test_aligned_arrays_start_on_a_cache_line(shape, dtype):
    b = get_backend("numpy")
    z = b.zeros_aligned(shape, dtype)
    assert z.shape == shape and z.dtype == dtype and not z.any() and z.flags.c_contiguous
    assert z.size == 0 or z.ctypes.data % LINE == 0
    src = np.arange(int(np.prod(shape)) + 1, dtype=dtype)[1:].reshape(shape)  # off a line
    a = b.as_aligned(src)
    assert np.array_equal(a, src) and a.dtype == dtype and a.flags.c_contiguous
    assert a.size == 0 or a.ctypes.data % LINE == 0
    assert b.as_aligned(a) is a                        # already placed: not copied again
    assert np.array_equal(b.as_aligned(np.asfortranarray(src)), src)


def test_the_sweep_gets_its_arrays_on_cache_lines(monkeypatch):
    """The one-hidden-layer engine hands the sweep particles, optimizer state and φ cache
    that start on a cache line (N a multiple of 8, so every row does too)."""
    from tp_limits.limit.fused.sweeps import NumbaSweep
    seen = []

    def recording_sweep(self, args):
        a = args.data
        seen.append([x.ctypes.data % LINE for x in (a.U, a.V, a.U0, a.SU, a.SV, a.cache)
                     if x.size])
        return real(self, args)

    real = NumbaSweep.__call__
    monkeypatch.setattr(NumbaSweep, "__call__", recording_sweep)
    r = tp.Routine([[1.0, 0.0], [0.0, 1.0]], [[1.0], [-1.0]], lr=0.1, batch_size=1,
                   eval_inputs=[[1.0, 1.0]], optimizer=tp.Adam())
    net = tp.MLP(tp.mup(1, optimizer="adam"), 2, 1, phi="tanh")
    tp.simulate_limit(net, r, particles=4096, replicates=1, method="monte_carlo")
    assert seen and all(len(s) == 6 and not any(s) for s in seen), seen
