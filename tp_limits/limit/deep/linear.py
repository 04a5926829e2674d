"""Exact infinite-width limit of a deep *linear* feature-learning MLP (docs/theory.md §4.5).

For φ = id every Tensor-Program variable is a linear combination of
"primitives": the d coordinates of z (Z^{U_0} = σ_1 z), the d_out of ω
(Z^{nV_0} = e_ω σ_{L+1} ω), and one primitive per hat.  A variable is stored
as its coefficient vector c over the primitives; with S the primitives'
covariance (identity on z, ω; block-diagonal over hat families),

    E[Z^a Z^b] = c_aᵀ S c_b,      ∂Z^a / ∂Ẑ_p = c_a[p]      (exactly).

The equations of §4.2 then become linear algebra.  Forward at step t for
an input ζ, layers l = 2..L:

    Z^{h^l} = Ẑ^{W^l x}  +  σ_l² Σ_{g ∈ G^l} Z^{δh_g} c_x[p_g]           (Ż)
                         -  η_l e_l Σ_{s<t,i} Z^{δh^l_{s,i}} E[Z^{x^{l-1}_{s,i}} Z^x]   (ΔW^l)

with the new hat's covariance σ_l² E[Z^x Z^{x'}] with every earlier hat of
the forward family F^l.  Backward for a training item, l = L..2:

    Z^{δx^{l-1}} = Ẑ^{W^lᵀ δh}  +  σ_l² Σ_{e ∈ F^l (incl. step t)} Z^{x_e} c_δh[p_e]
                                -  η_l e_l Σ_{s<t,j} Z^{x^{l-1}_{s,j}} E[Z^{δh^l_{s,j}} Z^{δh}],

seed Z^{δx^L} = α χᵀ Z^{nV}; then Z^U -= η_1 e_1 Σ_i Z^{δh^1_i} ξ_iᵀ and
Z^{nV} -= η_{L+1} e_V α Σ_i χ_i Z^{x^L_i}, simultaneously.  f̊ = α E[Z^{nV} Z^{x^L}].
``decoupled=True`` drops both Ż sums (docs/theory.md §3).  A residual block's output (§12)
adds h^{s} (s the layer its skip starts from) to c Z^{W^l x} forward; backward W^l acts on
c δh^l, and δh^l joins δh^s.

Any optimizer linear in the gradients (docs/theory.md §10.2): W^l_t = ρ_t W^l_0 −
Σ_{s<t} C[t, s] γ G_s (the optimizer's ``schedule``), so the hat and Ż part is
multiplied by ρ^l_t and the ΔW pair of step s by C^l[t, s]; the coefficients of
Z^U and Z^{nV} move by the optimizer's rule for one coordinate.

Biases (docs/theory.md §13) stay linear: a hidden bias is one more primitive at
initialization (Z^{b^l}_0 = σ_{b,l} z_b), added to h^l, and its coefficients move by the
optimizer's rule with Σ_i (the vector W^l sees backward); the readout's bias is a
deterministic vector β, f̊ = α (E[Z^{nV} Z^{x^L}] + β).

Evaluation hats are kept as primitives too (they feed nothing else), so the
statistics of h^l_t(ζ) - h^l_0(ζ) use the exact joint law.  No Monte Carlo
and no matrix inversion: degenerate families (repeated inputs) are harmless.
Cost grows with the number of primitives P = d + d_out + (L-1)(2BT + E(T+1)).
"""
from __future__ import annotations

import numpy as np

from ...engine.memory import require_memory
from ...engine.steps import StepLoop, check_size
from ...spec.residual import Carried
from ..base import FeatureLearningEngine
from ..result import LimitResult


