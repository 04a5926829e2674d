"""Exact limit of a linear (φ = id) one-hidden-layer network (docs/theory.md §2).

With z ~ N(0, I_d), ω ~ N(0, I_{d_out}) independent, every particle stays
linear in (z, ω) for all t:

    Z^{U_t}ᵀ = A_t z + B_t ω,     Z^{nV_t} = C_t z + D_t ω,
    A_0 = σ_1 I,  B_0 = 0,  C_0 = 0,  D_0 = e_ω σ_2 I.

With G_t = Σ_i χ_{t,i} ξ_{t,i}ᵀ (χ already holds 1/B), output multiplier α
and the switches e_1, e_V of §5.1, the simultaneous updates are

    A -= α η_1 e_1 Gᵀ C,   B -= α η_1 e_1 Gᵀ D,
    C -= α η_2 e_V G A,    D -= α η_2 e_V G B,

and f̊_t(ζ) = α M_t ζ with M_t = C_t A_tᵀ + D_t B_tᵀ.  Under any optimizer linear
in the gradients (docs/theory.md §10.2) each of A, B, C, D moves by the optimizer's
rule for one coordinate with the increments above (heavy ball: m ← (μ m + inc) + δ Z,
Z ← Z − m), δ_1 = η_1 λ for A, B and δ_2 = η_2 λ for C, D: every particle stays
linear in (z, ω).  No Monte Carlo, any d, d_out and batch size.  Second moments give
the statistics exactly:
E[(Z^U ζ)²] = ζᵀ(AAᵀ + BBᵀ)ζ and the change uses A - A_0 in place of A.
"""
from __future__ import annotations

import numpy as np

from ...engine.steps import StepLoop, check_size
from ...errors import DivergenceError
from ..result import LimitResult


def linear_one_hidden(problem, const, eval_steps, on_step=None, bound=None) -> LimitResult:
    """Run the recursion on ``problem`` with the limit constants ``const``.

    Evaluates f̊ (and the exact statistics) at ``eval_steps``; Ctrl-C and a
    non-finite output end the run early, as recorded in the result.
    """
    d, d_out, T, B = problem.net.d_in, problem.net.d_out, problem.T, problem.B
    sigma_u, sigma_v = const.sigma
    alpha = const.alpha
    A, Bm = sigma_u * np.eye(d), np.zeros((d, d_out))
    C, D = np.zeros((d_out, d)), (sigma_v if const.readout_init else 0.0) * np.eye(d_out)
    A0 = A.copy()
    opt = problem.optimizer
    d_u, d_v = opt.shrinks(const.decay)
    states = [opt.rule.zeros(Z) for Z in (A, Bm, C, D)]
    Xe = problem.eval_inputs
    res = LimitResult.empty(T, problem.E, B, d_out, L=1)
    mom = res.moments

    def record(t):
        if t not in eval_steps:
            return
        res.f_eval[t] = alpha * Xe @ (C @ A.T + D @ Bm.T).T
        res.f_eval_se[t] = 0.0
        cov = A @ A.T + Bm @ Bm.T
        dA = A - A0
        dcov = dA @ dA.T + Bm @ Bm.T
        mom.feature_kernel[t] = Xe @ cov @ Xe.T
        mom.h_sq[t, 0] = mom.x_sq[t, 0] = np.diag(mom.feature_kernel[t])
        mom.dh_sq[t, 0] = mom.dx_sq[t, 0] = np.einsum("ei,ij,ej->e", Xe, dcov, Xe)

    record(0)
    loop = StepLoop(T, on_step)
    with loop, np.errstate(over="ignore", invalid="ignore"):     # reported below instead
        for t in loop:
            Xb, Yb = problem.batch(t)
            f = alpha * Xb @ (C @ A.T + D @ Bm.T).T
            check_size(f, t, None, "output f", bound)
            res.f_train[t] = f
            res.loss[t] = float(np.mean(problem.loss.value(f, Yb, np)))
            chi = problem.loss.grad(f, Yb, np) / B
            G = chi.T @ Xb                                   # (d_out, d)
            rate = problem.rate(t)
            step_u, h_u = opt.coordinate(const.eta[0], alpha, d_u, t + 1, rate)
            step_v, h_v = opt.coordinate(const.eta[1], alpha, d_v, t + 1, rate)
            incs = (step_u * G.T @ C, step_u * G.T @ D, step_v * G @ A, step_v * G @ Bm)
            moved = [opt.rule.apply(Z, inc, st, h) for Z, inc, st, h in
                     zip((A, Bm, C, D), incs, states, (h_u, h_u, h_v, h_v))]
            (A, Bm, C, D), states = zip(*moved)
            if not np.all(np.isfinite(C @ A.T + D @ Bm.T)):
                raise DivergenceError(t + 1, None, "output f")
            record(t + 1)
    res.se_method = "exact (closed form)"
    return res.finish(loop)
