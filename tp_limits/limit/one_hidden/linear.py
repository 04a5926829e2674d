"""Exact limit of a linear (φ = id) one-hidden-layer network (docs/theory.md §2).

With z ~ N(0, I_d), ω ~ N(0, I_{d_out}) independent, every particle stays
linear in (z, ω) for all t:

    Z^{U_t}ᵀ = A_t z + B_t ω,     Z^{nV_t} = C_t z + D_t ω,
    A_0 = σ_1 I,  B_0 = 0,  C_0 = 0,  D_0 = e_ω σ_2 I.

With G_t = Σ_i χ_{t,i} ξ_{t,i}ᵀ (χ already holds 1/B), output multiplier α
and the switches e_1, e_V of §5.1, the simultaneous updates are

    A -= α η_1 e_1 Gᵀ C,   B -= α η_1 e_1 Gᵀ D,
    C -= α η_2 e_V G A,    D -= α η_2 e_V G B,

and f̊_t(ζ) = α M_t ζ with M_t = C_t A_tᵀ + D_t B_tᵀ.  With momentum μ and weight
decay (docs/theory.md §10.2) each of A, B, C, D moves by the heavy-ball rule
(spec/optimizer.py ``heavy_ball_step``) with the increments above, and with
δ_1 = η_1 λ for A, B and δ_2 = η_2 λ for C, D: every particle stays linear in (z, ω).  No Monte Carlo, any
d, d_out and batch size.  Second moments give the statistics exactly:
E[(Z^U ζ)²] = ζᵀ(AAᵀ + BBᵀ)ζ and the change uses A - A_0 in place of A.
"""
from __future__ import annotations

import numpy as np

from ...engine.steps import StepLoop, check_size
from ...errors import DivergenceError
from ...spec.optimizer import heavy_ball_step
from ..result import LimitResult


def linear_one_hidden(problem, const, eval_steps, on_step=None, bound=None) -> LimitResult:
    """Run the recursion on ``problem`` with the limit constants ``const``.

    Evaluates f̊ (and the exact statistics) at ``eval_steps``; Ctrl-C and a
    non-finite output end the run early, as recorded in the result.
    """
    d, d_out, T, B = problem.net.d_in, problem.net.d_out, problem.T, problem.B
    sigma_u, sigma_v = const.sigma
    alpha = const.alpha
    step_u, step_v = alpha * const.eta[0], alpha * const.eta[1]
    A, Bm = sigma_u * np.eye(d), np.zeros((d, d_out))
    C, D = np.zeros((d_out, d)), (sigma_v if const.readout_init else 0.0) * np.eye(d_out)
    A0 = A.copy()
    opt = problem.optimizer
    mu, (d_u, d_v) = opt.momentum, opt.shrinks(const.decay)
    bufs = [None] * 4
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
            incs = (step_u * G.T @ C, step_u * G.T @ D, step_v * G @ A, step_v * G @ Bm)
            moved = [heavy_ball_step(Z, b, inc, mu, dec) for Z, b, inc, dec in
                     zip((A, Bm, C, D), bufs, incs, (d_u, d_u, d_v, d_v))]
            (A, Bm, C, D), bufs = zip(*moved)
            if not np.all(np.isfinite(C @ A.T + D @ Bm.T)):
                raise DivergenceError(t + 1, None, "output f")
            record(t + 1)
    res.se_method = "exact (closed form)"
    return res.finish(loop)
