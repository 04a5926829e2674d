"""Nonlinearities φ with φ′ and φ″, written against a backend's array module.

Each function takes ``(x, backend)`` so that the same definition runs on
NumPy and CuPy.  ``homogeneous`` marks positively 1-homogeneous φ
(φ(s x) = s φ(x) for s > 0), for which the init-scale alignment of
:class:`tp_limits.spec.MLP` (``output_scale``) is exact.  ``smooth`` is False
for a φ with a kink (relu): its φ″ is a point mass that ``d2phi`` cannot
represent, which matters to estimators built on φ″.  ``dphi_of_value`` gives
φ′(x) from the value p = φ(x) where φ′ is a function of φ alone (tanh: 1 − p²,
sigmoid: p(1 − p), relu: 1[p > 0], id: 1), else None: the one-hidden-layer
kernel then keeps only φ between sweeps (docs/performance.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .errors import SpecError

_SQRT2 = math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRTPI = 2.0 / math.sqrt(math.pi)


@dataclass(frozen=True)
class Nonlinearity:
    name: str
    phi: Callable
    dphi: Callable
    d2phi: Callable
    homogeneous: bool = False
    smooth: bool = True
    dphi_of_value: Callable | None = None


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


NONLINEARITIES = {
    "tanh": Nonlinearity("tanh", lambda x, b: b.xp.tanh(x), _tanh_d1, _tanh_d2,
                         dphi_of_value=lambda p, b: 1.0 - p * p),
    "relu": Nonlinearity("relu", lambda x, b: b.xp.maximum(x, 0.0),
                         lambda x, b: (x > 0).astype(x.dtype),
                         lambda x, b: b.xp.zeros_like(x), homogeneous=True, smooth=False,
                         dphi_of_value=lambda p, b: (p > 0).astype(p.dtype)),
    "gelu": Nonlinearity("gelu", _gelu, _gelu_d1, _gelu_d2),
    "erf": Nonlinearity("erf", lambda x, b: b.erf(x), _erf_d1,
                        lambda x, b: -2.0 * x * _erf_d1(x, b)),
    "sigmoid": Nonlinearity("sigmoid", _sigmoid, _sigmoid_d1, _sigmoid_d2,
                            dphi_of_value=lambda p, b: p * (1.0 - p)),
    "softplus": Nonlinearity("softplus", lambda x, b: b.xp.logaddexp(0.0, x),
                             _sigmoid, _sigmoid_d1),
    "id": Nonlinearity("id", lambda x, b: x, lambda x, b: b.xp.ones_like(x),
                       lambda x, b: b.xp.zeros_like(x), homogeneous=True,
                       dphi_of_value=lambda p, b: b.xp.ones_like(p)),
}


def get_nonlinearity(name: str) -> Nonlinearity:
    try:
        return NONLINEARITIES[name]
    except (KeyError, TypeError):
        raise SpecError(f"unknown nonlinearity {name!r}; choose one of "
                        f"{sorted(NONLINEARITIES)}") from None
