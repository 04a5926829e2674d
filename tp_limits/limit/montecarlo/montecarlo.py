"""Monte Carlo limit of a deep (L >= 2) feature-learning MLP (docs/theory.md §4).

Particles carry Z^U ∈ R^d, Z^{nV} ∈ R^{d_out} and, per hidden matrix W^l
(2 <= l <= L), the hat families F^l and G^l of families.py.  All batch
items (and all evaluation inputs) of a layer are processed as one (m, N)
block.  A training step, as :class:`DeepRun` performs it:

**Forward** (a step's training items, with the evaluation inputs of an
evaluated step in the same block, so both read the histories once), for l = 2..L:

    Z^{h^l} = Ẑ^{W^l x} + Σ_j Z^{δh^l_j} c_j,
    c_j = Ż coefficient of the estimator (zdot.py) − η_l e_l E[Z^{x_j} Z^x] (pairs s < t),

where the ΔW coefficients E[Z^{x_j} Z^x] are the conditioning covariances κ/σ²
already computed for the new hat, so Ż and ΔW share one pass over the stored
δh's.  x^l = φ(h^l), f̊ = α E[Z^{nV} Z^{x^L}].

**Backward** (training items), seed δx^L = α χᵀ Z^{nV}, then for l = L..2:
δh^l = δx^l φ′(h^l) and

    Z^{δx^{l-1}} = Ẑ^{W^lᵀ δh} + Σ_e Z^{x_e} c_e,
    c_e = Ż coefficient (current step's forward hats included) − η_l e_l E[Z^{δh_e} Z^{δh}].

**Update** (simultaneous): Z^U −= η_1 e_1 Σ_i δh^1_i ξ_iᵀ,
Z^{nV} −= η_{L+1} e_V α Σ_i χ_i Z^{x^L_i}; this step's pairs join the ΔW sums.

**Residual blocks** (docs/theory.md §12): at a block's output h^l = h^{s} + c Z^{W^l x^{l-1}}
forward (s the layer the skip starts from), and backward W^l sees c δh^l (its family G^l
stores that vector, so Ż, ΔW and the partners are those of the product c W^l) while the
skip adds δh^l to δh^s.

**Biases** (docs/theory.md §13): each hidden layer's bias is a particle coordinate
Z^{b^l} (N, 1), added to Z^{h^l} (inside a block's branch), moved by the optimizer's rule
for one coordinate with the gradient Σ_i g^l_i, g^l the vector W^l sees backward (δh^l,
or c δh^l in a block); the readout's bias β ∈ R^{d_out} is deterministic in the limit,
f̊ = α (E[Z^{nV} Z^{x^L}] + β), moved by the same rule with gradient α Σ_i χ_i.

**Momentum and weight decay**, or any optimizer linear in the gradients
(docs/theory.md §10.2): W^l_t = ρ^l_t W^l_0 − Σ_{s<t} C^l[t, s] γ G_s (the
optimizer's ``schedule``), so the hat and its Ż part are multiplied by ρ^l_t and
the ΔW coefficient of a pair from step s by C^l[t, s]; hats stay those of the
unscaled vectors (W_0 is linear), and Z^U, Z^{nV} move by the optimizer's rule for
one coordinate.  Optimizers that are not linear run in partners.py's engine.

Gram matrices and their (ridge-regularized) inverses are cached per family,
so a step costs a few passes over the histories: time O(N L B T² (B+E)) in
all with the Stein estimator, memory O(N L B T).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...engine.backend import get_backend
from ...engine.steps import StepLoop, check_size
from ...errors import DivergenceError
from ..result import LimitResult
from ..sampling import Draws, SobolPrefix
from .families import Family, NonFiniteLaw
from .passes import passes_for
from .zdot import make_estimator

GROUPS = 32          # particle groups for the batch-means standard error


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs besides its random generator (picklable for worker processes)."""

    problem: object
    const: object          # spec.LimitConstants
    N: int
    zdot: type             # an estimator class of zdot.py
    dtype: object
    eval_steps: tuple
    record_stats: bool
    bound: float | None = None     # divergence bound on |f|
    partners: int = 0              # optimizers not linear (Adam): partner particles (partners.py)
    debias: bool = False           # ... extrapolated from M and 2M partners
    backend: str = "numpy"         # array module of the particles ('numpy' or 'cupy')
    random: str = "backend"        # sampling.Draws: the backend's generator, or the host's
    sampler: str = "antithetic"    # sampling.SAMPLERS: how the Gaussians of the run are drawn


