"""A width-n abc-parametrized MLP, trained exactly in W-space (docs/theory.md §7.1).

Initialization: W^l_0 = σ_l n^{-(a_l+b_l)} G^l with G^l iid N(0, 1) (zero
readout when b_{L+1} = oo).  The Gaussians are drawn on the host from
``numpy.random.default_rng(seed)`` in layer order, so every backend and
dtype starts from the same network.

SGD in W-space is exactly SGD on w (∇_w = n^{-a}∇_W, ΔW = n^{-a}Δw):

    W^l <- W^l - η_l n^{-(2a_l + c_l)} Σ_i (∂(χ_iᵀ f)/∂h^l_i) x^{l-1}_iᵀ.

Momentum μ and coupled weight decay λ (spec/optimizer.py) stay linear, so in
W-space they are one buffer per layer: D <- μ D + γ_l ∇_W + η_l λ W, W <- W - D
(γ_l the SGD step above, η_l = η lr_mult_l; docs/theory.md §10.1).

Adam must see the w-gradient (its update is not linear in the gradient), so
it keeps its moments in w-units and maps the step back:
ΔW = -η_l n^{-c_l} n^{-a_l} m̂ / (√v̂ + ε n^{-g_l}), with g_w = n^{-a_l} ∇_W and
n^{-g_l} the size of a gradient entry (ε is width-free, docs/theory.md §10.3);
decoupled decay multiplies W by 1 - η_l λ first.

``backprop="decoupled"`` replaces, in the backward pass only, each hidden
W^l_t by W̃^l_0 + (W^l_t - W^l_0), with W̃^l_0 an independent copy of W^l_0
(docs/theory.md §3).
"""
from __future__ import annotations

import numpy as np

from ..engine.backend import Backend
from ..engine.normals import standard_normal
from ..engine.steps import DIVERGENCE_BOUND, check_size
from ..spec import MLP, SGD
from ..spec.optimizer import adam_direction


