"""The pre-activation tiles of the one-hidden-layer sweep — the register tiles written as
LLVM IR (one_hidden/tiles.py) and their plain-Numba twin, with and without a prefetch
(tiles_plain.py) — against the product X Z^U and, bit for bit, against each other."""
import numpy as np
import pytest
from numba import njit

from tp_limits.limit.fused.tiles import LANES, MAX_Q, WIDE
from tp_limits.limit.fused.tiling import (
    TILES,
    pre_tile,
    preacts_into,
    tiles_for,
    tiles_mode,
    update_pre_tile,
)

EPS = np.finfo(np.float64).eps
WITH_IR = (0, 0)            # the sweep's build with the IR tiles and the plain ones
TILE = LANES * WIDE


@njit
def _one_tile(mode, U, a, m, X, i0, q, H):
    pre_tile((WITH_IR, mode), U, a, m, X, i0, q, H)


@njit
def _update_tile(mode, U, a, m, C, G, lr, X, q, H):
    update_pre_tile((WITH_IR, mode), U, a, m, C, G, lr, X, 0, q, H, 64)


def _bound(X, U):
    """Rounding bound of a length-d chain of fused multiply-adds: d·eps·|X| |U| (the
    bound of a dot product, docs/performance.md)."""
    return X.shape[1] * EPS * (np.abs(X) @ np.abs(U)) + 1e-300


@pytest.mark.parametrize("d", [1, 3, 16, 17])
@pytest.mark.parametrize("n", [1, 5, 7, 13, 20])
@pytest.mark.parametrize("m", [1, 15, 16, 37, 100])
def test_tiles_match_numpy_and_each_other(d, n, m):
    """Every q from 1 to MAX_Q (20 inputs: four tiles of five; 13: three of 4, 4, 5), whole
    tiles and the scalar tail, an offset block of a wider array: each implementation
    within the dot-product bound of X Z^U, and all of them the same bits (the same
    chains of fused multiply-adds)."""
    rng = np.random.default_rng(100 * d + 10 * n + m)
    N, a = m + 9, 5
    U = rng.standard_normal((d, N))
    X = rng.standard_normal((n, d))
    want = X @ U[:, a:a + m]
    got = []
    for name in TILES:
        H = np.full((n, m), np.nan)
        preacts_into((WITH_IR, tiles_mode(name)), U, a, m, X, H)
        assert np.all(np.abs(H - want) <= _bound(X, U[:, a:a + m])), name
        got.append(H)
    assert all(np.array_equal(got[0], H) for H in got[1:])


@pytest.mark.parametrize("name", TILES)
def test_a_particle_gets_the_same_bits_wherever_it_is_computed(name):
    """In a vector tile or in the scalar tail, one input at a time or MAX_Q together: the
    same chain of fused multiply-adds, so the same bits (the φ cache of the sweep is
    filled by one grouping and read against another)."""
    tiles = tiles_mode(name)
    rng = np.random.default_rng(7)
    d, n, N = 16, MAX_Q, 3 * TILE
    U = rng.standard_normal((d, N))
    X = rng.standard_normal((n, d))
    together = np.empty((n, N))
    _one_tile(tiles, U, 0, N, X, 0, n, together)      # particle 20 in a vector tile
    tail = np.empty((n, N))
    _one_tile(tiles, U, 4, TILE + 5, X, 0, n, tail)   # ... and in the tail (j = 16)
    assert np.array_equal(together[:, 20], tail[:, 16])
    for i in range(n):
        alone = np.empty((1, N))
        _one_tile(tiles, U, 0, N, X, i, 1, alone)
        assert np.array_equal(alone[0], together[i])
    assert not np.array_equal(together[0], together[1])


def test_an_ir_tile_with_q_out_of_range_writes_nothing():
    tiles = tiles_mode("ir")
    U, X = np.ones((2, TILE)), np.ones((MAX_Q + 1, 2))
    H = np.full((MAX_Q + 1, TILE), 7.0)
    _one_tile(tiles, U, 0, TILE, X, 0, MAX_Q + 1, H)
    _one_tile(tiles, U, 0, TILE, X, 0, 0, H)
    assert np.all(H == 7.0)


