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
    """The Gaussian primitives a deep linear run creates: the input's and readout's, one per
    hidden bias, and per hidden matrix a hat per stored forward and backward vector (2B a
    step) and per evaluated output (E a step and at the start)."""
    net = problem.net
    return (net.d_in + net.d_out + len(problem.program.hidden_bias_layers)
            + (net.L - 1) * (2 * problem.B * problem.T + problem.E * (problem.T + 1)))


class _ExactRun:
    """The state of one exact run and the walk's operations on coefficient vectors
    (spec/program.py, ``representation = "coefficients"``): a vector is its coefficients
    over the primitives, one input item at a time."""

    representation = "coefficients"

    def __init__(self, problem, const, decoupled: bool, bound):
        net = problem.net
        L, d, do = net.L, net.d_in, net.d_out
        T, B = problem.T, problem.B
        self.problem, self.program, self.L, self.B = problem, problem.program, L, B
        self.sig, self.alpha, self.eta = const.sigma, const.alpha, const.eta
        self.decoupled, self.bound = decoupled, bound
        bc = const.bias
        biased = self.program.hidden_bias_layers
        prim = self.prim = _Primitives(d + do + len(biased), primitive_count(problem))
        self.cU = [prim.zeros() for _ in range(d)]
        for k in range(d):
            self.cU[k][k] = const.sigma[0]
        self.cV = [prim.zeros() for _ in range(do)]
        if const.readout_init:
            for o in range(do):
                self.cV[o][d + o] = const.sigma[L]
        self.cb = {}                            # the hidden biases' coefficients
        for j, l in enumerate(biased):
            self.cb[l] = prim.zeros()
            self.cb[l][d + do + j] = bc.sigma[l]
        # the readout's bias: deterministic
        self.beta = {l: np.zeros(do) for l in self.program.readout_bias_layers}
        hidden = range(2, L + 1)
        self.F = {l: [] for l in hidden}        # forward hats: (c_x, p)
        self.F_train = {l: [] for l in hidden}  # the training ones (backward Ż sums)
        self.G = {l: [] for l in hidden}        # backward hats: (c_δh, p)
        self.pairs = {l: [] for l in hidden}    # ΔW^l pieces: (c_δh^l, c_x^{l-1})
        opt = self.opt = problem.optimizer
        self.decay = opt.shrinks(const.decay)
        rates = problem.rates
        # pair-matrix optimizers (Muon): ΔW^l is Σ_{i,j} δh_i Ω[i, j] x_jᵀ over stored pairs
        self.msign = opt.pair_matrix
        self.clocks = clocks = problem.clocks    # the phases' frozen steps (spec/phases.py)
        self.sched = {l: (opt.init_factor(self.decay[l - 1], T, rates,
                                          clocks.of_layer("W", l - 1)), None) if self.msign
                      else opt.schedule(self.decay[l - 1], T, rates, clocks.of_layer("W", l - 1))
                      for l in hidden}
        self.omega = {l: np.zeros((B * T, B * T)) for l in hidden} if self.msign else {}
        if opt.coordinatewise:
            self.stU = [opt.rule.zeros(c) for c in self.cU]
            self.stV = [opt.rule.zeros(c) for c in self.cV]
        else:
            self.stU = opt.particle_state(np.column_stack(self.cU), "input")
            self.stV = opt.particle_state(np.column_stack(self.cV), "readout")
        self.st_b = {l: opt.rule.zeros(c) for l, c in self.cb.items()}
        self.st_b.update({l: opt.rule.zeros(b) for l, b in self.beta.items()})
        self.decay_b = {l: opt.shrinks(bc.decay)[l] for l in self.st_b}
        self.eta_b = {l: bc.eta[l] for l in self.st_b}
        self._t, self._store, self._step = 0, False, 0

    def cov(self, a, b) -> float:
        """E[Z^a Z^b] of two coefficient vectors."""
        return self.prim.cov(a, b)

    def moments(self, A, Bm):
        """E[Aᵀ B] for coefficient columns A, B (primitives x k)."""
        n = self.prim.count
        return A[:n].T @ self.prim.S[:n, :n] @ Bm[:n]

    def apply_matrix(self, l, v, own, zdot_family, pairs_in_order, t):
        """Z of W^l v (forward) or W^lᵀ v (backward): new hat + Ż + ΔW sum.

        ``own``: the family v's hat joins; ``zdot_family``: the other family's
        entries (c, p) whose hats v depends on; ``pairs_in_order``: the ΔW^l
        pieces as (c matched against v, c that is added) — (x, δh) forward,
        (δh, x) backward, B per step in step order; ``t`` the step whose W_t acts.
        """
        prim, B = self.prim, self.B
        s2 = self.sig[l - 1] ** 2
        rho, C = self.sched[l]
        p = prim.new_hat(s2, v, own)
        out = prim.zeros()
        out[p] = 1.0
        if not self.decoupled:
            for c, q in zdot_family:
                out += s2 * v[q] * c
        if rho[t] != 1.0:
            out *= rho[t]
        if self.msign:
            kp = len(pairs_in_order)
            if kp:
                covs = np.array([prim.cov(c_match, v) for c_match, _ in pairs_in_order])
                om = self.omega[l][:kp, :kp]
                w = (om if own is self.F[l] else om.T) @ covs
                out -= np.column_stack([c for _, c in pairs_in_order]) @ w
            return out, p
        for j, (c_match, c_add) in enumerate(pairs_in_order):
            out -= self.eta[l - 1] * C[t, j // B] * prim.cov(c_match, v) * c_add
        return out, p

    # -- the walk's operations on coefficient vectors (spec/program.py) --------------------
    def forward(self, zeta, store: bool, t: int):
        """Coefficient vectors of h^1..h^L and x^0..x^L for input ζ under W_t (x^l = h^l
        without a normalization, φ = id)."""
        self._store, self._t = store, t
        return self.program.forward(zeta, self)

    def product(self, l, x):
        if l == 0:
            return sum(x[k] * self.cU[k] for k in range(len(self.cU)))
        lw = l + 1
        new, p = self.apply_matrix(lw, x, self.F[lw], self.G[lw],
                                   [(c_x, c_dh) for c_dh, c_x in self.pairs[lw]], self._t)
        self.F[lw].append((x, p))
        if self._store:
            self.F_train[lw].append((x, p))
        return new

    def add_bias(self, l, v):
        if l == self.L:                          # the readout's: deterministic
            return v + self.beta[l]
        return v + self.cb[l]

    def residual(self, h_skip, c, v):
        return h_skip + c * v                    # a block's output: h^{skip} + c Z^{Wx+b}

    def pre_activation(self, l, h):
        return h

    def activation(self, l, n):
        return n                                 # φ = id

    identity = activation

    def readout(self, x):
        return np.array([self.prim.cov(cv, x) for cv in self.cV])

    def finish_output(self, f):
        f = self.alpha * f
        check_size(f, self._step, None, "output f", self.bound)
        return f

    def output(self, cx, step):
        self._step = step
        return self.program.output(cx, self)

    def scale(self, c, g):
        return c * g

    def product_T(self, l, g):
        lw = l + 1
        dx, p = self.apply_matrix(lw, g, self.G[lw], self.F_train[lw], self.pairs[lw], self._t)
        self.G[lw].append((g, p))
        return dx

    def activation_backward(self, l, n, dx):
        return dx                                # φ′ = 1

    identity_backward = activation_backward

    def gradient(self, l, g) -> None:
        if l:                                    # a hidden matrix's pair (δh^l, x^{l−1})
            self._new_pairs[l + 1].append((g, self._xs[l]))

    def bias_gradient(self, l, g) -> None:
        self._bias_grad[l] += g                  # Σ_i of what W^l sees backward

    # -- a step ---------------------------------------------------------------------------
    def step(self, t):
        """Forward the batch, backward each item, then move every coefficient vector."""
        problem, L, B, alpha, opt = self.problem, self.L, self.B, self.alpha, self.opt
        Xb, Yb = problem.batch(t)
        fwd = [self.forward(Xb[i], store=True, t=t) for i in range(B)]
        fb = np.array([self.output(xs[-1], t) for _, xs in fwd])
        chi = problem.loss.grad(fb, Yb, np) / B
        dh1 = []
        self._new_pairs = {l: [] for l in range(2, L + 1)}
        self._bias_grad = {l: self.prim.zeros() for l in self.cb}
        for i in range(B):
            hs, self._xs = fwd[i]
            dx = alpha * sum(chi[i, o] * self.cV[o] for o in range(len(self.cV)))  # δx^L
            dh1.append(self.program.backward(hs, dx, self))
        rate = self.problem.rate(t)
        eta, decay, clocks = self.eta, self.decay, self.clocks
        for l, c in self.cb.items():   # coordinatewise rules only (Problem refuses others)
            k = clocks.trains("b", l, t)
            if k:
                scale_b, h_b = opt.coordinate(self.eta_b[l], 1.0, self.decay_b[l], k, rate)
                self.cb[l], self.st_b[l] = opt.rule.apply(c, scale_b * self._bias_grad[l],
                                                          self.st_b[l], h_b)
        for l, beta in self.beta.items():
            k = clocks.trains("b", l, t)
            if k:
                scale_b, h_b = opt.coordinate(self.eta_b[l], alpha, self.decay_b[l], k, rate)
                self.beta[l], self.st_b[l] = opt.rule.apply(beta, scale_b * chi.sum(axis=0),
                                                            self.st_b[l], h_b)
        cU, cV, d = self.cU, self.cV, len(self.cU)
        kU, kV = clocks.trains("W", 0, t), clocks.trains("W", L, t)
        if opt.coordinatewise:
            if kU:
                scale_u, h_u = opt.coordinate(eta[0], 1.0, decay[0], kU, rate)  # α in δh^1
                for k in range(d):
                    cU[k], self.stU[k] = opt.rule.apply(
                        cU[k], scale_u * sum(Xb[i, k] * dh1[i] for i in range(B)),
                        self.stU[k], h_u)
            if kV:
                scale_v, h_v = opt.coordinate(eta[L], alpha, decay[L], kV, rate)
                for o in range(len(cV)):
                    cV[o], self.stV[o] = opt.rule.apply(
                        cV[o], scale_v * sum(chi[i, o] * fwd[i][1][-1] for i in range(B)),
                        self.stV[o], h_v)
        else:                            # a step that needs the particles' means
            if kU:
                ZU, self.stU = opt.move_particles(np.column_stack(cU), self.stU,
                                                  np.column_stack(dh1), Xb, eta[0], 1.0,
                                                  decay[0], kU, rate, "input", self.moments)
                self.cU = list(ZU.T.copy())
            if kV:
                ZV, self.stV = opt.move_particles(np.column_stack(cV), self.stV,
                                                  np.column_stack([xs[-1] for _, xs in fwd]),
                                                  chi, eta[L], alpha, decay[L], kV, rate,
                                                  "readout", self.moments)
                self.cV = list(ZV.T.copy())
        prim = self.prim
        for l in range(2, L + 1):
            self.pairs[l].extend(self._new_pairs[l])
            if self.msign:
                pairs = self.pairs[l]
                GP = np.array([[prim.cov(a, b) for b, _ in pairs] for a, _ in pairs])
                GQ = np.array([[prim.cov(a, b) for _, b in pairs] for _, a in pairs])
                opt.move_pairs(self.omega[l], GP, GQ, t, B, rate, eta[l - 1], decay[l - 1],
                               counts=clocks.of_layer("W", l - 1))
        return fb, float(np.mean(problem.loss.value(fb, Yb, np)))


def deep_linear(problem, const, decoupled: bool, eval_steps, on_step=None,
                bound=None) -> LimitResult:
    """Run the exact deep linear limit on ``problem`` with the limit constants ``const``."""
    net = problem.net
    L, T, E = net.L, problem.T, problem.E
    Xe = problem.eval_inputs
    run = _ExactRun(problem, const, decoupled, bound)
    prim = run.prim
    res = LimitResult.empty(T, E, problem.B, net.d_out, L=L)
    mom = res.moments
    h0 = [None] * E

    def evaluate(t):
        if t not in eval_steps:
            return
        xs_L = []
        for e in range(E):
            hs, xs = run.forward(Xe[e], store=False, t=t)
            if t == 0:
                h0[e] = hs, xs
            for l in range(L):
                for sq, dsq, v, v0 in ((mom.h_sq, mom.dh_sq, hs[l], h0[e][0][l]),
                                       (mom.x_sq, mom.dx_sq, xs[l + 1], h0[e][1][l + 1])):
                    sq[t, l, e] = prim.cov(v, v)
                    dd = v - v0
                    dsq[t, l, e] = prim.cov(dd, dd)
            xs_L.append(xs[-1])
            res.f_eval[t, e] = run.output(xs[-1], t)
        res.f_eval_se[t] = 0.0
        for e in range(E):
            for g in range(E):
                mom.feature_kernel[t, e, g] = prim.cov(xs_L[e], xs_L[g])

    loop = StepLoop(T, on_step)
    with loop:
        evaluate(0)
        for t in loop:
            res.f_train[t], res.loss[t] = run.step(t)
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
