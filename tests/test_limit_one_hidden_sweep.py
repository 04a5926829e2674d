"""The Numba kernels against NumPy: vectorizable tanh, and the fused sweep vs its twin."""
import numba
import numpy as np
import pytest
from numba import njit

from tp_limits.limit.one_hidden.columns import n_columns
from tp_limits.limit.one_hidden.fastmath import fast_tanh
from tp_limits.limit.one_hidden.sweep import (
    BLAS_MIN_B,
    BLAS_MIN_D,
    PHI_CODES,
    phi_tag,
    sweep,
)
from tp_limits.limit.one_hidden.sweep_numpy import sweep_numpy


@njit(fastmath=True, error_model="numpy")
def _tanh_loop(x, out):
    for i in range(x.shape[0]):
        out[i] = fast_tanh(x[i])


def test_fast_tanh_within_4_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-25, 25, 200_000), np.logspace(-300, 1.5, 20_000),
                        -np.logspace(-300, 1.5, 20_000), rng.uniform(-1e-3, 1e-3, 20_000),
                        [0.0, -0.0, 19.9, 20.0, 1e308, -1e308]])
    out = np.empty_like(x)
    _tanh_loop(x, out)
    ref = np.tanh(x)
    ulp = np.abs(out - ref) / np.spacing(np.abs(ref)).clip(min=np.finfo(float).tiny)
    assert ulp.max() <= 4


def _random_state(rng, d, do, N):
    U = rng.standard_normal((d, N))
    return U, rng.standard_normal((do, N)), U + 0.1 * rng.standard_normal((d, N))


@pytest.mark.parametrize("phi", sorted(PHI_CODES))
@pytest.mark.parametrize("d, B, Bn, E, stats, weighted", [
    (3, 2, 2, 3, True, False), (1, 0, 1, 2, False, True), (3, 3, 0, 1, True, True),
    (2, 1, 1, 0, False, False), (6, 2, 1, 2, True, False), (5, 1, 2, 1, False, True),
    (BLAS_MIN_D, BLAS_MIN_B, 1, 2, True, False), (BLAS_MIN_D, 1, 2, 1, False, True)])
def test_sweep_matches_numpy_twin(phi, d, B, Bn, E, stats, weighted):
    """d >= BLAS_MIN_D exercises the gemm paths (the Z^U update too when B >= BLAS_MIN_B),
    smaller d the vectorized loops."""
    rng = np.random.default_rng(abs(hash((phi, d, B, Bn, E))) % 2**32)
    do, N, block = 2, 5003, 512
    U, V, U0 = _random_state(rng, d, do, N)
    w = rng.uniform(0, 2 / N, N) if weighted else np.full(1, 1 / N)
    Xb, chi = rng.standard_normal((B, d)), rng.standard_normal((B, do))
    Xn, Xe = rng.standard_normal((Bn, d)), rng.standard_normal((E, d))
    nb = (N + block - 1) // block
    out = np.zeros((nb, n_columns(Bn, E, do, stats)))
    U1, V1, U2, V2 = U.copy(), V.copy(), U.copy(), V.copy()
    sweep(U1, V1, w, U0, phi_tag(phi), Xb, chi, 0.3, 0.2, Xn, Xe, stats, block, out)
    ref = sweep_numpy(U2, V2, w, U0, phi, Xb, chi, 0.3, 0.2, Xn, Xe, stats, block)
    assert np.allclose(U1, U2, rtol=1e-12, atol=1e-13)
    assert np.allclose(V1, V2, rtol=1e-12, atol=1e-13)
    assert out.shape == ref.shape and np.allclose(out, ref, rtol=1e-11, atol=1e-13)


def test_sweep_independent_of_thread_count():
    rng = np.random.default_rng(1)
    d, do, N, block = 2, 1, 40_000, 2048
    U, V, U0 = _random_state(rng, d, do, N)
    args = (np.full(1, 1 / N), U0, phi_tag("tanh"), rng.standard_normal((1, d)),
            rng.standard_normal((1, do)), 0.5, 0.5, rng.standard_normal((1, d)),
            rng.standard_normal((3, d)), True, block)
    outs = []
    saved = numba.get_num_threads()
    try:
        for threads in (1, saved):
            numba.set_num_threads(threads)
            u, v = U.copy(), V.copy()
            out = np.zeros(((N + block - 1) // block, n_columns(1, 3, do, True)))
            sweep(u, v, *args, out)
            outs.append((u, v, out.sum(axis=0)))
    finally:
        numba.set_num_threads(saved)
    for a, b in zip(outs[0], outs[1]):
        assert np.array_equal(a, b)
