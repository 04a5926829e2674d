"""NNGP and NTK kernels of an MLP with per-layer constants (docs/theory.md §5.3).

For inputs X (rows), with σ_l the effective init constants:

    Σ^1 = σ_1² X Xᵀ
    V^l = E[φ(u) φ(v)],  V̇^l = E[φ′(u) φ′(v)],  (u, v) ~ N(0, Σ^l on the pair),  l = 1..L
    Σ^{l+1} = σ_{l+1}² V^l
    Π^L = σ_{L+1}² V̇^L,   Π^{l-1} = σ_l² Π^l ⊙ V̇^{l-1}
    K_1 = Π^1 ⊙ X Xᵀ,   K_l = Π^l ⊙ V^{l-1} (2 <= l <= L),   K_{L+1} = V^L.

With the output multiplier α and per-layer learning-rate multipliers η_l/η,
the NNGP (covariance of f_0 for p = 1/2) is α² σ_{L+1}² V^L and the kernel of
layer l in kernel gradient descent is α² (η_l/η) K_l; outputs are independent
(⊗ I_{d_out}).

Closed forms for (u, v) with variances a, b and covariance c:

* relu: s = √(ab), θ = arccos(c/s): V = s (sin θ + (π - θ) cos θ) / (2π),
  V̇ = (π - θ) / (2π);
* erf:  V = (2/π) arcsin(2c / √((1+2a)(1+2b))),
  V̇ = (4/π) / √((1+2a)(1+2b) - 4c²);
* id:   V = c, V̇ = 1;
* otherwise: 2-D Gauss–Hermite quadrature with 80 x 80 nodes.
"""
from __future__ import annotations

import numpy as np

from ..backend import numpy_backend
from ..nonlinearities import get_nonlinearity

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


def _pairwise(S, fn):
    diag = np.diag(S)
    return fn(diag[:, None] * np.ones_like(S), diag[None, :] * np.ones_like(S), S)


def layer_kernels(phi: str, sigma, X1, X2=None) -> dict:
    """V^l, V̇^l (l = 1..L) and the contributions K_1..K_{L+1} between X1 and X2.

    ``sigma`` holds the L+1 effective init constants.  Cross kernels are
    computed on the stacked inputs and cut out, so the pair moments see the
    right variances.
    """
    X2 = X1 if X2 is None else X2
    X = np.vstack([X1, X2])
    n1 = len(X1)
    L = len(sigma) - 1
    fn = moments(phi)
    S = sigma[0] ** 2 * X @ X.T
    Vs, Vds = [], []
    for l in range(L):
        V, Vd = _pairwise(S, fn)
        Vs.append(V)
        Vds.append(Vd)
        S = sigma[l + 1] ** 2 * V
    Pi = [None] * L
    Pi[L - 1] = sigma[L] ** 2 * Vds[L - 1]
    for l in range(L - 1, 0, -1):
        Pi[l - 1] = sigma[l] ** 2 * Pi[l] * Vds[l - 1]
    K = [Pi[0] * (X @ X.T)] + [Pi[l] * Vs[l - 1] for l in range(1, L)] + [Vs[L - 1]]
    cut = lambda M: M[:n1, n1:]  # noqa: E731
    return {"V": [cut(v) for v in Vs], "Vdot": [cut(v) for v in Vds],
            "K": [cut(k) for k in K], "nngp": sigma[L] ** 2 * cut(Vs[L - 1])}


def nngp(net, X1, X2=None) -> np.ndarray:
    """Covariance of f_0 in the limit when p = 1/2: α² σ_{L+1}² V^L(X1, X2) (per output)."""
    lk = layer_kernels(net.phi, net.effective_sigma, np.asarray(X1, float),
                       None if X2 is None else np.asarray(X2, float))
    return net.output_multiplier ** 2 * lk["nngp"]


def ntk(net, X1, X2=None, components: bool = False, layers=None):
    """The limiting kernel of ``net``'s parametrization (docs/theory.md §5.2).

    K = α² Σ_{l in layers} (η_l/η) K_l, where ``layers`` defaults to the
    classification's ``kernel_components`` (NTP: all; SP with LR 1/n: no input
    layer; ...), or to every layer (the full NTK) when the parametrization is
    not in the kernel regime.  ``components=True`` returns {l: α² (η_l/η) K_l}.
    """
    k = net.param.classify()
    if layers is None:
        layers = k.kernel_components or tuple(range(1, net.L + 2))
    lk = layer_kernels(net.phi, net.effective_sigma, np.asarray(X1, float),
                       None if X2 is None else np.asarray(X2, float))
    a2 = net.output_multiplier ** 2
    comps = {l: a2 * net.lr_mult[l - 1] * lk["K"][l - 1] for l in layers}
    return comps if components else sum(comps.values())
