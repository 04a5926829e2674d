"""φ inside the compiled one-hidden-layer sweep, dispatched from the nonlinearity registry.

The sweep takes φ as a *tag*, a tuple of zeros whose length is one more than the
φ's position in the registry (nonlinearities.py): its length is part of its Numba
type, so the sweep is compiled (and cached on disk) once per nonlinearity, with only
that φ inside, and the functions below pick, while compiling, the registry entry's
kernel form ``x -> (φ(x), φ′(x))`` and its traits.  A new nonlinearity is a new
registry entry; nothing here changes.

The φ cache (docs/performance.md): the forward pass of the next batch can leave
φ(Z^U ξ) (and φ′, unless it follows from φ) in memory for the next sweep's update,
which then skips B·(d multiply-adds + one φ) per particle at the cost of
2·cache_planes·B float64 of traffic.
"""
from __future__ import annotations

from functools import lru_cache

from numba import njit
from numba.extending import overload

from ...nonlinearities import NONLINEARITIES, get_nonlinearity, nonlinearity_code

_FAST = dict(fastmath=True, error_model="numpy", cache=True)
_ENTRIES = tuple(NONLINEARITIES.values())
_NAN = float("nan")

#: for the piecewise-linear φ (id, relu), from this input dimension on the engine keeps φ
#: of the next batch between sweeps (cache_pays)
CACHE_MIN_D = 8


def phi_tag(phi: str) -> tuple:
    """The sweep's handle for φ: a tuple of (registry position + 1) zeros."""
    return (0,) * (nonlinearity_code(phi) + 1)


def _entry(tag):
    """The registry entry of a tag's Numba type (while compiling)."""
    return _ENTRIES[len(tag) - 1]


@lru_cache(maxsize=None)
def _jitted(fn):
    """A scalar function of the registry as an inlined Numba function."""
    return njit(inline="always", fastmath=True, error_model="numpy")(fn)


def cache_planes(phi: str) -> int:
    """Rows per batch input of the φ cache: 1 (φ alone) where φ′ is a function of the
    value φ(x) (the entry's ``dphi_of_value``: id, tanh, relu, sigmoid), else 2 (φ, φ′).

    Keeping φ alone halves the cache's memory and traffic; the update recovers φ′ from
    it with the entry's formula (tanh: 1 − t² from the same t), bit for bit for id,
    tanh and relu, to an ulp for sigmoid (the compiler may fuse s(1 − s) differently
    in the two places)."""
    return 1 if get_nonlinearity(phi).dphi_of_value is not None else 2


def cache_pays(phi: str, d: int) -> bool:
    """Whether the engine keeps φ (and φ′ where it does not follow from φ, see
    :func:`cache_planes`) of the next batch between sweeps: for every φ that costs a
    real evaluation at every d, for the piecewise-linear ones (id, relu), whose φ is
    almost free, only from ``CACHE_MIN_D`` on, where the d multiply-adds it saves
    outweigh its traffic (measured: docs/performance.md)."""
    return d >= CACHE_MIN_D or not get_nonlinearity(phi).piecewise_linear


# ---- compiled dispatch ---------------------------------------------------------------
def phi_dphi(tag, x):
    """(φ(x), φ′(x)) for the φ of ``tag`` (compiled code only)."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(phi_dphi, jit_options=_FAST)
def _phi_dphi_for(tag, x):
    kernel = _jitted(_entry(tag).kernel)
    return lambda tag, x: kernel(x)


def piecewise_linear(tag):
    """Whether the φ of ``tag`` is piecewise linear (a compile-time constant)."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(piecewise_linear, inline="always")
def _piecewise_linear_for(tag):
    value = _entry(tag).piecewise_linear
    return lambda tag: value


def dphi_is_one(tag):
    """Whether φ′ ≡ 1 (a compile-time constant): nothing to multiply by.  Read off the
    entry's ``dphi_of_value``: a formula that gives 1 even for a NaN value does not
    depend on the value (id)."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(dphi_is_one, inline="always")
def _dphi_is_one_for(tag):
    fn = _entry(tag).dphi_of_value
    value = fn is not None and float(fn(float("nan"))) == 1.0
    return lambda tag: value


def dphi_from_value(tag):
    """Whether the cache of the φ of ``tag`` holds φ alone (a compile-time constant)."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(dphi_from_value, inline="always")
def _dphi_from_value_for(tag):
    value = _entry(tag).dphi_of_value is not None
    return lambda tag: value


def dphi_of_value(tag, p):
    """φ′ from the value p = φ(x), for the φ whose cache holds φ alone."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(dphi_of_value, jit_options=_FAST)
def _dphi_of_value_for(tag, p):
    fn = _entry(tag).dphi_of_value
    if fn is None:
        # the φ that keep φ′ in the cache never call this; Numba still types the
        # untaken branch for them, so it needs a body: NaN, loud if it were ever reached
        return lambda tag, p: _NAN
    jitted = _jitted(fn)
    return lambda tag, p: float(jitted(p))


def dphi_from_cache(tag, c):
    """φ′ from a value of the cache's last plane: c itself where that plane holds φ′,
    dphi_of_value(c) where it holds φ."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(dphi_from_cache, inline="always")
def _dphi_from_cache_for(tag, c):
    if _entry(tag).dphi_of_value is not None:
        return lambda tag, c: dphi_of_value(tag, c)
    return lambda tag, c: c


# ---- passes over a row of particles ----------------------------------------------------
@njit(inline="always", **_FAST)
def _phi_loop(tag, h, P, D, with_d):
    for j in range(h.shape[0]):
        p, dp = phi_dphi(tag, h[j])
        P[j] = p
        if with_d:                 # a constant after inlining: φ′ is dropped when unused
            D[j] = dp


@njit(inline="always", **_FAST)
def phi_arrays(tag, h, P, D):
    """P = φ(h), D = φ′(h) elementwise."""
    _phi_loop(tag, h, P, D, True)


@njit(inline="always", **_FAST)
def phi_values(tag, h, P):
    """P = φ(h) elementwise (P may be h itself)."""
    _phi_loop(tag, h, P, P, False)


@njit(inline="always", **_FAST)
def phi_times(tag, h, P, G):
    """P = φ(h) and G *= φ′(h) elementwise, in one pass (φ′ is not stored)."""
    for j in range(h.shape[0]):
        p, dp = phi_dphi(tag, h[j])
        P[j] = p
        G[j] *= dp


@njit(inline="always", **_FAST)
def phi_dot(tag, h, v):
    """Σ_j v_j φ(h_j) in one pass (used for the piecewise-linear φ: id, relu)."""
    s = 0.0
    for j in range(h.shape[0]):
        p, _ = phi_dphi(tag, h[j])
        s += v[j] * p
    return s