#: most Gaussian coordinates per particle that one Sobol' point spans (theory §4.8): the
#: points cost 8 bytes per coordinate and particle, and SciPy makes about 25 M per second
MAX_QMC_DIMS = 256


def qmc_dims(spec: RunSpec) -> int:
    """Coordinates of the Sobol' point of a particle: Z^U, Z^{nV}, then every hat the run
    draws in order — per hidden matrix and step B forward and B backward training rows,
    and E evaluation rows at each evaluated step — up to MAX_QMC_DIMS."""
    p = spec.problem
    L, d, do = p.net.L, p.net.d_in, p.net.d_out
    hats = (L - 1) * (2 * p.B * p.T + p.E * len(spec.eval_steps))
    biases = sum(spec.const.bias.sigma[l] > 0 for l in p.program.hidden_bias_layers)
    return min(MAX_QMC_DIMS, d + (do if spec.const.readout_init else 0) + biases + hats)


class DeepRun:
    """The particle state of one run, and the forward, backward, update and evaluation of a step."""

    def __init__(self, spec: RunSpec, rng):
        p, c = spec.problem, spec.const
        self.spec = spec
        b = self.b = get_backend(spec.backend)
        xp = self.xp = b.xp
        self.net, self.phi = p.net, p.net.nonlinearity
        L, d, do, N = p.net.L, p.net.d_in, p.net.d_out, spec.N
        self.L, self.N, self.alpha, self.eta = L, N, c.alpha, c.eta
        self.program = p.program                   # the walk (spec/program.py)
        self.draws = draws = Draws(b, rng, spec.random)
        if spec.sampler == "qmc":
            self.draws = draws = SobolPrefix(draws, qmc_dims(spec), N)
        sig = c.sigma
        self.ZU = sig[0] * draws.normal((N, d))
        if spec.sampler == "antithetic":         # ± pairs in Z^{nV}: half the readout noise
            half = draws.normal((N // 2, do))
            self.ZV = (sig[L] if c.readout_init else 0.0) * xp.concatenate([half, -half])
        else:
            self.ZV = sig[L] * draws.normal((N, do)) if c.readout_init else xp.zeros((N, do))
        # the program's biases: Z^{b^l} (N, 1) per hidden layer with one, and the readout's
        # deterministic β (1, d_out); this step's backward vectors g^l for them
        self.Zb = {l: self._gaussian(c.bias.sigma[l], (N, 1))
                   for l in self.program.hidden_bias_layers}
        self.beta = {l: np.zeros((1, do)) for l in self.program.readout_bias_layers}
        self.bias_grads = {}
        cap = p.B * p.T
        passes = passes_for(b)
        self.F = {l: Family(N, cap, sig[l - 1] ** 2, spec.dtype, passes)
                  for l in range(2, L + 1)}
        self.G = {l: Family(N, cap, sig[l - 1] ** 2, spec.dtype, passes)
                  for l in range(2, L + 1)}
        self.times_rows = passes.times_rows
        self.npairs = {l: 0 for l in range(2, L + 1)}       # pairs (s < t) usable by ΔW^l
        self.zdot = make_estimator(spec.zdot, N, L, d, do, cap, sig, p.B, xp)
        # np.array_split's groups: the first N % GROUPS have one particle more
        q, r = divmod(N, GROUPS)
        self.groups = ((0, r * (q + 1), r, q + 1), (r * (q + 1), N, GROUPS - r, q))
        self.init = []          # (h^l_0, x^l_0) on the eval inputs, kept only for statistics
        self.opt = opt = p.optimizer
        rates = p.rates
        # plain SGD at a constant rate: every pair's ΔW coefficient is η_l, no schedule
        self.plain = opt.plain and p.constant_rate
        self.decay = opt.shrinks(c.decay)
        # (ρ, C) per hidden matrix; an optimizer that is not linear has no C (partners.py)
        self.clocks = clocks = p.clocks          # the phases' frozen steps (spec/phases.py)
        self.sched = {l: (opt.schedule(self.decay[l - 1], p.T, rates, clocks.of_layer("W", l - 1))
                          if opt.linear else
                          (opt.init_factor(self.decay[l - 1], p.T, rates,
                                           clocks.of_layer("W", l - 1)), None))
                      for l in range(2, L + 1)}
        self.stU, self.stV = (opt.particle_state(self.ZU, "input"),
                              opt.particle_state(self.ZV, "readout"))
        self.st_b = {l: opt.particle_state(z, "input") for l, z in self.Zb.items()}
        self.st_b.update({l: opt.particle_state(b, "readout") for l, b in self.beta.items()})
        self.bias_decay = {l: opt.shrinks(c.bias.decay)[l] for l in self.st_b}
        self.updates = 0                      # updates so far
        self.res = LimitResult.empty(p.T, p.E, p.B, do, L if spec.record_stats else None)
        self.evaluated = set()
        self.eval_X = xp.asarray(p.eval_inputs)
        self.k_at_step = None   # families' sizes while a step's forward pass is under way

    def _gaussian(self, std, shape):
        """std · N(0, 1) particle coordinates; nothing is drawn for std = 0."""
        return std * self.draws.normal(shape) if std else self.xp.zeros(shape)

    # -- the two matrix products of a hidden layer ------------------------------------------
    def _coefficients(self, own, other, z, kappa, l, zc, t):
        """(k, m) coefficients on ``other``'s stored vectors for the new rows z of ``own``:
        the Ż coefficients ``zc`` (times ρ^l_t) minus η_l C^l[t, s] E[v_{s,i} z] over the
        stored pairs, which are the first rows of the conditioning covariances κ/σ²
        computed for the hat."""
        kp = self.npairs[l]
        if self.plain:
            if kp:
                zc[:kp] -= self.eta[l - 1] * kappa[:kp] / own.sigma2
            return zc
        rho, C = self.sched[l]
        zc = rho[t] * zc
        if kp:
            weight = self.xp.asarray(C[t, np.arange(kp) // self.spec.problem.B])
            zc[:kp] -= (self.eta[l - 1] * weight[:, None]) * kappa[:kp] / own.sigma2
        return zc

    def _scaled(self, hat, l, t):
        """ρ^l_t Ẑ as a new array: the W_0 part of W^l_t under weight decay (the hat itself
        is stored, so the Ż and ΔW terms are added to a copy, in place)."""
        return hat.copy() if self.plain else self.sched[l][0][t] * hat

    # -- hooks of optimizers whose ΔW is not a sum over stored pairs (partners.py) --------
    def delta_w_forward(self, l, x, stored: int):
        """An extra (m, N) term of Z^{W^l_t x} beyond hat, Ż and the pair sums (None); the
        first ``stored`` rows of x are this step's training items."""
        return None

    def delta_w_backward(self, l, dh):
        """An extra (m, N) term of Z^{W^l_tᵀ δh} (None)."""
        return None

    # -- tangents: only an estimator that carries them pays for φ′ and φ″ of every row ----
    def _activation_tangent(self, t_h, h):
        z = self.zdot
        return z.activation(t_h, self.phi.dphi(h, self.b)) if z.carries_tangents else None

    def _backprop_tangent(self, t_dx, dphi, dx, h, t_h):
        z = self.zdot
        if not z.carries_tangents:
            return None
        return z.backprop(t_dx, dphi, dx, self.phi.d2phi(h, self.b), t_h)

    def forward(self, X, stored: int, t: int):
        """h^1..h^L and x^1..x^L, each (m, N), for the rows of X under W_t, with their tangents:
        the program's walk (spec/program.py) on particle rows.

        The m hats of a layer are drawn jointly, conditional on the stored
        training hats: for training items this equals drawing them one after
        the other, conditioning each on the previous ones; evaluation rows
        drawn with them get their joint law with the new training hats.  The
        first ``stored`` rows are this step's training items, stored.
        """
        self._stored, self._t = stored, t
        self._ths, self._txs = [], []
        hs, xs = self.program.forward(X, self)
        return hs, xs[1:], self._ths, self._txs

    def backward(self, hs, ths, chi, t):
        """δh^1 (B, N) and its tangent, from the readout seed δx^L = α χᵀ Z^{nV}."""
        self._t, self._ths = t, ths
        self._t_dx = self.zdot.readout(self.alpha, chi)
        dh = self.program.backward(hs, self.alpha * (chi @ self.ZV.T), self)
        return dh, self._t_dh

    # -- the layers above a hidden layer, for a network continued frozen -------------------
    def forward_above(self, l, h, stored: int, t: int) -> list:
        """h^l … h^L, each (m, N), from the rows h = h^l under W_t: the products of
        W^{l+1} … W^L with their hats, Ż and ΔW terms, the first ``stored`` rows kept in
        the families (a pretrained network's frozen layers above an adapter on W^l, whose
        h^l the program's walk does not make).  Stein's Ż only: no tangents are carried."""
        self._stored, self._t, self._ths, self._txs = stored, t, [], [None]
        hs = [h]
        for k in range(l + 1, self.L + 1):
            hs.append(self.product(k - 1, self.phi.phi(hs[-1], self.b)))
        return hs

    def backward_above(self, l, hs, chi, t: int):
        """δh^l for the first len(χ) rows of :meth:`forward_above`'s ``hs``, from the readout
        seed δx^L = α χᵀ Z^{nV} through W^L … W^{l+1} (each W^kᵀ δh^k's vector stored in
        G^k)."""
        self._t, self._t_dh = t, None
        rows, dphi = len(chi), self.phi.dphi
        dx = self.alpha * (chi @ self.ZV.T)
        for k in range(len(hs) - 1, 0, -1):
            dx = self.product_T(l + k - 1, dx * dphi(hs[k][:rows], self.b))
        return dx * dphi(hs[0][:rows], self.b)

    # -- the walk's operations on particle rows (spec/program.py) ---------------------------
    representation = "rows"

    def product(self, l, x):
        """Z^{W x} of layer l (0-based) for the rows x: Z^U ξ for the input layer; for a
        hidden matrix the new hat with its Ż and ΔW terms (docs/theory.md §4.2), the first
        ``stored`` rows kept in the families."""
        z = self.zdot
        if l == 0:
            self._ths.append(z.input(x))
            return x @ self.ZU.T
        stored, t, lw = self._stored, self._t, l + 1
        F, G = self.F[lw], self.G[lw]
        try:
            hat, info = F.sample(x, self.draws, store_rows=stored)
        except (NonFiniteLaw, np.linalg.LinAlgError):
            raise DivergenceError(t, lw, "pre-activation h (its Gaussian law)") from None
        k0, kG = F.k, G.k
        zc = z.forward(lw, x, self._txs[-1], G) if kG else self.xp.zeros((0, len(x)))
        coef = self._coefficients(F, G, x, info[0], lw, zc, t)
        h = self._scaled(hat, lw, t)
        if kG:
            self.times_rows(coef, G.vec[:kG], out=h)
        extra = self.delta_w_forward(lw, x, stored)
        if extra is not None:
            h = h + extra
        self._ths.append(z.forward_tangent(lw, coef, kG, len(x), k0 if stored > 0 else None))
        if stored > 0:
            z.keep_forward(lw, k0, self._txs[-1])
            F.store(x, hat, info, stored)
        return h

    def add_bias(self, l, v):
        if l == self.L:                          # the readout's: α β, deterministic
            return v + self.alpha * self.beta[l]
        v += self.Zb[l].T
        return v

    def residual(self, h_skip, c, v):
        v *= c                                  # a block's output: h^{skip} + c Z^{Wx}
        v += h_skip
        return v

    def pre_activation(self, l, h):
        return h

    def activation(self, l, n):
        self._txs.append(self._activation_tangent(self._ths[-1], n))
        return self.phi.phi(n, self.b)

    def identity(self, l, n):
        self._txs.append(self._ths[-1])          # x = n: its tangent is h's
        return n

    def scale(self, c, g):
        return c * g

    def product_T(self, l, g):
        """Z^{W^lᵀ g} for the backward rows g: the new hat of family G, its Ż and ΔW
        terms; g is stored (W^l sees it backward: c δh^l in a residual block)."""
        z, t, lw = self.zdot, self._t, l + 1
        F, G = self.F[lw], self.G[lw]
        hat, info = G.sample(g, self.draws, store_rows=len(g))
        k0, kF = G.k, F.k
        coef = self._coefficients(G, F, g, info[0], lw, z.backward(lw, g, self._t_dh, F), t)
        dx = self.times_rows(coef, F.vec[:kF], out=self._scaled(hat, lw, t))
        extra = self.delta_w_backward(lw, g)
        if extra is not None:
            dx = dx + extra
        self._t_dx = z.backward_tangent(lw, coef, kF, len(g), k0)
        z.keep_backward(lw, k0, self._t_dh)
        G.store(g, hat, info)
        return dx

    def activation_backward(self, l, n, dx):
        dp = self.phi.dphi(n, self.b)
        self._t_dh = self._backprop_tangent(self._t_dx, dp, dx, n, self._ths[l])
        return dx * dp

    def identity_backward(self, l, n, dx):
        self._t_dh = self._t_dx
        return dx

    def gradient(self, l, g) -> None:
        pass                         # the families kept g; update() moves Z^U and Z^{nV}

    def bias_gradient(self, l, g) -> None:
        self.bias_grads[l] = g

    def readout(self, x):
        self._contrib = self.alpha * x[:, :, None] * self.ZV[None]           # (m, N, do)
        return self.b.to_numpy(self._contrib.mean(axis=1))

    def finish_output(self, f):
        check_size(f, self._step, None, "output f", self.spec.bound)
        return f

    def update(self, Xb, dh1, t_dh1, xL, t_xL, chi) -> None:
        """Z^U −= η_1 Σ_i δh^1_i ξ_iᵀ and Z^{nV} −= η_{L+1} α Σ_i x^L_i χ_iᵀ, simultaneously
        (through the optimizer's rule for one coordinate: the heavy ball under momentum or
        weight decay)."""
        L, opt = self.L, self.opt
        self.updates += 1
        t = self.updates - 1
        rate = self.spec.problem.rate(t)
        kU, kV = self.clocks.trains("W", 0, t), self.clocks.trains("W", L, t)
        # the tangents follow plain SGD only, whose step is the rate times η (0: frozen)
        self.zdot.update(rate * self.eta[0] * bool(kU), Xb, t_dh1,
                         rate * self.eta[L] * bool(kV), self.alpha, chi, t_xL)
        if kU:
            self.ZU, self.stU = opt.move_particles(self.ZU, self.stU, dh1.T, Xb, self.eta[0],
                                                   1.0, self.decay[0], kU, rate, "input")
        if kV:
            self.ZV, self.stV = opt.move_particles(self.ZV, self.stV, xL.T, chi, self.eta[L],
                                                   self.alpha, self.decay[L], kV, rate,
                                                   "readout")
        for l in range(2, L + 1):
            self.npairs[l] += len(Xb)

    def update_biases(self, chi) -> None:
        """Each hidden bias's particles by the optimizer's rule for one coordinate with the
        gradient Σ_i g^l_i (the step's backward vectors, taken before any update), and the
        readout's β by the same rule with α Σ_i χ_i (``chi`` on the host)."""
        c, opt, xp, t = self.spec.const.bias, self.opt, self.xp, self.updates - 1
        rate = self.spec.problem.rate(t)
        for l, z in self.Zb.items():
            g, k = self.bias_grads[l], self.clocks.trains("b", l, t)
            if k:
                self.Zb[l], self.st_b[l] = opt.move_particles(
                    z, self.st_b[l], g.T, xp.ones((len(g), 1)), c.eta[l], 1.0,
                    self.bias_decay[l], k, rate, "input")
        for l, beta in self.beta.items():
            k = self.clocks.trains("b", l, t)
            if k:
                self.beta[l], self.st_b[l] = opt.move_particles(
                    beta, self.st_b[l], np.ones((1, len(chi))), chi, c.eta[l], self.alpha,
                    self.bias_decay[l], k, rate, "readout")

    # -- outputs ------------------------------------------------------------------------------
    def output(self, xL, step, with_se=False):
        """f̊ for each row of x^L (m, N) -> (m, d_out) on the host, and its batch-means error."""
        self._step = step
        f = self.program.output(xL, self)
        if not with_se:
            return f
        contrib = self._contrib
        m = len(contrib)
        gm = self.xp.concatenate([contrib[:, a:b].reshape(m, n, size, -1).mean(axis=2)
                                  for a, b, n, size in self.groups if n], axis=1)
        return f, self.b.to_numpy(gm).std(axis=1, ddof=1) / np.sqrt(GROUPS)

    def evaluate(self, t) -> None:
        """f̊_t on the eval inputs by a forward pass of their own (when no step shares it)."""
        if t in self.spec.eval_steps and t not in self.evaluated:
            hs, xs, _, _ = self.forward(self.eval_X, stored=0, t=t)
            self.record(t, hs, xs)

    def record(self, t, hs, xs) -> None:
        """f̊_t, its error and the statistics, from the eval inputs' h^l and x^l."""
        xp, host = self.xp, self.b.to_numpy
        self.evaluated.add(t)
        res = self.res
        if res.moments is not None:
            if not self.init:
                self.init.extend(zip(hs, xs))
            m = res.moments
            for l, ((h, x), (h0, x0)) in enumerate(zip(zip(hs, xs), self.init)):
                m.h_sq[t, l] = host(xp.mean(h ** 2, axis=1))
                m.dh_sq[t, l] = host(xp.mean((h - h0) ** 2, axis=1))
                m.x_sq[t, l] = host(xp.mean(x ** 2, axis=1))
                m.dx_sq[t, l] = host(xp.mean((x - x0) ** 2, axis=1))
            m.feature_kernel[t] = host(xs[-1] @ xs[-1].T / self.N)
        res.f_eval[t], res.f_eval_se[t] = self.output(xs[-1], t, with_se=True)

    # -- the run --------------------------------------------------------------------------------
    def step(self, t) -> None:
        p, res = self.spec.problem, self.res
        Xb, Yb = p.batch(t)
        Xb, B = self.xp.asarray(Xb), len(Xb)
        fuse = self.zdot.fuses_eval and t in self.spec.eval_steps and t not in self.evaluated
        if not fuse:
            self.evaluate(t)
        self.k_at_step = {fam: fam.k for fam in (*self.F.values(), *self.G.values())}
        X = self.xp.concatenate([Xb, self.eval_X]) if fuse else Xb
        hs, xs, ths, txs = self.forward(X, stored=B, t=t)
        if fuse:                 # the eval rows rode along: record them, keep the batch's
            self.record(t, [h[B:] for h in hs], [x[B:] for x in xs])
            hs, xs = [h[:B] for h in hs], [x[:B] for x in xs]
        self.k_at_step = None
        fb = self.output(xs[-1], t)                        # on the host: loss and χ there
        res.f_train[t] = fb
        res.loss[t] = float(np.mean(p.loss.value(fb, Yb, np)))
        chi_host = p.loss.grad(fb, Yb, np) / p.B
        chi = self.xp.asarray(chi_host)
        dh1, t_dh1 = self.backward(hs, ths, chi, t)
        self.program.readout_gradient(chi_host, self)
        self.update(Xb, dh1, t_dh1, xs[-1], txs[-1], chi)
        self.update_biases(chi_host)

    def run(self, on_step) -> LimitResult:
        """Each step evaluates its own starting point (the eval rows sharing its forward
        pass), then the end point is evaluated; after Ctrl-C the state the completed
        steps left is evaluated if that had not happened yet."""
        T = self.spec.problem.T
        loop = StepLoop(T, on_step)
        with loop:
            for t in loop:
                self.step(t)
            self.evaluate(T)
        if loop.interrupted and loop.completed not in self.evaluated:
            if self.k_at_step is not None:      # stopped inside a forward pass: undo its stores
                for fam, k in self.k_at_step.items():
                    fam.truncate(k)
            try:
                self.evaluate(loop.completed)
            except KeyboardInterrupt:
                pass
        self.res.se_method = (f"batch means over {GROUPS} particle groups (ignores error "
                              "carried by chi and the Ż coefficients; use replicates > 1)")
        self.res.se_dof = GROUPS - 1
        return self.res.finish(loop)