class _Primitives:
    """Coefficient space and covariance S of the primitives."""

    def __init__(self, base: int, capacity: int):
        self.S = np.zeros((capacity, capacity))
        self.S[:base, :base] = np.eye(base)
        self.count = base
        self.capacity = capacity

    def zeros(self):
        return np.zeros(self.capacity)

    def cov(self, a, b) -> float:
        n = self.count
        return float(a[:n] @ self.S[:n, :n] @ b[:n])

    def new_hat(self, sigma2: float, c, family: list) -> int:
        """Add the hat of a vector with coefficients ``c`` to ``family`` (list of (c, p))."""
        p = self.count
        Sc = self.S[:p, :p] @ c[:p]
        for c_other, q in family:
            self.S[p, q] = self.S[q, p] = sigma2 * float(c_other[:p] @ Sc)
        self.S[p, p] = sigma2 * float(c[:p] @ Sc)
        self.count += 1
        return p


def primitive_count(problem) -> int:
    """The Gaussian primitives a deep linear run creates: the input's and readout's, and
    per hidden matrix a hat per stored forward and backward vector (2B a step) and per
    evaluated output (E a step and at the start)."""
    net = problem.net
    return (net.d_in + net.d_out + (0 if net.bias is None else net.L)
            + (net.L - 1) * (2 * problem.B * problem.T + problem.E * (problem.T + 1)))