class FiniteNetwork:
    """Weights and one SGD/Adam step of a width-n MLP on a given backend."""

    def __init__(self, net: MLP, width: int, lr: float, seed: int, backend: Backend, dtype,
                 backprop: str = "exact", optimizer=None, keep_init: bool = False,
                 divergence_bound: float | None = DIVERGENCE_BOUND):
        self.net, self.n, self.b, self.dtype = net, width, backend, np.dtype(dtype)
        self.phi = net.nonlinearity
        self.alpha = net.output_multiplier
        self.backprop = backprop
        self.opt = SGD() if optimizer is None else optimizer
        self.optimizer = self.opt.kind
        self.bound = divergence_bound
        L, n = net.L, width
        const = net.finite_constants(width, lr)
        shapes = [(n, net.d_in)] + [(n, n)] * (L - 1) + [(net.d_out, n)]
        rng = np.random.default_rng(seed)
        self.W = [self._gaussian(rng, s, std) for s, std in zip(shapes, const.init_std)]
        self.W0 = [w.copy() for w in self.W] if (keep_init or backprop == "decoupled") else None
        # Drawn after every W_0, so exact and decoupled runs share W_0 for a seed.
        self.W_tilde = ({l: self._gaussian(rng, shapes[l], const.init_std[l]) for l in range(1, L)}
                        if backprop == "decoupled" else None)
        self.lr = list(const.lr)
        self.shrink = self.opt.shrinks(const.decay)                # η_l λ per step
        if self.optimizer == "sgd" and not self.opt.plain:
            self.D = [backend.xp.zeros_like(w) for w in self.W]    # W-space momentum buffers
        if self.optimizer == "adam":
            self.adam_lr, self.n_a = list(const.adam_lr), list(const.w_scale)
            self.eps = [self.opt.eps * e for e in const.eps_scale]
            self.betas, self.t = self.opt.betas, 0
            self.m = [backend.xp.zeros_like(w) for w in self.W]
            self.v = [backend.xp.zeros_like(w) for w in self.W]

    def _gaussian(self, rng, shape, std):
        """std · N(0, 1) entries drawn on the host; a zero std (zero readout) draws nothing.

        The draw is compiled (engine/normals.py): the same numbers as
        ``rng.standard_normal(shape)``, 1.4-2.9x faster, which matters
        because initialization dominates short runs at large widths."""
        if std == 0.0:
            return self.b.xp.zeros(shape, dtype=self.dtype)
        G = standard_normal(rng, shape)
        G *= std
        return self.b.asarray(G, self.dtype)

    # ---- forward -------------------------------------------------------------
    def forward(self, X, step: int):
        """Return (hs, xs, f): pre-activations h^1..h^L, inputs x^0..x^L, output.

        Raises DivergenceError naming the first layer with a value that is not
        finite or beyond the divergence bound.
        """
        xp, mm = self.b.xp, self.b.matmul
        hs, xs = [], [X]
        for l in range(self.net.L):
            h = mm(xs[-1], self.W[l].T)
            check_size(h, step, l + 1, "pre-activation h", self.bound, xp)
            hs.append(h)
            xs.append(self.phi.phi(h, self.b))
        f = self.alpha * mm(xs[-1], self.W[-1].T)
        check_size(f, step, None, "output f", self.bound, xp)
        return hs, xs, f

    # ---- backward + simultaneous update ----------------------------------------
    def step(self, hs, xs, chi) -> None:
        """Backpropagate χ (B, d_out) with W_t and update every layer to W_{t+1}.

        Each layer's backward product is taken before that layer is updated,
        so all gradients use W_t (simultaneous updates).
        """
        L, mm = self.net.L, self.b.matmul
        if self.optimizer == "adam":
            self.t += 1
        g_x = self.alpha * mm(chi, self.W[L])                   # ∂(χᵀf)/∂x^L
        self._update(L, self.alpha * chi, xs[L])                # ∇W^{L+1} = α χᵀ x^L
        for l in range(L - 1, -1, -1):
            g_h = g_x * self.phi.dphi(hs[l], self.b)
            if l > 0:
                g_x = self._backward_product(g_h, l)
            self._update(l, g_h, xs[l])

    def _backward_product(self, g_h, l):
        mm = self.b.matmul
        if self.backprop == "decoupled":
            return mm(g_h, self.W_tilde[l]) + mm(g_h, self.W[l]) - mm(g_h, self.W0[l])
        return mm(g_h, self.W[l])

    def _update(self, l, G, X) -> None:
        """Apply the step for layer l whose W-gradient is Gᵀ X."""
        if self.optimizer == "sgd":
            if self.opt.plain:
                self.b.add_outer(self.W[l], -self.lr[l], G, X)
                return
            D = self.D[l]
            D *= self.opt.momentum
            if self.shrink[l]:
                D += self.shrink[l] * self.W[l]                 # coupled decay, with W_t
            self.b.add_outer(D, self.lr[l], G, X)
            self.W[l] -= D
            return
        g_w = self.b.matmul(G.T, X)
        g_w *= self.n_a[l]                                      # gradient in w-units
        psi = adam_direction(self.m[l], self.v[l], g_w, self.betas, self.eps[l], self.t,
                             self.b.xp)
        if self.shrink[l]:
            self.W[l] *= 1.0 - self.shrink[l]                   # decoupled (AdamW) decay
        psi *= self.n_a[l] * self.adam_lr[l]                    # in place: no temporary
        self.W[l] -= psi

    # ---- memory ------------------------------------------------------------------
    @staticmethod
    def bytes_needed(net: MLP, width: int, dtype, backprop: str, optimizer,
                     keep_init: bool) -> int:
        """Bytes for the weights and the copies a run keeps (W_0, W̃_0, momentum buffers or
        Adam moments)."""
        n, L = width, net.L
        per_copy = n * net.d_in + (L - 1) * n * n + net.d_out * n
        state = 2 if optimizer.kind == "adam" else int(not optimizer.plain)
        copies = 1 + (keep_init or backprop == "decoupled") + state
        hidden_copies = copies + (backprop == "decoupled")
        total = copies * per_copy + (hidden_copies - copies) * (L - 1) * n * n
        # one float64 host draw of the largest matrix during initialization
        return total * np.dtype(dtype).itemsize + 8 * max(n * n if L > 1 else 0, n * net.d_in)
