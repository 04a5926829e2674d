"""Pair moments V = E[φ(u) φ(v)] and V̇ = E[φ′(u) φ′(v)] of a centred Gaussian pair
(docs/theory.md §5.3), as functions of the variances a, b and the covariance c.

A nonlinearity's closed form where it has one (relu, erf, id: the
``gaussian_moments`` of its registry entry), otherwise nested one-dimensional
Gaussian integrals, each cut into pieces at the breakpoints of the Gaussian weight
and of φ's own features and integrated by Gauss–Legendre on every piece, so the
accuracy does not depend on the scale of the inputs (docs/theory.md §5.3).
"""
from __future__ import annotations

import numpy as np

from ...engine.backend import numpy_backend
from ...nonlinearities import get_nonlinearity

_NP = numpy_backend()
#: Gauss–Legendre nodes per piece, and the pieces' breakpoints: the Gaussian weight's in
#: z (its scale is 1 there) and φ's own in its argument y = μ + s z (its scale is 1 there).
NODES_PER_PIECE = 10
Z_BREAKS = np.array([-10.0, -7.0, -5.0, -3.5, -2.0, -1.0, 0.0, 1.0, 2.0, 3.5, 5.0, 7.0, 10.0])
ARG_BREAKS = np.array([-32.0, -8.0, -3.0, -1.0, 0.0, 1.0, 3.0, 8.0, 32.0])
#: Pairs integrated at once: bounds the (pairs, nodes, nodes) temporaries (~65 MB each).
PAIRS_PER_CHUNK = 64


def gaussian_rule(mu, s, k: int = NODES_PER_PIECE):
    """Nodes z and weights w with Σ w g(z) ≈ E[g(z)], z ~ N(0, 1), for g(z) = G(μ + s z).

    ``mu`` and ``s`` are arrays of one shape (...); the result has shape (..., P·k).
    [−10, 10] is cut at Z_BREAKS and at the points where μ + s z crosses
    ARG_BREAKS, and each piece gets a k-node Gauss–Legendre rule times the
    normal density.  Both the density and G are then smooth on every piece at
    the piece's own scale, whatever s is; s = 0 collapses φ's breakpoints onto
    ±10 and the rule integrates the constant G(μ) exactly.
    """
    from numpy.polynomial.legendre import leggauss
    mu = np.asarray(mu, float)[..., None]
    s = np.asarray(s, float)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        mapped = (ARG_BREAKS - mu) / s
    mapped = np.clip(np.where(np.isnan(mapped), 0.0, mapped), Z_BREAKS[0], Z_BREAKS[-1])
    fixed = np.broadcast_to(Z_BREAKS, mapped.shape[:-1] + Z_BREAKS.shape)
    br = np.sort(np.concatenate([fixed, mapped], axis=-1), axis=-1)
    lo, hi = br[..., :-1, None], br[..., 1:, None]
    x, w = leggauss(k)
    z = (lo + hi) / 2 + (hi - lo) / 2 * x
    wz = (hi - lo) / 2 * w * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
    shape = z.shape[:-2] + (-1,)
    return z.reshape(shape), wz.reshape(shape)


def _numerical(phi_name):
    """(a, b, c) -> (V, V̇) by two nested one-dimensional Gaussian integrals.

    u = √a z_1, v = ρ z_1 + τ z_2 with ρ = c/√a, τ² = b − c²/a, so
    V = E_{z_1}[φ(u) E_{z_2}[φ(ρ z_1 + τ z_2)]]; each integral uses
    :func:`gaussian_rule` at its own scale (docs/theory.md §5.3).
    """
    nl = get_nonlinearity(phi_name)

    def chunk(a, b, c):
        sa = np.sqrt(np.maximum(a, 0.0))
        rho = np.where(a > 0, c / np.where(a > 0, sa, 1.0), 0.0)
        tau = np.sqrt(np.maximum(b - rho * rho, 0.0))
        z1, w1 = gaussian_rule(np.zeros_like(a), sa)                        # (m, n1)
        u = sa[:, None] * z1
        mu = rho[:, None] * z1
        z2, w2 = gaussian_rule(mu, np.broadcast_to(tau[:, None], mu.shape))  # (m, n1, n2)
        v = mu[..., None] + tau[:, None, None] * z2
        g = np.sum(w2 * nl.phi(v, _NP), axis=-1)
        gd = np.sum(w2 * nl.dphi(v, _NP), axis=-1)
        return (np.sum(w1 * nl.phi(u, _NP) * g, axis=-1),
                np.sum(w1 * nl.dphi(u, _NP) * gd, axis=-1))

    def pair_moments(a, b, c):
        a, b, c = (np.asarray(x, float) for x in np.broadcast_arrays(a, b, c))
        flat = [x.reshape(-1) for x in (a, b, c)]
        V, Vd = np.empty(a.size), np.empty(a.size)
        for i in range(0, a.size, PAIRS_PER_CHUNK):
            sl = slice(i, i + PAIRS_PER_CHUNK)
            V[sl], Vd[sl] = chunk(*(x[sl] for x in flat))
        return V.reshape(a.shape), Vd.reshape(a.shape)

    return pair_moments


def pairwise(S, fn):
    """(V, V̇) matrices of the pair moments ``fn`` (from :func:`moments`) for the covariance
    matrix S: computed on the pairs i <= j and mirrored, so both are exactly symmetric."""
    i, j = np.triu_indices(len(S))
    diag = np.diag(S)
    out = []
    for m in fn(diag[i], diag[j], S[i, j]):
        M = np.empty_like(S)
        M[i, j] = m
        M[j, i] = m
        out.append(M)
    return out


def moments(phi: str):
    """(a, b, c) -> (V, V̇) for φ: its closed form when it has one, else quadrature."""
    return get_nonlinearity(phi).gaussian_moments or _numerical(phi)
