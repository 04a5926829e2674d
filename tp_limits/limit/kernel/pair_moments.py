"""Pair moments V = E[φ(u) φ(v)] and V̇ = E[φ′(u) φ′(v)] of a centred Gaussian pair
(docs/theory.md §5.3), as functions of the variances a, b and the covariance c.

Closed forms:

* relu: s = √(ab), θ = arccos(c/s): V = s (sin θ + (π - θ) cos θ) / (2π),
  V̇ = (π - θ) / (2π);
* erf:  V = (2/π) arcsin(2c / √((1+2a)(1+2b))),
  V̇ = (4/π) / √((1+2a)(1+2b) - 4c²);
* id:   V = c, V̇ = 1;
* otherwise: 2-D Gauss–Hermite quadrature with 80 x 80 nodes.
"""
from __future__ import annotations

import numpy as np

from ...engine.backend import numpy_backend
from ...nonlinearities import get_nonlinearity

QUAD_NODES = 80
_NP = numpy_backend()


def _relu(a, b, c):
    s = np.sqrt(a * b)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(s > 0, np.clip(c / np.where(s > 0, s, 1.0), -1.0, 1.0), 1.0)
    th = np.arccos(cos)
    V = s * (np.sin(th) + (np.pi - th) * cos) / (2 * np.pi)
    Vd = np.where(s > 0, (np.pi - th) / (2 * np.pi), 0.0)   # φ′(0) = 0
    return V, Vd


def _erf(a, b, c):
    q = (1 + 2 * a) * (1 + 2 * b)
    V = (2 / np.pi) * np.arcsin(np.clip(2 * c / np.sqrt(q), -1.0, 1.0))
    Vd = (4 / np.pi) / np.sqrt(q - 4 * c * c)
    return V, Vd


def _identity(a, b, c):
    return c.copy(), np.ones_like(c)


def _quadrature(phi_name):
    nl = get_nonlinearity(phi_name)
    from numpy.polynomial.hermite_e import hermegauss
    z, w = hermegauss(QUAD_NODES)
    w = w / w.sum()
    Z1, Z2 = np.meshgrid(z, z, indexing="ij")
    W = np.outer(w, w)

    def pair_moments(a, b, c):
        """E[φ(u)φ(v)], E[φ′(u)φ′(v)] for arrays of (a, b, c), via u = √a z1, v = ρ z1 + τ z2."""
        sa = np.sqrt(np.maximum(a, 0.0))[..., None, None]
        rho = np.where(a > 0, c / np.where(a > 0, np.sqrt(a), 1.0), 0.0)[..., None, None]
        tau = np.sqrt(np.maximum(b - np.where(a > 0, c * c / np.where(a > 0, a, 1.0), 0.0),
                                 0.0))[..., None, None]
        u = sa * Z1
        v = rho * Z1 + tau * Z2
        V = np.sum(W * nl.phi(u, _NP) * nl.phi(v, _NP), axis=(-2, -1))
        Vd = np.sum(W * nl.dphi(u, _NP) * nl.dphi(v, _NP), axis=(-2, -1))
        return V, Vd

    return pair_moments


CLOSED_FORMS = {"relu": _relu, "erf": _erf, "id": _identity}


def moments(phi: str):
    """(a, b, c) -> (V, V̇) for φ: a closed form when there is one, else quadrature."""
    return CLOSED_FORMS.get(phi) or _quadrature(phi)
