"""Initial particles of the one-hidden-layer limit (docs/theory.md §2.2).

Each particle carries Z^U ∈ R^d and Z^{nV} ∈ R^{d_out}; initially
Z^U ~ N(0, σ_1² I_d) and Z^{nV} = e_ω σ_2 ω with ω ~ N(0, I_{d_out})
independent (e_ω = [p = 1], §5.1).  Arrays are feature-major: U (d, N),
V (d_out, N), with weights w (length 1 for equal weights 1/N).

* ``antithetic_particles``: pairs (Z^U, +Z^{nV}), (Z^U, -Z^{nV}) stored
  side by side.  They are correlated draws from the right initial law (the
  particles interact only through expectations), they make the Monte Carlo
  f̊_0 exactly 0, and adjacent storage keeps both members of a pair in one
  block, so per-block means stay independent across blocks.
* ``quadrature_particles``: tensor Gauss–Hermite nodes in the Gaussian
  coordinates that are not identically zero, with product weights.
"""
from __future__ import annotations

import numpy as np

from ...errors import SpecError

#: NumPy's Gauss–Hermite weights overflow beyond ~350 nodes; stay well below.
MAX_NODES = 300


def random_particles(N: int, d: int, d_out: int, sigma_u: float, sigma_v: float,
                     readout_init: bool, draws, dtype, xp=np, sampler: str = "antithetic"):
    """N particles as ``xp`` arrays from ``draws`` (limit/sampling.py) by ``sampler``:
    antithetic pairs (below), independent draws ('mc'), or scrambled Sobol' points
    mapped to Gaussians ('qmc': randomized quasi-Monte Carlo, an error that falls
    faster than N^{-1/2} for smooth integrands; docs/theory.md §2.2)."""
    if sampler == "antithetic":
        return antithetic_particles(N, d, d_out, sigma_u, sigma_v, readout_init, draws, dtype,
                                    xp)
    if sampler == "qmc" and readout_init:
        # Sobol' points for one member of each pair, mirrored in Z^{nV}: f̊_0 = 0 exactly
        Z = draws.sobol_normals(d + d_out, N // 2)
        return _pairs(sigma_u * Z[:d], sigma_v * Z[d:], dtype, xp)
    dims = d + (d_out if readout_init else 0)
    Z = draws.sobol_normals(dims, N) if sampler == "qmc" else draws.normal((dims, N))
    U = sigma_u * Z[:d]
    V = sigma_v * Z[d:] if readout_init else xp.zeros((d_out, N))
    return U.astype(dtype), V.astype(dtype), np.full(1, 1.0 / N)


def _pairs(Z, W, dtype, xp):
    """Particles (Z, +W), (Z, −W) side by side, from the first members' columns."""
    U = xp.repeat(Z, 2, axis=1)
    V = xp.empty((W.shape[0], 2 * W.shape[1]))
    V[:, 0::2], V[:, 1::2] = W, -W
    return U.astype(dtype), V.astype(dtype), np.full(1, 1.0 / U.shape[1])


def antithetic_particles(N: int, d: int, d_out: int, sigma_u: float, sigma_v: float,
                         readout_init: bool, draws, dtype, xp=np):
    """N (even) particles as ``xp`` arrays, from ``draws`` (limit/sampling.py); independent
    draws when the readout starts at zero.  The weights stay a host array."""
    if not readout_init:
        U = sigma_u * draws.normal((d, N))
        return U.astype(dtype), xp.zeros((d_out, N), dtype), np.full(1, 1.0 / N)
    half = N // 2
    Z = sigma_u * draws.normal((d, half))
    W = sigma_v * draws.normal((d_out, half))
    return _pairs(Z, W, dtype, xp)


def quadrature_particles(nodes: int, d: int, d_out: int, sigma_u: float, sigma_v: float,
                         readout_init: bool, dtype):
    """Tensor Gauss–Hermite rule with ``nodes`` points per Gaussian coordinate."""
    from numpy.polynomial.hermite_e import hermegauss
    dims = d + (d_out if readout_init else 0)
    if dims > 3:
        raise SpecError(f"quadrature needs at most 3 Gaussian coordinates (d + d_out with a "
                        f"nonzero readout); this problem has {dims}. Use method='monte_carlo'")
    if not 2 <= nodes <= MAX_NODES:
        raise SpecError(f"quadrature needs 2..{MAX_NODES} nodes per coordinate, got {nodes}")
    with np.errstate(all="ignore"):
        x, wx = hermegauss(nodes)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(wx))):
        raise SpecError(f"the Gauss–Hermite rule with {nodes} nodes is not finite in float64")
    wx = wx / wx.sum()
    grids = np.meshgrid(*([x] * dims), indexing="ij")
    pts = np.stack([g.ravel() for g in grids])                  # (dims, nodes^dims)
    wts = np.prod(np.stack(np.meshgrid(*([wx] * dims), indexing="ij")).reshape(dims, -1), axis=0)
    U = sigma_u * pts[:d]
    V = sigma_v * pts[d:] if readout_init else np.zeros((d_out, pts.shape[1]))
    return U.astype(dtype), V.astype(dtype), wts
