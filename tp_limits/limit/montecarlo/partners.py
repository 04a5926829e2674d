"""The deep (L >= 2) limit of an optimizer that is not linear in the gradients, such as
Adam: partner particles (docs/theory.md §10.6).

Adam moves entry (α, β) of a hidden matrix W^l by ψ_s(α, β), a nonlinear
function of the history of its rescaled gradient entries
ĝ_r(α, β) = Σ_i Z^{δh^l_{r,i}}_α Z^{x^{l−1}_{r,i}}_β, r <= s (the optimizer's
``direction``).  With decoupled decay δ = η_l λ, W^l_t = ρ_t W^l_0 − η_l e_l n^{−1} Ψ_t
with Ψ_{t+1} = (1 − s_t δ) Ψ_t + s_t ψ_t (s_t: the learning-rate schedule's factor
of the step, docs/theory.md §10.9), so in the limit

    Z^{W_t x}_α   = ρ_t (Ẑ + Ż) − η_l e_l E_β[Ψ_t(α, β) Z^x_β],
    Z^{W_tᵀ δh}_β = ρ_t (Ẑ + Ż) − η_l e_l E_α[Ψ_t(α, β) Z^{δh}_α],

where the expectation runs over an independent copy of the particle.  It is
estimated with M partner particles, a random subset P fixed for the run, whose
optimizer state is carried along for the pairs (all, P) (forward) and (P, all)
(backward): memory (2 + slots) M per particle and hidden layer (Adam: 6 M), time
O(N M (B + E)) per layer and step.  The estimate of a nonlinear function of a
partner mean has a bias of order 1/M; :func:`run_partners` removes it by running M
and 2M partners from the same seed (the M partners are the first half of the 2M)
and reporting 2 f(2M) − f(M), whose spread over replicates is the error bar.

Z^U and Z^{nV} are particle-local: each particle carries its own optimizer state.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..result import LimitResult
from .montecarlo import DeepRun


class PartnerDeepRun(DeepRun):
    """A deep Monte Carlo run with ``spec.partners`` partner particles, for an optimizer
    that is not linear in the gradients (its ``direction``)."""

    def __init__(self, spec, rng):
        super().__init__(spec, rng)
        N, M, xp = self.N, spec.partners, self.xp
        self.M = M
        # the first M of one permutation: runs with M and 2M partners share the first M
        self.P = xp.asarray(self.draws.subset(N, M))
        hidden = range(2, self.L + 1)
        k = len(self.opt.rule.slots)
        # per pair block: the optimizer's state, then Ψ, the sum of its decayed steps
        self.fw = {l: [xp.zeros((N, M)) for _ in range(k + 1)] for l in hidden}
        self.bw = {l: [xp.zeros((M, N)) for _ in range(k + 1)] for l in hidden}
        self.mom_U = [xp.zeros_like(self.ZU) for _ in range(k)]
        self.mom_V = [xp.zeros_like(self.ZV) for _ in range(k)]
        self.x_rows, self.dh_rows = {}, {}

    def delta_w_forward(self, l, x, stored):
        if stored:
            self.x_rows[l] = x[:stored]
        if not self.updates:
            return None
        return -(self.eta[l - 1] / self.M) * (x[:, self.P] @ self.fw[l][-1].T)

    def delta_w_backward(self, l, dh):
        self.dh_rows[l] = dh
        if not self.updates:
            return None
        return -(self.eta[l - 1] / self.M) * (dh[:, self.P] @ self.bw[l][-1])

    def _direction(self, state, g, k):
        return self.opt.direction(state, g, k, self.xp)

    def update(self, Xb, dh1, t_dh1, xL, t_xL, chi) -> None:
        """The optimizer's step on every particle's Z^U, Z^{nV} and on the sampled pairs of
        each hidden matrix, simultaneously (every gradient is from this step's forward and
        backward), with decoupled decay."""
        self.updates += 1
        L, P, t = self.L, self.P, self.updates - 1
        s = self.spec.problem.rate(t)   # the schedule scales step and decay
        for l in range(2, L + 1):
            k = self.clocks.trains("W", l - 1, t)
            if not k:                    # frozen in this phase: its Ψ stays
                continue
            x, dh = self.x_rows[l], self.dh_rows[l]
            shrink = s * self.decay[l - 1]
            for block, g in ((self.fw[l], dh.T @ x[:, P]), (self.bw[l], dh[:, P].T @ x)):
                psi = self._direction(block[:-1], g, k)
                block[-1] *= 1.0 - shrink
                if s != 1.0:
                    psi *= s
                block[-1] += psi
        kU, kV = self.clocks.trains("W", 0, t), self.clocks.trains("W", L, t)
        if kU:
            psi_U = self._direction(self.mom_U, dh1.T @ Xb, kU)
            self.ZU = (1.0 - s * self.decay[0]) * self.ZU - (s * self.eta[0]) * psi_U
        if kV:
            psi_V = self._direction(self.mom_V, self.alpha * xL.T @ chi, kV)
            self.ZV = (1.0 - s * self.decay[L]) * self.ZV - (s * self.eta[L]) * psi_V


def bytes_per_particle(L: int, d: int, d_out: int, partners: int, slots: int) -> float:
    """The float64 state per particle: per hidden layer, ``slots`` + 1 arrays (N, M) and as
    many (M, N) (Adam: 6 M), and ``slots`` copies of Z^U and Z^{nV}."""
    return 8.0 * (2 * (slots + 1) * partners * (L - 1) + slots * (d + d_out))


def run_partners(spec, rng, on_step) -> LimitResult:
    """One replicate; with ``spec.debias``, the M- and 2M-partner runs from one seed and
    their extrapolation 2 f(2M) − f(M) (the 1/M bias removed).  ``info`` keeps both."""
    if not spec.debias:
        return PartnerDeepRun(spec, rng).run(on_step)
    seed = int(rng.integers(2 ** 63))
    small = PartnerDeepRun(spec, np.random.default_rng(seed)).run(lambda t: None)
    if small.interrupted or small.diverged:
        return small
    big = PartnerDeepRun(replace(spec, partners=2 * spec.partners),
                      np.random.default_rng(seed)).run(on_step)
    if big.interrupted or big.diverged:
        return big
    out = LimitResult(f_eval=2 * big.f_eval - small.f_eval, f_eval_se=big.f_eval_se,
                      f_train=2 * big.f_train - small.f_train, loss=2 * big.loss - small.loss,
                      completed=big.completed, moments=big.moments,
                      se_method=big.se_method, se_dof=big.se_dof, info=dict(big.info))
    out.extras = {"f_eval_partners_M": small.f_eval, "f_eval_partners_2M": big.f_eval}
    return out
