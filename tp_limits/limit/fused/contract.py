"""The typed contract of one particle sweep: :class:`SweepArgs`.

One sweep = one training step of the one-hidden-layer limit (docs/theory.md §2):

1. (if a batch is given) with χ_t, every particle's coordinates move by the
   optimizer's rule (rule.py) fed the increments
       g^U = scale_u Σ_i (χ_iᵀ Z^{nV}) φ′(Z^U ξ_i) ξ_iᵀ,    g^V = scale_v Σ_i χ_i φ(Z^U ξ_i)
   (scale = α η_l e_l for SGD, the plain-SGD step; α for Adam, whose rate is in its
   hyperparameters; docs/theory.md §5.1, §10);
2. with the moved particles, the weighted sums Σ_α w_α Z^{nV}_α φ(Z^U_α ξ) for the
   next batch and the eval inputs, and, if asked, the coordinate statistics of the
   eval inputs, per block of particles (columns.py).

The Numba kernel (sweep.py), its NumPy twin (sweep_numpy.py) and the CUDA kernel
(sweep_cuda.py) take the same record, :class:`SweepArgs`; sweeps.py puts one
interface in front of them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .phi import phi_tag
from .rule import rule_tag
from .tiling import tiles_build, tiles_for, tiles_mode


class SweepData(NamedTuple):
    """The arrays and numbers one sweep reads (arrays of the run's backend unless said
    otherwise).

    ``U`` (d, N), ``V`` (d_out, N): the particles' Z^U, Z^{nV}, moved in place;
    ``w``: host weights, (1,) for equal weights 1/N or (N,);
    ``U0``: Z^U_0 for the statistics, (d, N), or (d, 1) when they are not asked for;
    ``Xb`` (B, d), ``chi`` (B, d_out): the batch of the update (B = 0: no update);
    ``scale_u``, ``scale_v``: the optimizer is fed scale · Σ (see the module docstring);
    ``Xn`` (Bn, d): the next batch; ``Xe`` (E, d): the eval inputs (E = 0: none);
    ``stats``: the eval inputs' coordinate statistics too; ``block``: particles per block;
    ``SU`` (slots·d, N), ``SV`` (slots·d_out, N): the optimizer's state, moved in place
    (None: a rule without state); ``cache`` (planes, B', N) float64: φ of the next batch
    kept for the next sweep (None: no cache); ``cached``: this sweep's batch has its φ
    in the cache; ``tiles``: the pre-activation tiles, a position in tiling.TILES.
    """

    U: object
    V: object
    w: object
    U0: object
    Xb: object
    chi: object
    scale_u: float
    scale_v: float
    Xn: object
    Xe: object
    stats: bool
    block: int
    SU: object = None
    SV: object = None
    cache: object = None
    cached: bool = False
    tiles: int = 0


class SweepArgs(NamedTuple):
    """One sweep: its data, and the compile-time choices — the tags of φ (phi.py) and of
    the optimizer's coordinate rule (rule.py), the rule's hyperparameter records for
    Z^U and Z^{nV}, and which tiles are compiled in (tiling.tiles_build).  The compiled
    kernel takes them as separate arguments (Numba's parallel loops take tuples only
    as top-level arguments), in this order."""

    data: SweepData
    phi: tuple
    rule: tuple
    hyper_u: tuple
    hyper_v: tuple
    tiles: tuple


NO_CACHE = (2, 0, 1)          # the shape of the cache argument when there is none


def sweep_args(data: SweepData, optimizer, hyper_u, hyper_v, phi: str, xp=np,
               tiles: str | None = None) -> SweepArgs:
    """The sweep of ``data`` under φ (a registry name) and ``optimizer``'s coordinate rule
    with the hyperparameter records of Z^U and Z^{nV}, with the pre-activation tiles
    ``tiles`` (None: tiling.tiles_for's choice for this batch and cache; an engine
    chooses once per run, so that one compiled sweep serves it); missing state and
    cache become the
    empty arrays the kernels expect (the particles' dtype for the state, float64 for
    the cache), and the numbers get the types the compiled kernel is cached for."""
    rule = optimizer.rule
    U, V = data.U, data.V
    SU, SV, cache = data.SU, data.SV, data.cache
    if SU is None:
        SU = xp.zeros((len(rule.slots) * U.shape[0], U.shape[1] if rule.slots else 1),
                      U.dtype)
    if SV is None:
        SV = xp.zeros((len(rule.slots) * V.shape[0], V.shape[1] if rule.slots else 1),
                      V.dtype)
    if cache is None:
        cache = xp.zeros(NO_CACHE)
    floats = lambda h: h._make(float(x) for x in h)      # noqa: E731  (one compiled type)
    if tiles is None:
        tiles = tiles_for(U.shape[0], max(data.Xb.shape[0], data.Xn.shape[0]),
                          cache.shape[1] > 0)
    data = data._replace(scale_u=float(data.scale_u), scale_v=float(data.scale_v),
                         stats=bool(data.stats), block=int(data.block), SU=SU, SV=SV,
                         cache=cache, cached=bool(data.cached), tiles=tiles_mode(tiles))
    return SweepArgs(data, phi_tag(phi), rule_tag(rule), floats(hyper_u), floats(hyper_v),
                     tiles_build())
