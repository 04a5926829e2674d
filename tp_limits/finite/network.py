"""A width-n abc-parametrized MLP, trained exactly in W-space (docs/theory.md §7.1), with
skip connections h^l = h^{l-1} + K^{-α} W^l x^{l-1} around W^2..W^L when the MLP is
residual (docs/theory.md §12).

Initialization: W^l_0 = σ_l n^{-(a_l+b_l)} G^l with G^l iid N(0, 1) (zero
readout when b_{L+1} = oo), G^l rescaled or replaced by the MLP's ``init`` scheme
(spec/initializations.py).  The Gaussians are drawn on the host from
``numpy.random.default_rng(seed)`` in layer order, so every backend and
dtype starts from the same network.

Each layer's W-gradient Σ_i (∂(χ_iᵀ f)/∂h^l_i) x^{l-1}_iᵀ = Gᵀ X is handed, in its
low-rank form, to the routine's optimizer (spec/optimizers/), which moves the
weights in place: SGD in W-space is exactly SGD on w (∇_w = n^{-a}∇_W,
ΔW = n^{-a}Δw), W^l <- W^l - η_l n^{-(2a_l + c_l)} Gᵀ X; Adam keeps its moments in
w-units (docs/theory.md §7.1, §10).  Per layer the network keeps one array like W
per state slot of the optimizer (momentum buffer, Adam's moments).

With biases (docs/theory.md §13) each layer adds its bias b^l (an (n, 1) array, a weight
whose input is 1: its gradient is Gᵀ 1, and the optimizer moves it with the constants
``const.bias``), inside a residual branch: h^l = h^s + c (W^l x + b^l); the readout adds
its own, f = α (W^{L+1} x^L + b^{L+1}).  Biases are drawn after every matrix, so a network
without them draws what it always drew.

``backprop="decoupled"`` replaces, in the backward pass only, each hidden
W^l_t by W̃^l_0 + (W^l_t - W^l_0), with W̃^l_0 an independent copy of W^l_0
(docs/theory.md §3).
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..engine.backend import Backend, numpy_backend
from ..engine.normals import standard_normal
from ..engine.progress import step_notice
from ..engine.steps import DIVERGENCE_BOUND, check_size
from ..spec import MLP, SGD
from ..spec import initializations
from .norms import operator_norm

#: Lanczos tolerance of a spectral-norm initialization's ‖G‖_* (relative)
INIT_RTOL = 1e-13


class FiniteNetwork:
    """Weights and one SGD/Adam step of a width-n MLP on a given backend.

    The network walks its program (spec/program.py) and is itself the walk's operations on
    the rows of width-n arrays (``representation = "rows"``): forward, backward, and the
    optimizer's step on each parameter as its backward vector arrives."""

    representation = "rows"

    def __init__(self, net: MLP, width: int, lr: float, seed: int, backend: Backend, dtype,
                 backprop: str = "exact", optimizer=None, keep_init: bool = False,
                 divergence_bound: float | None = DIVERGENCE_BOUND, clocks=None):
        self.net, self.n, self.b, self.dtype = net, width, backend, np.dtype(dtype)
        self.xp = backend.xp
        self.program = net.program
        self.phi = net.nonlinearity
        self.alpha = net.output_multiplier
        self.backprop = backprop
        self.opt = SGD() if optimizer is None else optimizer
        self.bound = divergence_bound
        self.clocks = clocks         # the routine's phases (spec/phases.py); None: train all
        L, n = net.L, width
        const = net.finite_constants(width, lr)
        shapes = [(n, net.d_in)] + [(n, n)] * (L - 1) + [(net.d_out, n)]
        rng = np.random.default_rng(seed)
        self.W = [self._gaussian(rng, s, std, l) for l, (s, std) in
                  enumerate(zip(shapes, const.init_std))]
        self.W0 = [w.copy() for w in self.W] if (keep_init or backprop == "decoupled") else None
        # Drawn after every W_0, so exact and decoupled runs share W_0 for a seed.
        self.W_tilde = ({l: self._gaussian(rng, shapes[l], const.init_std[l], l)
                         for l in range(1, L)}
                        if backprop == "decoupled" else None)
        self.const = const
        # the optimizer's state: per layer one array like W per slot (buffer, moments)
        self.state = [self.opt.finite_state(w, l, L + 1, backend)
                      for l, w in enumerate(self.W)]
        # the program's biases, (n, 1) columns (the readout's (d_out, 1)), drawn after every
        # matrix, so a network without them draws what it always drew
        rows = [n] * L + [net.d_out]
        self.bias = {l: self._plain_gaussian(rng, (rows[l], 1), const.bias.init_std[l])
                     for l in self.program.bias_layers}
        self.bias_state = {l: self.opt.finite_state(v, l, L + 1, backend)
                           for l, v in self.bias.items()}
        self.bias0 = ({l: v.copy() for l, v in self.bias.items()} if self.W0 is not None
                      else None)
        self.t = 0                                                 # updates so far
        self._step = 0                                             # the step being walked
        self._rate, self._xs = 1.0, None                           # the update's rate, inputs

    def _plain_gaussian(self, rng, shape, std):
        """std · N(0, 1) entries (a bias: no initialization scheme), nothing drawn for 0."""
        if std == 0.0:
            return self.b.xp.zeros(shape, dtype=self.dtype)
        return self.b.asarray(std * standard_normal(rng, shape), self.dtype)

    def _gaussian(self, rng, shape, std, l):
        """std · N(0, 1) entries drawn on the host, shaped by the network's ``init`` scheme
        (rescaled to a spectral norm, or made orthogonal); a zero std (zero readout) draws
        nothing.

        The draw is compiled (engine/normals.py): the same numbers as
        ``rng.standard_normal(shape)``, in less time, which matters
        because initialization dominates short runs at large widths."""
        if std == 0.0:
            return self.b.xp.zeros(shape, dtype=self.dtype)
        G = standard_normal(rng, shape)
        # the norm's host backend is built only by the schemes that ask for a norm; an
        # orthogonal n x n layer is one QR, minutes at n = 20 000: said while it runs
        notice = (contextlib.nullcontext() if self.net.init == "gaussian" else
                  step_notice(f"{self.net.init} initialization of layer {l + 1} "
                              f"({shape[0]} × {shape[1]})", f"layer {l + 1} initialized"))
        with notice:
            G = initializations.finite_matrix(
                self.net.init, G, l, self.net.L + 1, self.n,
                lambda M: operator_norm(M, numpy_backend(), rtol=INIT_RTOL))
        G *= std
        return self.b.asarray(G, self.dtype)

    # ---- forward -------------------------------------------------------------
    def forward(self, X, step: int):
        """Return (hs, xs, f): pre-activations h^1..h^L, inputs x^0..x^L, output.

        Raises DivergenceError naming the first layer with a value that is not
        finite or beyond the divergence bound.
        """
        self._step = step
        hs, xs = self.program.forward(X, self)
        return hs, xs, self.program.output(xs[-1], self)

    def layer_product(self, hs, l):
        """W^l_t x^{l-1} (0-based ``l``) recovered from the forward pass's pre-activations
        (Program.product_of)."""
        return self.program.product_of(hs, l, self)

    # ---- backward + simultaneous update ----------------------------------------
    def step(self, hs, xs, chi, rate: float = 1.0) -> None:
        """Backpropagate χ (B, d_out) with W_t and update every layer to W_{t+1}, at the
        learning-rate schedule's factor ``rate`` = η_t / η (docs/theory.md §10.9).

        Each layer's backward product is taken before that layer is updated,
        so all gradients use W_t (simultaneous updates).
        """
        self.t += 1
        self._rate, self._xs = rate, xs
        g_x = self.alpha * self.b.matmul(chi, self.W[self.net.L])     # ∂(χᵀf)/∂x^L
        self.program.readout_gradient(self.alpha * chi, self)        # ∇W^{L+1} = α χᵀ x^L
        self.program.backward(hs, g_x, self)

    def gradient_factors(self, hs, dx_top) -> list:
        """[(l, G_l)] for l = L−1, …, 0 (0-based): layer l's W-gradient is G_lᵀ x^l, from
        δx^L = ``dx_top``, with nothing updated.  In a residual block W^l's product enters
        as c W^l x, so G = c δh^l, and the skip adds δh^l to δh^{l−1} (docs/theory.md
        §12.1)."""
        collect = _Factors(self)
        self.program.backward(hs, dx_top, collect)
        return collect.factors

    # ---- the walk's operations on rows (spec/program.py) ---------------------------
    def product(self, l, x):
        return self.b.matmul(x, self.W[l].T)

    def add_bias(self, l, v):
        v += self.bias[l].T
        return v

    def residual(self, h_skip, c, v):
        v *= c                               # a block's output: h = h^{skip} + c (W x + b)
        v += h_skip
        return v

    def pre_activation(self, l, h):
        check_size(h, self._step, l + 1, "pre-activation h", self.bound, self.xp)
        return h

    def activation(self, l, n):
        return self.phi.phi(n, self.b)

    def identity(self, l, n):
        return n

    def readout(self, x):
        return self.b.matmul(x, self.W[-1].T)

    def finish_output(self, f):
        f *= self.alpha
        check_size(f, self._step, None, "output f", self.bound, self.xp)
        return f

    def scale(self, c, g):
        return g * c

    def product_T(self, l, g):
        mm = self.b.matmul
        if self.backprop == "decoupled":
            return mm(g, self.W_tilde[l]) + mm(g, self.W[l]) - mm(g, self.W0[l])
        return mm(g, self.W[l])

    def activation_backward(self, l, n, dx):
        return dx * self.phi.dphi(n, self.b)

    def identity_backward(self, l, n, dx):
        return dx

    def _count(self, kind: str, l: int) -> int:
        """This update's count for the weight or bias of layer l: 0 when the routine's
        phase leaves it frozen (no step, no decay, no state change; docs/theory.md §10.10)."""
        return self.t if self.clocks is None else self.clocks.trains(kind, l, self.t - 1)

    def gradient(self, l, g) -> None:
        """The optimizer's step on W^l, whose W-gradient is gᵀ x^{l−1}."""
        k = self._count("W", l)
        if k:
            self.opt.finite_step(self.W[l], self.state[l], g, self._xs[l], self.const, l, k,
                                 self.b, self._rate)

    def bias_gradient(self, l, g) -> None:
        """The optimizer's step on layer l's bias, a weight with input 1: gradient gᵀ 1."""
        k = self._count("b", l)
        if k:
            ones = self.xp.ones((len(g), 1), dtype=g.dtype)
            self.opt.finite_step(self.bias[l], self.bias_state[l], g, ones, self.const.bias,
                                 l, k, self.b, self._rate)

    def unresidual(self, h_skip, c, v):
        return (v - h_skip) / c

    def remove_bias(self, l, v):
        return v - self.bias[l].T


    # ---- memory ------------------------------------------------------------------
    @staticmethod
    def bytes_needed(net: MLP, width: int, dtype, backprop: str, optimizer,
                     keep_init: bool, B: int = 1, T: int = 1) -> int:
        """Bytes for the weights and the copies a run keeps (W_0, W̃_0) and the optimizer's
        state over T steps of batch B (one copy per slot for SGD and Adam)."""
        n, L = width, net.L
        shapes = [(n, net.d_in)] + [(n, n)] * (L - 1) + [(net.d_out, n)]
        per_copy = sum(a * b for a, b in shapes)
        copies = 1 + (keep_init or backprop == "decoupled")
        hidden_copies = copies + (backprop == "decoupled")
        total = copies * per_copy + (hidden_copies - copies) * (L - 1) * n * n
        item = np.dtype(dtype).itemsize
        state = sum(optimizer.finite_state_bytes(s, l, L + 1, B, T, item)
                    for l, s in enumerate(shapes))
        # one float64 host draw of the largest matrix during initialization (and what the
        # init scheme needs beside it)
        draw = max((8 * a * b + initializations.host_bytes(net.init, (a, b)) for a, b in shapes))
        return total * item + state + draw


class _Factors:
    """A network's operations with the gradient hooks collecting (l, g) instead of moving
    the weights (the backward vectors of an empirical tangent kernel)."""

    def __init__(self, network):
        self._nw, self.factors = network, []

    def __getattr__(self, name):
        return getattr(self._nw, name)

    def gradient(self, l, g) -> None:
        self.factors.append((l, g))

    def bias_gradient(self, l, g) -> None:
        pass
