"""The toy network's limit in closed form for φ = id and SGD: a recursion on r + r·d numbers
given Z_A⁰ (docs/theory.md §16.4).

With φ = id the features are h_i(ξ) = w_i·ξ, and SGD keeps every trained coordinate in
the span its gradients start in: B_i = B⁰_i + ω_i β (β ∈ ℝ^r) because ∂B_i ∝ ω_i, and
ΔA_{:,i} = M w_i / n (M ∈ ℝ^{r×d}) because ∂A_{:,i} ∝ h_i.  The expectations over the
particle law are then Gaussian moments (E[ω²] = σ_out², E[w wᵀ] = σ_in²/d I, B⁰ independent
of ω with mean 0), and the step of engine.py becomes, with s = α/r, κ = σ_in²/d:

    Z_A(ξ) = Z_A⁰(ξ) + κ M ξ,    f(ξ) = s σ_out² β·Z_A(ξ),    χ = (f − y)/|batch|,
    β ← β − η̄_B s Σ_ξ χ(ξ) Z_A(ξ),    M ← M − η̄_A s σ_out² β Σ_ξ χ(ξ) ξᵀ

(both from the same state; c_A = 1, c_B = −1).  Given Z_A⁰ this is exact: no particles;
the mean over Z_A⁰ is taken over independent draws from its law (the replicates).  B⁰
drops out of every expectation, so zero_A (Z_A⁰ = 0, β₀ = 0) stays at f = 0: a saddle the
width-n network leaves only through its O(n^{−1/2}) fluctuations.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import SpecError
from ..spec.checks import check_int, finite_non_negative
from .engine import LoRARun, given_z_a0, law_draw
from .toy import LoRAToy, SineTask, input_kernel, kernel_root, require_toy


def exact_limit(toy: LoRAToy, task: SineTask, eta_A: float, eta_B: float,
                steps: int = 100, seeds: int = 4, seed: int = 0, z_a0=None) -> LoRARun:
    """The limit of :func:`~.engine.fine_tune` for φ = 'id' and SGD by the recursion of
    the module docstring: ``seeds`` draws of Z_A⁰ from its law, or the given ``z_a0``
    (the conditional limit)."""
    toy = require_toy(toy, "exact_limit")
    if toy.phi != "id" or toy.optimizer != "sgd" or toy.readout != "mup":
        raise SpecError(f"the exact limit needs phi = 'id', optimizer = 'sgd' and readout = "
                        f"'mup' (got {toy.phi!r}, {toy.optimizer!r}, {toy.readout!r}); "
                        f"fine_tune(width=math.inf) simulates the others")
    steps, seeds = check_int(steps, "steps"), check_int(seeds, "seeds")
    eta_A, eta_B = finite_non_negative(eta_A, "eta_A"), finite_non_negative(eta_B, "eta_B")
    s, so2, kappa = toy.scale, toy.sigma_out ** 2, toy.sigma_in ** 2 / toy.d
    x, y, tr, te = task.x, task.y, task.train, task.test
    chol = kernel_root(input_kernel(toy, x)) if z_a0 is None and toy.init != "zero_A" else None
    if z_a0 is not None:
        z_a0 = given_z_a0(toy, z_a0, len(y))
    runs = []
    for r in range(seeds):
        if z_a0 is not None:
            za0 = z_a0
        elif chol is None:
            za0 = np.zeros((toy.rank, len(y)))
        else:
            za0 = law_draw(toy, chol, np.random.default_rng([seed, r, 0]))
        beta, M = np.zeros(toy.rank), np.zeros((toy.rank, toy.d))
        loss_tr, loss_te = np.full(steps + 1, np.inf), np.full(steps + 1, np.inf)
        div, why = -1, None
        for t in range(steps + 1):
            with np.errstate(over="ignore", invalid="ignore"):   # reported as divergence
                za = za0 + kappa * M @ x.T
                f = s * so2 * beta @ za
            res = f - y
            loss = 0.5 * np.mean(res[tr] ** 2), 0.5 * np.mean(res[te] ** 2)
            if not all(math.isfinite(v) for v in loss):
                div, why = t, f"step {t}: the loss is not finite"
                break
            loss_tr[t], loss_te[t] = loss
            if t == steps:
                break
            chi = res[tr] / task.n_train
            beta, M = (beta - eta_B * s * za[:, tr] @ chi,
                       M - eta_A * s * so2 * np.outer(beta, chi @ x[tr]))
        runs.append((loss_tr, loss_te, f[te], za0, div, why))
    return LoRARun.stack(math.inf, eta_A, eta_B, runs)
