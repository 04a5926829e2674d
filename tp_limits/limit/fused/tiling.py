"""Which pre-activation tiles the sweep uses, and the tiling of the inputs.

Two implementations of one API (a tile of up to MAX_Q inputs over a chunk of
particles, optionally after the SGD step of Z^U), with the same arithmetic chains,
so a particle gets the same bits from either:

* ``"ir"`` — tiles.py: the loop nest as LLVM IR with explicit vectors, the running
  sums in registers;
* ``"plain"`` — tiles_plain.py: plain Numba loops, the sums in L1;
* ``"prefetch"`` — the plain loops with a software prefetch in the fused update.

The sweep takes the choice at run time, as a number (its position in TILES), so one
compiled sweep serves all three; the tile functions take it as ``tiles`` = (build,
mode), where ``build`` tags what is compiled in (:func:`tiles_build`):
all three where the IR compiles with the installed Numba/llvmlite, the plain ones
alone where it does not (then with one warning, and the IR's runs take the plain
tiles).  :func:`tiles_for` makes the choice: the environment variable
``TP_LIMITS_TILES`` (``ir``, ``plain``, ``prefetch``) if set, else the measured
policy of docs/performance.md.
"""
from __future__ import annotations

import os
import warnings
from functools import lru_cache

import numpy as np
from numba import njit
from numba.extending import overload

from ...errors import SpecError
from .tiles import MAX_Q, preact_tile, update_preact_tile
from .tiles_plain import preact_tile_plain, update_preact_tile_plain

TILES = ("ir", "plain", "prefetch")
ENV = "TP_LIMITS_TILES"
_FAST = dict(fastmath=True, error_model="numpy", cache=True)


def tiles_mode(name: str) -> int:
    """The run-time choice of tiles: the position of ``name`` in TILES."""
    return TILES.index(name)


def tiles_build() -> tuple:
    """What the sweep is compiled with: (0, 0) the IR tiles and the plain ones, (0,) the
    plain ones alone (where the IR does not compile)."""
    return (0, 0) if ir_compiles() else (0,)


#: the IR tiles serve from this input dimension on (below, the plain ones)...
IR_MIN_D = 4
#: ... except where the φ cache is kept with batches larger than FUSE_MAX_B below this d
IR_CACHED_BATCH_MIN_D = 8
#: up to this batch size the plain rule moves Z^U in the forward pass's first tile
#: (update_pre_tile); beyond it the sweep's separate update passes are faster
FUSE_MAX_B = 4


def tiles_for(d: int, B: int, cached: bool) -> str:
    """The tiles of a run with input dimension d, batch size B and (``cached``) the φ
    cache kept: the environment's choice, else the IR where it measured at least 1.15×
    the plain tiles end to end (docs/performance.md: d >= IR_MIN_D, but for B >
    FUSE_MAX_B with the cache below IR_CACHED_BATCH_MIN_D), else the plain ones; the
    plain ones wherever the IR does not compile."""
    asked = os.environ.get(ENV, "").strip().lower()
    if asked:
        if asked not in TILES:
            raise SpecError(f"{ENV}={asked!r}; choose one of {TILES} (or unset it)")
        return asked if asked != "ir" or ir_compiles() else "plain"
    measured = d >= IR_MIN_D and not (cached and B > FUSE_MAX_B and d < IR_CACHED_BATCH_MIN_D)
    return "ir" if measured and ir_compiles() else "plain"


@njit(**_FAST)
def _probe(U, C, G, X, H):
    preact_tile(U, 0, U.shape[1], X, 0, X.shape[0], H)
    update_preact_tile(U, 0, U.shape[1], C, G, 0.5, X, 0, X.shape[0], H, 64)
    return H[0, 0]


