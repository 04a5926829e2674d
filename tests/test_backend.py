"""Array backends: NumPy's in-place BLAS products, and CuPy when present."""
import numpy as np
import pytest

import tp_limits as tp
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
