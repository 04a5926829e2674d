"""Exact limit of a linear (φ = id) one-hidden-layer network (docs/theory.md §2).

With z ~ N(0, I_d), ω ~ N(0, I_{d_out}) independent, every particle stays
linear in (z, ω) for all t:

    Z^{U_t}ᵀ = A_t z + B_t ω,     Z^{nV_t} = C_t z + D_t ω,
    A_0 = σ_1 I,  B_0 = 0,  C_0 = 0,  D_0 = e_ω σ_2 I.

With G_t = Σ_i χ_{t,i} ξ_{t,i}ᵀ (χ already holds 1/B), output multiplier α
and the switches e_1, e_V of §5.1, the simultaneous updates are

    A -= η_1 e_1 α Gᵀ C,   B -= η_1 e_1 α Gᵀ D,
    C -= η_2 e_V α G A,    D -= η_2 e_V α G B,

and f̊_t(ζ) = α M_t ζ with M_t = C_t A_tᵀ + D_t B_tᵀ.  No Monte Carlo, any
d, d_out and batch size.  Second moments give the statistics exactly:
E[(Z^U ζ)²] = ζᵀ(AAᵀ + BBᵀ)ζ and the change uses A - A_0 in place of A.
"""
from __future__ import annotations

import numpy as np

from ..errors import DivergenceError
from ..steps import StepLoop


def linear_one_hidden(sigma_u, sigma_v, alpha, lr_u, lr_v, readout_init, X, Y, B, grad,
                      eval_inputs, on_step=None):
    """Run the recursion; return (f_eval, f_train, completed_steps, stats, diverged).

    ``lr_u = η_1 e_1``, ``lr_v = η_2 e_V``; ``grad(f, y)`` is ∇_f ℓ per row.
    ``on_step(t)`` is called after every step (progress).  Ctrl-C ends the
    loop early; ``completed_steps`` says how far it got.  A non-finite output
    ends it too, with ``diverged`` = {step, layer, quantity}.
    """
    d, d_out = X.shape[1], Y.shape[1]
    T = len(X) // B
    A, Bm = sigma_u * np.eye(d), np.zeros((d, d_out))
    C, D = np.zeros((d_out, d)), (sigma_v if readout_init else 0.0) * np.eye(d_out)
    A0 = A.copy()
    E = len(eval_inputs)
    f_eval = np.zeros((T + 1, E, d_out))
    f_train = np.zeros((T, B, d_out))
    h2 = np.zeros((T + 1, E))
    dh2 = np.zeros((T + 1, E))
    fk = np.zeros((T + 1, E, E))

    def record(t):
        f_eval[t] = alpha * eval_inputs @ (C @ A.T + D @ Bm.T).T
        cov = A @ A.T + Bm @ Bm.T
        dA = A - A0
        dcov = dA @ dA.T + Bm @ Bm.T
        fk[t] = eval_inputs @ cov @ eval_inputs.T
        h2[t] = np.diag(fk[t])
        dh2[t] = np.einsum("ei,ij,ej->e", eval_inputs, dcov, eval_inputs)

    record(0)
    loop = StepLoop(T, on_step)
    with loop, np.errstate(over="ignore", invalid="ignore"):     # reported below instead
        for t in loop:
            Xb, Yb = X[t * B:(t + 1) * B], Y[t * B:(t + 1) * B]
            f = alpha * Xb @ (C @ A.T + D @ Bm.T).T
            if not np.all(np.isfinite(f)):
                raise DivergenceError(t, None, "output f")
            f_train[t] = f
            chi = grad(f, Yb) / B
            G = chi.T @ Xb                                   # (d_out, d)
            A, Bm, C, D = (A - lr_u * alpha * G.T @ C, Bm - lr_u * alpha * G.T @ D,
                           C - lr_v * alpha * G @ A, D - lr_v * alpha * G @ Bm)
            record(t + 1)
            if not np.all(np.isfinite(f_eval[t + 1])):
                raise DivergenceError(t + 1, None, "output f")
    stats = {"h2": h2, "dh2": dh2, "fk": fk}
    return f_eval, f_train, loop.completed, stats, loop.diverged