@pytest.mark.parametrize("B, q, m", [(1, 5, 2 * TILE + 3), (4, 1, TILE), (3, MAX_Q, 7)])
def test_the_update_tile_moves_the_block_then_uses_it(B, q, m):
    """Z^U[:, a:a+m] −= lr Cᵀ G, the rest of Z^U untouched, and the pre-activations
    taken with the moved particles, by every implementation, with the same bits; the
    block ends at the array's end, so the prefetches reach past it."""
    rng = np.random.default_rng(B * 10 + q)
    d, a = 16, 3
    N = a + m
    U = rng.standard_normal((d, N))
    C, G = rng.standard_normal((B, d)), rng.standard_normal((B, m))
    X = rng.standard_normal((q, d))
    lr = 0.3
    runs = []
    for name in TILES:
        moved, H = U.copy(), np.empty((q, m))
        _update_tile(tiles_mode(name), moved, a, m, C, G, lr, X, q, H)
        runs.append((moved, H))
    for moved, H in runs[1:]:
        assert np.array_equal(moved, runs[0][0]) and np.array_equal(H, runs[0][1])
    moved, H = runs[0]
    step = lr * (C.T @ G)
    want = U[:, a:a + m] - step
    bound = (B + 1) * EPS * (np.abs(U[:, a:a + m]) + lr * (np.abs(C.T) @ np.abs(G)))
    assert np.all(np.abs(moved[:, a:a + m] - want) <= bound)
    assert np.array_equal(moved[:, :a], U[:, :a])
    assert np.all(np.abs(H - X @ moved[:, a:a + m]) <= _bound(X, moved[:, a:a + m]))
    assert np.abs(moved[:, a:] - U[:, a:]).min() > 0     # every particle moved


def test_the_choice_follows_the_measurements_or_the_environment(monkeypatch):
    """By default the IR where it measured at least 1.15x the plain tiles (from d = 4, but
    for large batches with the φ cache below d = 8); TP_LIMITS_TILES overrides that, and
    a name it does not know is refused."""
    from tp_limits.errors import SpecError
    monkeypatch.delenv("TP_LIMITS_TILES", raising=False)
    assert [tiles_for(d, B, c) for d, B, c in [(1, 1, True), (2, 4, False), (4, 1, True),
                                               (4, 16, False), (4, 16, True), (8, 16, True),
                                               (16, 1, False)]] == \
        ["plain", "plain", "ir", "ir", "plain", "ir", "ir"]
    for name in TILES:
        monkeypatch.setenv("TP_LIMITS_TILES", name)
        assert tiles_for(1, 1, False) == name
    monkeypatch.setenv("TP_LIMITS_TILES", "avx")
    with pytest.raises(SpecError, match="TP_LIMITS_TILES='avx'"):
        tiles_for(16, 1, False)


def test_the_plain_tiles_serve_when_the_ir_does_not_compile(monkeypatch):
    """A failing IR probe (a Numba/llvmlite the IR does not suit) gives one warning and
    the plain tiles, and the sweep runs on them with the IR's results."""
    import tp_limits as tp
    from tp_limits.limit.fused import tiling
    monkeypatch.delenv("TP_LIMITS_TILES", raising=False)
    net = tp.MLP(tp.mup(1), 4, 1)
    r = tp.Routine(np.eye(4)[:2], [[1.0], [-1.0]], lr=0.5)
    ir = tp.simulate_limit(net, r, particles=4096, replicates=2)

    def broken(*args):
        raise RuntimeError("LLVM ERROR: no such intrinsic")
    monkeypatch.setattr(tiling, "_probe", broken)
    tiling.ir_compiles.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="the plain tiles serve instead"):
            assert tiles_for(16, 1, False) == "plain"
        assert tiles_for(4, 2, True) == "plain"                   # one warning only
        plain = tp.simulate_limit(net, r, particles=4096, replicates=2)
    finally:
        tiling.ir_compiles.cache_clear()
    assert (plain.meta["tiles"], ir.meta["tiles"]) == ("plain", "ir")
    assert np.array_equal(plain.f_eval, ir.f_eval)