def deep_linear(problem, const, decoupled: bool, eval_steps, on_step=None,
                bound=None) -> LimitResult:
    """Run the exact deep linear limit on ``problem`` with the limit constants ``const``."""
    net = problem.net
    L, d, do = net.L, net.d_in, net.d_out
    T, B, E = problem.T, problem.B, problem.E
    Xe = problem.eval_inputs
    sig, alpha, eta = const.sigma, const.alpha, const.eta
    branch, skip = const.branch, const.skip
    cap = primitive_count(problem)
    bc = const.bias
    prim = _Primitives(d + do + (0 if bc is None else L), cap)
    cU = [prim.zeros() for _ in range(d)]
    for k in range(d):
        cU[k][k] = sig[0]
    cV = [prim.zeros() for _ in range(do)]
    if const.readout_init:
        for o in range(do):
            cV[o][d + o] = sig[L]
    cb = []                                     # the hidden biases' coefficients
    if bc is not None:
        cb = [prim.zeros() for _ in range(L)]
        for l in range(L):
            cb[l][d + do + l] = bc.sigma[l]
        beta = np.zeros(do)                     # the readout's bias (deterministic)
    F = {l: [] for l in range(2, L + 1)}        # forward hats: (c_x, p)
    F_train = {l: [] for l in range(2, L + 1)}  # the training ones (backward Ż sums)
    G = {l: [] for l in range(2, L + 1)}        # backward hats: (c_δh, p)
    pairs = {l: [] for l in range(2, L + 1)}    # ΔW^l pieces: (c_δh^l, c_x^{l-1})
    opt = problem.optimizer
    decay = opt.shrinks(const.decay)
    rates = problem.routine.rates
    # msign optimizers (Muon): ΔW^l is Σ_{i,j} δh_i Ω[i, j] x_jᵀ over the stored pairs
    msign = opt.hidden_matrices == "msign"
    sched = {l: (opt.init_factor(decay[l - 1], T, rates), None) if msign
             else opt.schedule(decay[l - 1], T, rates) for l in range(2, L + 1)}
    omega = {l: np.zeros((B * T, B * T)) for l in range(2, L + 1)} if msign else {}
    if opt.coordinatewise:
        stU, stV = [opt.rule.zeros(c) for c in cU], [opt.rule.zeros(c) for c in cV]
    else:
        stU = opt.particle_state(np.column_stack(cU), "input")
        stV = opt.particle_state(np.column_stack(cV), "readout")
    if bc is not None:
        decay_b = opt.shrinks(bc.decay)
        st_b, st_beta = [opt.rule.zeros(c) for c in cb], opt.rule.zeros(beta)

    def moments(A, Bm):
        """E[Aᵀ B] for coefficient columns A, B (primitives x k)."""
        n = prim.count
        return A[:n].T @ prim.S[:n, :n] @ Bm[:n]

    def apply_matrix(l, v, own, zdot_family, pairs_in_order, t):
        """Z of W^l v (forward) or W^lᵀ v (backward): new hat + Ż + ΔW sum.

        ``own``: the family v's hat joins; ``zdot_family``: the other family's
        entries (c, p) whose hats v depends on; ``pairs_in_order``: the ΔW^l
        pieces as (c matched against v, c that is added) — (x, δh) forward,
        (δh, x) backward, B per step in step order; ``t`` the step whose W_t acts.
        """
        s2 = sig[l - 1] ** 2
        rho, C = sched[l]
        p = prim.new_hat(s2, v, own)
        out = prim.zeros()
        out[p] = 1.0
        if not decoupled:
            for c, q in zdot_family:
                out += s2 * v[q] * c
        if rho[t] != 1.0:
            out *= rho[t]
        if msign:
            kp = len(pairs_in_order)
            if kp:
                covs = np.array([prim.cov(c_match, v) for c_match, _ in pairs_in_order])
                om = omega[l][:kp, :kp]
                w = (om if own is F[l] else om.T) @ covs
                out -= np.column_stack([c for _, c in pairs_in_order]) @ w
            return out, p
        for j, (c_match, c_add) in enumerate(pairs_in_order):
            out -= eta[l - 1] * C[t, j // B] * prim.cov(c_match, v) * c_add
        return out, p

    def forward(zeta, store: bool, t: int):
        """Coefficient vectors of h^1..h^L for input ζ (x^l = h^l) under W_t."""
        h = sum(zeta[k] * cU[k] for k in range(d))
        hs = [h + cb[0] if cb else h]
        for l in range(2, L + 1):
            x = hs[-1]
            new, p = apply_matrix(l, x, F[l], G[l], [(c_x, c_dh) for c_dh, c_x in pairs[l]], t)
            F[l].append((x, p))
            if store:
                F_train[l].append((x, p))
            if cb:
                new = new + cb[l - 1]
            out = bool(branch) and skip[l - 1] >= 0  # a block's output: h^{skip} + c Z^{Wx+b}
            hs.append(hs[skip[l - 1]] + branch[l - 1] * new if out else new)
        return hs

    def output(cx, step):
        f = np.array([prim.cov(cV[o], cx) for o in range(do)])
        f = alpha * (f + beta if bc is not None else f)
        check_size(f, step, None, "output f", bound)
        return f

    res = LimitResult.empty(T, E, B, do, L=L)
    mom = res.moments
    h0 = [None] * E

    def evaluate(t):
        if t not in eval_steps:
            return
        xs_L = []
        for e in range(E):
            hs = forward(Xe[e], store=False, t=t)
            if t == 0:
                h0[e] = hs
            for l in range(L):
                mom.h_sq[t, l, e] = mom.x_sq[t, l, e] = prim.cov(hs[l], hs[l])
                dd = hs[l] - h0[e][l]
                mom.dh_sq[t, l, e] = mom.dx_sq[t, l, e] = prim.cov(dd, dd)
            xs_L.append(hs[-1])
            res.f_eval[t, e] = output(hs[-1], t)
        res.f_eval_se[t] = 0.0
        for e in range(E):
            for g in range(E):
                mom.feature_kernel[t, e, g] = prim.cov(xs_L[e], xs_L[g])

    loop = StepLoop(T, on_step)
    with loop:
        evaluate(0)
        for t in loop:
            Xb, Yb = problem.batch(t)
            fwd = [forward(Xb[i], store=True, t=t) for i in range(B)]
            fb = np.array([output(hs[-1], t) for hs in fwd])
            res.f_train[t] = fb
            res.loss[t] = float(np.mean(problem.loss.value(fb, Yb, np)))
            chi = problem.loss.grad(fb, Yb, np) / B
            dh1, new_pairs = [], {l: [] for l in range(2, L + 1)}
            bias_grad = [prim.zeros() for _ in cb]      # Σ_i of what W^l sees backward
            for i in range(B):
                dh = alpha * sum(chi[i, o] * cV[o] for o in range(do))     # δh^L (φ′ = 1)
                carried = Carried()
                for l in range(L, 1, -1):
                    out = bool(branch) and skip[l - 1] >= 0
                    g = branch[l - 1] * dh if out else dh       # what W^l sees backward
                    if out:
                        carried.hand(skip[l - 1], dh)
                    if cb:
                        bias_grad[l - 1] += g
                    dx, p = apply_matrix(l, g, G[l], F_train[l], pairs[l], t)
                    G[l].append((g, p))
                    new_pairs[l].append((g, fwd[i][l - 2]))
                    dh = carried.receive(l - 2, dx)
                dh1.append(dh)
                if cb:
                    bias_grad[0] += dh
            rate = rates[t]
            if bc is not None:             # coordinatewise rules only (Problem refuses others)
                for l in range(L):
                    scale_b, h_b = opt.coordinate(bc.eta[l], 1.0, decay_b[l], t + 1, rate)
                    cb[l], st_b[l] = opt.rule.apply(cb[l], scale_b * bias_grad[l], st_b[l], h_b)
                scale_b, h_b = opt.coordinate(bc.eta[L], alpha, decay_b[L], t + 1, rate)
                beta, st_beta = opt.rule.apply(beta, scale_b * chi.sum(axis=0), st_beta, h_b)
            if opt.coordinatewise:
                scale_u, h_u = opt.coordinate(eta[0], 1.0, decay[0], t + 1, rate)  # α in δh^1
                scale_v, h_v = opt.coordinate(eta[L], alpha, decay[L], t + 1, rate)
                for k in range(d):
                    cU[k], stU[k] = opt.rule.apply(
                        cU[k], scale_u * sum(Xb[i, k] * dh1[i] for i in range(B)), stU[k], h_u)
                for o in range(do):
                    cV[o], stV[o] = opt.rule.apply(
                        cV[o], scale_v * sum(chi[i, o] * fwd[i][-1] for i in range(B)), stV[o],
                        h_v)
            else:                            # a step that needs the particles' means
                ZU, stU = opt.move_particles(np.column_stack(cU), stU, np.column_stack(dh1),
                                             Xb, eta[0], 1.0, decay[0], t + 1, rate, "input",
                                             moments)
                ZV, stV = opt.move_particles(np.column_stack(cV), stV,
                                             np.column_stack([hs[-1] for hs in fwd]), chi,
                                             eta[L], alpha, decay[L], t + 1, rate, "readout",
                                             moments)
                cU, cV = list(ZU.T.copy()), list(ZV.T.copy())
            for l in range(2, L + 1):
                pairs[l].extend(new_pairs[l])
                if msign:
                    GP = np.array([[prim.cov(a, b) for b, _ in pairs[l]] for a, _ in pairs[l]])
                    GQ = np.array([[prim.cov(a, b) for _, b in pairs[l]] for _, a in pairs[l]])
                    opt.move_pairs(omega[l], GP, GQ, t, B, rate, eta[l - 1], decay[l - 1])
            evaluate(t + 1)
    res.se_method = "exact (linear combinations of Gaussian primitives)"
    res.info = {"primitives": prim.count}
    return res.finish(loop)


class LinearEngine(FeatureLearningEngine):
    """φ = id: the exact deep linear limit, true or decoupled backprop."""

    name, method = "limit/deep_linear", "exact"

    def __init__(self, problem, classification, options):
        super().__init__(problem, classification, options)
        cap = primitive_count(problem)
        require_memory(8.0 * 2 * cap * cap,
                       f"the exact deep linear limit's {cap:,} primitives (their covariance and "
                       f"coefficient vectors, 2 · {cap:,}² floats; T = {problem.T} steps)",
                       advice="shorten the run (the count grows like L·T·(2B + E))")

    def run(self, on_step) -> LimitResult:
        return deep_linear(self.problem, self.const, self.options.backprop == "decoupled",
                           self.options.eval_steps(self.problem.T), on_step,
                           self.options.divergence_bound)
