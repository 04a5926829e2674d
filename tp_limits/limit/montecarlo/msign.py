"""The deep limit of an optimizer that moves a hidden matrix by a matrix function of its
buffer (Muon: msign), as a coefficient matrix over stored pairs (docs/theory.md §11.4).

Muon's buffer of W^l is a sum of the steps' outer products, D = (1/n) Pᵀ C Q, with P the
stored backward vectors δh^l (family G^l), Q the stored forward vectors x^{l−1} (F^l) and
C the momentum weights; its matrix sign is (1/n) Pᵀ K̂ Q, K̂ a function of the limit Gram
matrices E[Z^{δh_i} Z^{δh_j}] and E[Z^{x_i} Z^{x_j}] — the families' own — and of C
(the optimizer's ``hidden_core``).  The steps add up:

    W^l_t = ρ_t W^l_0 − (1/n) Pᵀ Ω_t Q,   Ω_{t+1} = (1 − s_t δ) Ω_t + s_t η_l K̂_t,

so in the limit, with stored pairs i, j,

    Z^{W_t x}    = ρ_t (Ẑ + Ż) − Σ_{i,j} Z^{δh_i} Ω_t[i, j] E[Z^{x_j} Z^x],
    Z^{W_tᵀ δh}  = ρ_t (Ẑ + Ż) − Σ_{i,j} Z^{x_j} Ω_t[i, j] E[Z^{δh_i} Z^{δh}]:

the pair sums of §4.2 with a full matrix in place of the diagonal C[t, s].  The hats,
their Gram matrices and Stein's Ż are unchanged (they concern W_0).

K̂ is computed from the particles' Gram matrices, so it carries their error, and
Newton–Schulz amplifies the error of small singular values (up to 3.4445⁵ ≈ 485 times):
with the default Sobol' points the resulting bias was not detected (under a tenth of the
reported standard error), with plain draws it is about a fifth of it (§11.4).
"""
from __future__ import annotations

import os

import numpy as np
from threadpoolctl import ThreadpoolController

from .montecarlo import DeepRun


class MsignDeepRun(DeepRun):
    """A deep Monte Carlo run whose hidden matrices move by Ω over stored pairs."""

    #: keep Ω and its k × k updates on the particles' device (CuPy) instead of the host
    #: (on NumPy both are the host).  Measured on one H200 (docs/performance.md): μP-Muon,
    #: L = 3, N = 10⁵, T = 200 took 4.6 s with the core on the device against 17.2 s with
    #: the k × k work on the host, which the device waited for at every step.
    core_on_device = True

    def __init__(self, spec, rng):
        super().__init__(spec, rng)
        cap = spec.problem.B * spec.problem.T
        self.core_xp = self.xp if self.core_on_device else np
        self.omega = {l: self.core_xp.zeros((cap, cap)) for l in range(2, self.L + 1)}
        # the BLAS libraries found once: a fresh search at every step (threadpool_limits)
        # reads the process's library map, which cost a quarter of a GPU run's time
        self._blas = ThreadpoolController()

    def _coefficients(self, own, other, z, kappa, l, zc, t):
        """ρ_t times the Ż coefficients, minus Ω's pair sums: on G's rows Ω E[x_j z] going
        forward, on F's rows Ωᵀ E[δh_i z] going back (κ/σ² are those expectations)."""
        zc = self.sched[l][0][t] * zc
        kp = self.npairs[l]
        if kp:
            om = self.xp.asarray(self.omega[l][:kp, :kp])
            if own is not self.F[l]:
                om = om.T
            zc[:kp] -= om @ kappa[:kp] / own.sigma2
        return zc

    def update(self, Xb, dh1, t_dh1, xL, t_xL, chi) -> None:
        """Z^U, Z^{nV} by the optimizer's particle step; then each hidden matrix's K̂ from
        the pairs stored so far (this step's included) and Ω ← (1 − s δ) Ω + s η_l K̂."""
        super().update(Xb, dh1, t_dh1, xL, t_xL, chi)
        t = self.updates - 1
        for l in range(2, self.L + 1):
            kp = self.npairs[l]
            F, G = self.F[l], self.G[l]
            GP, GQ = G.Cv[:kp, :kp], F.Cv[:kp, :kp]
            if self.core_xp is np:
                GP, GQ = _host(GP), _host(GQ)
            GP, GQ = GP / G.sigma2, GQ / F.sigma2
            # k x k products alone: every core may work on them (the run pins BLAS to one
            # thread where its own kernels run beside it)
            with self._blas.limit(limits=os.cpu_count() or 1, user_api="blas"):
                self.opt.move_pairs(self.omega[l], GP, GQ, t, len(Xb), self.spec.problem.rate(t),
                                    self.eta[l - 1], self.decay[l - 1], self.core_xp,
                                    self.clocks.of_layer("W", l - 1))


def _host(a):
    return a.get() if hasattr(a, "get") else a
