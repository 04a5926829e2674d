"""The register-tiled pre-activations of the one-hidden-layer sweep (one_hidden/tiles.py)
against their NumPy twin, the product X Z^U."""
import numpy as np
import pytest
from numba import njit

from tp_limits.limit.one_hidden.tiles import (
    LANES,
    MAX_Q,
    WIDE,
    preact_tile,
    preacts_into,
    update_preact_tile,
)

EPS = np.finfo(np.float64).eps
TILE = LANES * WIDE


@njit
def _one_tile(U, a, m, X, i0, q, H):
    preact_tile(U, a, m, X, i0, q, H)


@njit
def _update_tile(U, a, m, C, G, lr, X, q, H):
    update_preact_tile(U, a, m, C, G, lr, X, 0, q, H, 64)


def _bound(X, U):
    """Rounding bound of a length-d chain of fused multiply-adds: d·eps·|X| |U| (the
    bound of a dot product, docs/performance.md)."""
    return X.shape[1] * EPS * (np.abs(X) @ np.abs(U)) + 1e-300


@pytest.mark.parametrize("d", [1, 3, 16, 17])
@pytest.mark.parametrize("n", [1, 5, 7, 13, 20])
@pytest.mark.parametrize("m", [1, 15, 16, 37, 100])
def test_tiles_match_numpy_within_the_dot_product_bound(d, n, m):
    """Every q from 1 to MAX_Q (20 inputs: four tiles of five; 13: three of 4, 4, 5), whole
    tiles and the scalar tail, an offset block of a wider array."""
    rng = np.random.default_rng(100 * d + 10 * n + m)
    N, a = m + 9, 5
    U = rng.standard_normal((d, N))
    X = rng.standard_normal((n, d))
    H = np.full((n, m), np.nan)
    preacts_into(U, a, m, X, H)
    want = X @ U[:, a:a + m]
    assert np.all(np.abs(H - want) <= _bound(X, U[:, a:a + m]))


def test_a_particle_gets_the_same_bits_wherever_it_is_computed():
    """In a vector tile or in the scalar tail, one input at a time or MAX_Q together: the
    same chain of fused multiply-adds, so the same bits (the φ cache of the sweep is
    filled by one grouping and read against another)."""
    rng = np.random.default_rng(7)
    d, n, N = 16, MAX_Q, 3 * TILE
    U = rng.standard_normal((d, N))
    X = rng.standard_normal((n, d))
    together = np.empty((n, N))
    _one_tile(U, 0, N, X, 0, n, together)             # particle 20 in a vector tile
    tail = np.empty((n, N))
    _one_tile(U, 4, TILE + 5, X, 0, n, tail)          # ... and in the tail (j = 16)
    assert np.array_equal(together[:, 20], tail[:, 16])
    for i in range(n):
        alone = np.empty((1, N))
        _one_tile(U, 0, N, X, i, 1, alone)
        assert np.array_equal(alone[0], together[i])
    assert not np.array_equal(together[0], together[1])


def test_a_tile_with_q_out_of_range_writes_nothing():
    U, X = np.ones((2, TILE)), np.ones((MAX_Q + 1, 2))
    H = np.full((MAX_Q + 1, TILE), 7.0)
    _one_tile(U, 0, TILE, X, 0, MAX_Q + 1, H)
    _one_tile(U, 0, TILE, X, 0, 0, H)
    assert np.all(H == 7.0)


@pytest.mark.parametrize("B, q, m", [(1, 5, 2 * TILE + 3), (4, 1, TILE), (3, MAX_Q, 7)])
def test_the_update_tile_moves_the_block_then_uses_it(B, q, m):
    """Z^U[:, a:a+m] −= lr Cᵀ G, the rest of Z^U untouched, and the pre-activations
    taken with the moved particles; the block ends at the array's end, so the
    prefetches reach past it."""
    rng = np.random.default_rng(B * 10 + q)
    d, a = 16, 3
    N = a + m
    U = rng.standard_normal((d, N))
    C, G = rng.standard_normal((B, d)), rng.standard_normal((B, m))
    X = rng.standard_normal((q, d))
    lr = 0.3
    moved = U.copy()
    H = np.empty((q, m))
    _update_tile(moved, a, m, C, G, lr, X, q, H)
    step = lr * (C.T @ G)
    want = U[:, a:a + m] - step
    bound = (B + 1) * EPS * (np.abs(U[:, a:a + m]) + lr * (np.abs(C.T) @ np.abs(G)))
    assert np.all(np.abs(moved[:, a:a + m] - want) <= bound)
    assert np.array_equal(moved[:, :a], U[:, :a])
    assert np.all(np.abs(H - X @ moved[:, a:a + m]) <= _bound(X, moved[:, a:a + m]))
    assert np.abs(moved[:, a:] - U[:, a:]).min() > 0     # every particle moved
