"""Nonlinearities φ: one registry entry each, read by every engine.

An entry carries everything an engine asks of φ:

* ``phi``, ``dphi``, ``d2phi`` — array forms ``(x, backend)``, run on NumPy or
  CuPy: the finite networks, the deep Monte Carlo engine, the kernel quadrature
  and the whole-array twin of the one-hidden-layer sweep;
* ``kernel`` — the scalar form ``x -> (φ(x), φ′(x))`` in the style of
  elementwise.py: the Numba sweep inlines it and the CUDA sweep's source is
  generated from it (engine/cuda_source.py), so one definition serves both
  compiled kernels.  It may use a vectorizable approximation (``fast_tanh``, ≤ 4
  ulp) where the array forms use the library function;
* ``dphi_of_value`` — φ′ as a function of the value p = φ(x) where φ′ is a
  function of φ alone (tanh: 1 − p², sigmoid: p(1 − p), relu: 1[p > 0], id: 1),
  else None: the one-hidden-layer sweep then keeps only φ between sweeps
  (docs/performance.md).  Scalar-or-array, like ``kernel``;
* ``gaussian_moments`` — an optional closed form (a, b, c) -> (V, V̇) of
  V = E[φ(u)φ(v)], V̇ = E[φ′(u)φ′(v)] for a centred Gaussian pair with variances
  a, b and covariance c (docs/theory.md §5.3); without one the kernels integrate
  numerically;
* traits: ``homogeneous`` (positively 1-homogeneous, φ(s x) = s φ(x) for s > 0: the
  init-scale alignment of docs/theory.md §7.3 is exact, and quadrature has no
  scale to resolve), ``smooth`` (False for a kink, whose φ″ is a point mass that
  ``d2phi`` cannot represent: estimators built on φ″ refuse it),
  ``piecewise_linear`` (φ costs next to nothing to evaluate: the sweep fuses it
  with the readout sums) and ``odd`` (φ(−x) = −φ(x)).

A new nonlinearity is one more entry here (append it: the compiled sweep is cached
on disk per entry position), with its tests.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .elementwise import fast_tanh, where
from .errors import SpecError

_SQRT2 = math.sqrt(2.0)
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRTPI = 2.0 / math.sqrt(math.pi)


@dataclass(frozen=True)
class Nonlinearity:
    name: str
    phi: Callable
    dphi: Callable
    d2phi: Callable
    kernel: Callable
    dphi_of_value: Callable | None = None
    gaussian_moments: Callable | None = None
    homogeneous: bool = False
    smooth: bool = True
    piecewise_linear: bool = False
    odd: bool = False


# ---- array forms (x, backend) ------------------------------------------------------
def _sigmoid(x, b):
    return 0.5 * (1.0 + b.xp.tanh(0.5 * x))     # overflow-free logistic


def _tanh_d1(x, b):
    t = b.xp.tanh(x)
    return 1.0 - t * t


def _tanh_d2(x, b):
    t = b.xp.tanh(x)
    return -2.0 * t * (1.0 - t * t)


def _gauss(x, b):
    return _INV_SQRT2PI * b.xp.exp(-0.5 * x * x)


def _gelu(x, b):                               # x Φ(x)
    return 0.5 * x * (1.0 + b.erf(x / _SQRT2))


def _gelu_d1(x, b):                            # Φ(x) + x ϕ(x)
    return 0.5 * (1.0 + b.erf(x / _SQRT2)) + x * _gauss(x, b)


def _gelu_d2(x, b):                            # ϕ(x) (2 - x²)
    return _gauss(x, b) * (2.0 - x * x)


def _erf_d1(x, b):
    return _TWO_OVER_SQRTPI * b.xp.exp(-x * x)


def _sigmoid_d1(x, b):
    s = _sigmoid(x, b)
    return s * (1.0 - s)


def _sigmoid_d2(x, b):
    s = _sigmoid(x, b)
    return s * (1.0 - s) * (1.0 - 2.0 * s)


def _silu(x, b):                               # x σ(x)
    return x * _sigmoid(x, b)


def _silu_d1(x, b):                            # σ (1 + x (1 − σ))
    s = _sigmoid(x, b)
    return s * (1.0 + x * (1.0 - s))


def _silu_d2(x, b):                            # σ′ (2 + x (1 − 2σ)), σ′ = σ (1 − σ)
    s = _sigmoid(x, b)
    return s * (1.0 - s) * (2.0 + x * (1.0 - 2.0 * s))


# ---- kernel forms x -> (φ(x), φ′(x)), and φ′ from the value ------------------------
def _id_kernel(x):
    return x, 1.0


def _tanh_kernel(x):
    t = fast_tanh(x)
    return t, 1.0 - t * t


def _relu_kernel(x):
    return where(x > 0.0, x, 0.0), where(x > 0.0, 1.0, 0.0)


def _sigmoid_kernel(x):
    s = 0.5 * (1.0 + fast_tanh(0.5 * x))
    return s, s * (1.0 - s)


def _gelu_kernel(x):                           # scalar libm erf and exp
    c = 0.5 * (1.0 + math.erf(x * _SQRT1_2))
    return x * c, c + x * _INV_SQRT2PI * math.exp(-0.5 * x * x)


def _erf_kernel(x):
    return math.erf(x), _TWO_OVER_SQRTPI * math.exp(-x * x)


def _softplus_kernel(x):
    s = 0.5 * (1.0 + fast_tanh(0.5 * x))
    return max(x, 0.0) + math.log1p(math.exp(-abs(x))), s


def _silu_kernel(x):
    s = 0.5 * (1.0 + fast_tanh(0.5 * x))
    return x * s, s * (1.0 + x * (1.0 - s))


def _id_from_value(p):
    return 1.0


def _tanh_from_value(p):
    return 1.0 - p * p


def _relu_from_value(p):
    return where(p > 0.0, 1.0, 0.0)


def _sigmoid_from_value(p):
    return p * (1.0 - p)


# ---- closed-form Gaussian moments (docs/theory.md §5.3) -----------------------------
def _relu_moments(a, b, c):
    """s = √(ab), θ = arccos(c/s): V = s (sin θ + (π − θ) cos θ)/(2π), V̇ = (π − θ)/(2π)."""
    s = np.sqrt(a * b)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(s > 0, np.clip(c / np.where(s > 0, s, 1.0), -1.0, 1.0), 1.0)
    th = np.arccos(cos)
    V = s * (np.sin(th) + (np.pi - th) * cos) / (2 * np.pi)
    Vd = np.where(s > 0, (np.pi - th) / (2 * np.pi), 0.0)   # φ′(0) = 0
    return V, Vd


def _erf_moments(a, b, c):
    """V = (2/π) arcsin(2c/√((1+2a)(1+2b))), V̇ = (4/π)/√((1+2a)(1+2b) − 4c²)."""
    q = (1 + 2 * a) * (1 + 2 * b)
    V = (2 / np.pi) * np.arcsin(np.clip(2 * c / np.sqrt(q), -1.0, 1.0))
    Vd = (4 / np.pi) / np.sqrt(q - 4 * c * c)
    return V, Vd


def _id_moments(a, b, c):
    return np.array(c, float), np.ones_like(c, dtype=float)


_ENTRIES = (
    Nonlinearity("id", lambda x, b: x, lambda x, b: b.xp.ones_like(x),
                 lambda x, b: b.xp.zeros_like(x), _id_kernel, _id_from_value, _id_moments,
                 homogeneous=True, piecewise_linear=True, odd=True),
    Nonlinearity("tanh", lambda x, b: b.xp.tanh(x), _tanh_d1, _tanh_d2, _tanh_kernel,
                 _tanh_from_value, odd=True),
    Nonlinearity("relu", lambda x, b: b.xp.maximum(x, 0.0),
                 lambda x, b: (x > 0).astype(x.dtype), lambda x, b: b.xp.zeros_like(x),
                 _relu_kernel, _relu_from_value, _relu_moments, homogeneous=True,
                 smooth=False, piecewise_linear=True),
    Nonlinearity("sigmoid", _sigmoid, _sigmoid_d1, _sigmoid_d2, _sigmoid_kernel,
                 _sigmoid_from_value),
    Nonlinearity("gelu", _gelu, _gelu_d1, _gelu_d2, _gelu_kernel),
    Nonlinearity("erf", lambda x, b: b.erf(x), _erf_d1, lambda x, b: -2.0 * x * _erf_d1(x, b),
                 _erf_kernel, gaussian_moments=_erf_moments, odd=True),
    Nonlinearity("softplus", lambda x, b: b.xp.logaddexp(0.0, x), _sigmoid, _sigmoid_d1,
                 _softplus_kernel),
    Nonlinearity("silu", _silu, _silu_d1, _silu_d2, _silu_kernel),
)

#: name -> entry, in registry order (an entry's position is its code in compiled kernels)
NONLINEARITIES = {nl.name: nl for nl in _ENTRIES}


def get_nonlinearity(name: str) -> Nonlinearity:
    try:
        return NONLINEARITIES[name]
    except (KeyError, TypeError):
        raise SpecError(f"unknown nonlinearity {name!r}; choose one of "
                        f"{sorted(NONLINEARITIES)}") from None


def nonlinearity_code(name: str) -> int:
    """The position of φ's entry in the registry: its code in the compiled kernels."""
    return list(NONLINEARITIES).index(get_nonlinearity(name).name)