@lru_cache(maxsize=None)
def ir_compiles() -> bool:
    """Whether the IR tiles compile (and compute) with the installed Numba and llvmlite;
    if not, one warning, and the plain tiles serve."""
    try:
        U, X = np.ones((2, 20)), np.ones((1, 2))
        value = _probe(U, np.ones((1, 2)), np.zeros((1, 20)), X, np.empty((1, 20)))
        if value != 2.0:
            raise ValueError(f"a probe sum came out {value}, not 2")
        return True
    except Exception as exc:                 # any failure of the code generation
        warnings.warn(f"tp_limits: the register tiles (LLVM IR) do not work with this "
                      f"Numba/llvmlite ({type(exc).__name__}: {str(exc)[:120]}); the plain "
                      f"tiles serve instead (set {ENV}=plain to skip this check)",
                      RuntimeWarning, stacklevel=2)
        return False


_IR, _PREFETCH = TILES.index("ir"), TILES.index("prefetch")


def pre_tile(tiles, U, a, m, X, i0, q, H):
    """H[r, :m] = Σ_k U[k, a:a+m] X[i0 + r, k] for r < q, by ``tiles`` = (build, mode):
    the tiles at position ``mode`` of TILES, the IR ones only where the compiled-in
    ``build`` (:func:`tiles_build`) has them (compiled code only)."""
    raise NotImplementedError("only callable from Numba-compiled code")


def _with_ir(tiles) -> bool:
    """Whether the type of ``tiles`` = (build, mode) has the IR tiles compiled in."""
    return len(tiles.types[0]) == 2


@overload(pre_tile, jit_options=dict(fastmath=True, error_model="numpy"))
def _pre_tile_for(tiles, U, a, m, X, i0, q, H):
    if _with_ir(tiles):
        def either(tiles, U, a, m, X, i0, q, H):
            if tiles[1] == _IR:
                preact_tile(U, a, m, X, i0, q, H)
            else:
                preact_tile_plain(U, a, m, X, i0, q, H)
        return either
    return lambda tiles, U, a, m, X, i0, q, H: preact_tile_plain(U, a, m, X, i0, q, H)


def update_pre_tile(tiles, U, a, m, C, G, lr, X, i0, q, H, ahead):
    """U[k, a:a+m] −= lr Σ_b C[b, k] G[b, :m], then pre_tile; the plain tiles with the
    prefetch ask for each row's lines ``ahead`` particles on (compiled code only)."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(update_pre_tile, jit_options=dict(fastmath=True, error_model="numpy"))
def _update_pre_tile_for(tiles, U, a, m, C, G, lr, X, i0, q, H, ahead):
    with_ir = _with_ir(tiles)

    def chosen(tiles, U, a, m, C, G, lr, X, i0, q, H, ahead):
        if with_ir and tiles[1] == _IR:
            update_preact_tile(U, a, m, C, G, lr, X, i0, q, H, ahead)
        else:
            update_preact_tile_plain(U, a, m, C, G, lr, X, i0, q, H, ahead,
                                     tiles[1] == _PREFETCH)
    return chosen


@njit(inline="always", **_FAST)
def tile_count(n):
    """The fewest tiles of at most MAX_Q inputs that hold n inputs."""
    return (n + MAX_Q - 1) // MAX_Q


@njit(inline="always", **_FAST)
def tile_size(n, i0, t, tiles):
    """Inputs in tile t of ``tiles`` of near-equal size (20 inputs: four tiles of five),
    i0 inputs already taken by the tiles before it."""
    return (n - i0) // (tiles - t)


@njit(**_FAST)
def preacts_into(tiles, U, a, m, X, H):
    """H[i, :m] = Z^U[:, a:a+m]ᵀ X[i] for every row i of X, tile by tile (``tiles`` as
    in :func:`pre_tile`)."""
    n = X.shape[0]
    count = tile_count(n)
    i0 = 0
    for t in range(count):
        q = tile_size(n, i0, t, count)
        pre_tile(tiles, U, a, m, X, i0, q, H[i0:])
        i0 += q
