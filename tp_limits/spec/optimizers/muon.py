"""Muon: momentum, then the matrix sign of the update (docs/theory.md §11).

Per layer l, with G = ∂Loss/∂W^l and the step's learning-rate factor s,

    M ← β M + G,      D = G + β M (Nesterov) or M,
    W^l ← (1 − s δ_l) W^l − s η_l n^{−(a_l + c_l)} κ_l msign(D),

η_l = η lr_mult_l, δ_l = η_l λ the decoupled decay, and κ_l the width-free part of
√(fan_out/fan_in): 1/√d for the input layer, 1 for hidden layers, √d_out for the
readout (μP-Muon in TP4 form has c = 0, so that n^{−a_l} κ_l is √(fan_out/fan_in)
itself).  msign(D) = U Vᵀ for D = U Σ Vᵀ: ``ns_steps`` Newton–Schulz iterations

    X ← a X + (b A + c A²) X,   A = X Xᵀ,   (a, b, c) = (3.4445, −4.7750, 2.0315),

from X₀ = D̃ / (‖D̃‖_F + 1e-7), or (``ns_steps=None``) the exact polar factor with
singular values below ``POLAR_RTOL`` times the largest dropped.  D̃ is D rescaled to
a Θ(1) Frobenius norm (by n^{g_l − a_l − j_l/2}: gradient entries n^{−g_l} in w-units,
j_l width-n sides): msign does not see the scale, and the 1e-7 is then width-free,
as Adam's ε is (§10.3).

Everything here but the transform is shared with the other spectral updates
(spectral_update.py): :class:`BufferSpectral` moves a matrix by T(D) of its momentum
buffer for any transform T of transforms.py, and Muon is the one with T = msign.

**Low rank.** D is a sum of the gradients' outer products, D = Pᵀ C Q with P the
rows of ∂Loss/∂h (k × n_out), Q the layer inputs (k × n_in) and C diagonal (the
momentum weights).  With the Gram matrices G_P = P Pᵀ and G_Q = Q Qᵀ every iterate
is X = Pᵀ K Q for a k × k core (the transform's ``core``, transforms.py), so a
step never forms an n × n product of two dense matrices: O(n k² + k³) for the core and
O(n_out n_in k) to apply it.  Where a side is not wider than k (the input layer and the
readout: d, d_out) the update is formed densely and the iteration runs on the small
side's Gram.  The limit engines use the same cores with the Gram matrices of the
particles (§11).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..checks import check_bool, check_choice, check_int, finite_non_negative, unit_interval
from ..initializations import shape_factor
from .adam import Adam, _betas
from .base import CoordinateRule, Optimizer, decay_field, hyperparameter
from .transforms import Msign, _host, _like

#: momentum weights below this times the largest are dropped from the history
PRUNE = 1e-16
#: the most Newton–Schulz steps one update may take
MAX_NS_STEPS = 100
VECTOR_LAYERS = ("muon", "adam")


# -- the finite network's state: the gradients' factors, weighted --------------------------
class MuonHistory:
    """The momentum buffer M = Σ_s w_s G_sᵀ X_s of one weight matrix, kept as its factors:
    rows P (k, n_out), Q (k, n_in) and weights w (k,), with the Gram matrices P Pᵀ and
    Q Qᵀ grown a block per step.  Rows whose weight falls below PRUNE times the largest
    are dropped (momentum forgets them)."""

    def __init__(self, n_out: int, n_in: int, xp):
        self.xp = xp
        self.P, self.Q = xp.zeros((0, n_out)), xp.zeros((0, n_in))
        self.w = np.zeros(0)
        self.last = 0                                # rows of the newest push
        self.GP, self.GQ = np.zeros((0, 0)), np.zeros((0, 0))

    def push(self, G, X, beta: float) -> None:
        """M ← β M + Gᵀ X."""
        xp = self.xp
        self.last = len(G)
        self.w = np.concatenate([beta * self.w, np.ones(len(G))])
        self.GP = _grown(self.GP, _host(self.P @ G.T), _host(G @ G.T))
        self.GQ = _grown(self.GQ, _host(self.Q @ X.T), _host(X @ X.T))
        self.P, self.Q = xp.concatenate([self.P, G]), xp.concatenate([self.Q, X])
        keep = self.w > PRUNE * self.w.max()
        if not keep.all():
            idx = np.flatnonzero(keep)
            self.w, self.GP, self.GQ = self.w[idx], self.GP[np.ix_(idx, idx)], \
                self.GQ[np.ix_(idx, idx)]
            self.P, self.Q = self.P[xp.asarray(idx)], self.Q[xp.asarray(idx)]

    def __len__(self):
        return len(self.w)


def _grown(G, cross, block):
    k, m = cross.shape
    out = np.empty((k + m, k + m))
    out[:k, :k], out[:k, k:], out[k:, :k], out[k:, k:] = G, cross, cross.T, block
    return out


class MuonHyper(NamedTuple):
    """Muon's hidden matrices are not moved coordinate by coordinate (no coordinate rule)."""


MUON_RULE = CoordinateRule("muon", (), (), None, MuonHyper)


def _ns_steps(v, name):
    """Newton–Schulz steps in 1..MAX_NS_STEPS, or None / 'exact' for the exact polar factor."""
    return None if v is None or v == "exact" else check_int(v, name, 1, MAX_NS_STEPS)


def _vector_layers(v, name):
    return check_choice(v, name, VECTOR_LAYERS)


class BufferSpectral(Optimizer):
    """A matrix moved by a spectral transform T of its momentum buffer (docs/theory.md §11):

        M ← β M + G,   D = G + β M (Nesterov) or M,
        W^l ← (1 − s δ_l) W^l − s η_l n^{−(a_l + c_l)} κ_l T(D),

    every part of the optimizer protocol written once.  A subclass (a frozen dataclass)
    has ``momentum``, ``nesterov``, ``weight_decay``, ``vector_layers`` ('adam' puts
    Adam, with ``adam_betas`` and ``adam_eps``, on the input layer and the readout) and
    ``spectral``, the transform (transforms.py): :class:`Muon` with msign,
    :class:`~.spectral_update.SpectralUpdate` with any."""

    @property
    def exponents(self) -> str:
        return "muon_adam" if self.vector_layers == "adam" else "muon"

    @property
    def linear(self) -> bool:
        return False

    @property
    def plain(self) -> bool:
        return False

    @property
    def rule(self):
        return MUON_RULE

    @property
    def adam(self) -> Adam:
        """The Adam of the vector layers (vector_layers='adam')."""
        return Adam(betas=self.adam_betas, eps=self.adam_eps, weight_decay=self.weight_decay)

    def coordinate(self, lr, alpha, shrink, t, rate=1.0):
        raise TypeError(f"{type(self).__name__} moves whole matrices ({self.spectral} of the "
                        "buffer), not coordinates one by one")

    # -- composition: the buffer's own update, and the optimizer of the vector layers -----
    @property
    def vectors(self):
        """The optimizer of the input layer and the readout: the buffer's own update (its
        rows in the limit), or Adam with ``vector_layers='adam'``."""
        return self.adam if self.vector_layers == "adam" else BufferUpdate(self)

    def layer_optimizer(self, l: int, layers: int):
        """What moves layer l of ``layers``: the vector layers' optimizer for the input layer
        and the readout, the buffer's own update for the hidden matrices."""
        return self.vectors if l in (0, layers - 1) else BufferUpdate(self)

    # -- the finite network -------------------------------------------------------------
    def finite_state(self, W, l: int, layers: int, backend) -> tuple:
        return self.layer_optimizer(l, layers).finite_state(W, l, layers, backend)

    def finite_step(self, W, state, G, X, const, l, t, backend, rate=1.0):
        """W ← (1 − s δ_l) W − s η_l n^{−(a_l + c_l)} κ_l T(D) (see the module docstring);
        the vector layers of vector_layers='adam' take Adam's step."""
        return self.layer_optimizer(l, len(const.lr)).finite_step(W, state, G, X, const, l, t,
                                                                   backend, rate)

    def direction_matrix(self, hist: MuonHistory, const, l: int, xp):
        """T(D) (n_out, n_in) of the buffer's update D = Pᵀ diag(w_D) Q."""
        if self.nesterov:                            # D = G + β M
            w = self.momentum * hist.w
            w[-hist.last:] += 1.0
        else:
            w = hist.w                               # D = M
        n_out, n_in = hist.P.shape[1], hist.Q.shape[1]
        scale = _norm_scale(const, l, n_out, n_in)
        if min(n_out, n_in) <= len(hist):            # a side no wider than the rank: dense
            D = hist.P.T @ (xp.asarray(w)[:, None] * hist.Q)
            return self.spectral.dense(D, scale, xp)
        K = self.spectral.core(np.diag(w), hist.GP, hist.GQ, scale)
        return hist.P.T @ (xp.asarray(K) @ hist.Q)

    def finite_state_rows(self, B: int, T: int) -> int:
        """The most rows a history keeps: B per step until momentum forgets them."""
        if self.momentum == 0.0:
            return B
        horizon = int(np.ceil(np.log(PRUNE) / np.log(self.momentum))) + 1
        return B * min(T, horizon)

    def finite_state_bytes(self, shape, l, layers, B, T, itemsize):
        """The history's rows P, Q and their Gram matrices (and the update, formed densely
        once per step); Adam's moments on the vector layers of vector_layers='adam'."""
        return self.layer_optimizer(l, layers).finite_state_bytes(shape, l, layers, B, T,
                                                                   itemsize)

    # -- the limit (docs/theory.md §11.4) -------------------------------------------------
    @property
    def coordinatewise(self) -> bool:
        return False

    @property
    def pair_matrix(self) -> bool:
        return True

    @property
    def exact_linear(self) -> bool:
        # T moves the vector layers linearly given their Gram; Adam on them does not
        return self.vectors.exact_linear

    def particle_state(self, Z, layer):
        # the coordinates particles carry are the vector layers' (input and readout)
        return self.vectors.particle_state(Z, layer)

    def move_particles(self, Z, state, left, right, lr, alpha, shrink, t, rate, layer,
                       moments=None):
        return self.vectors.move_particles(Z, state, left, right, lr, alpha, shrink, t, rate,
                                           layer, moments)

    def init_factor(self, shrink, T, rates=None, counts=None):
        """ρ_t = Π_{s<t} (1 − s_s δ) over the steps s that train the matrix (``counts``
        nonzero; all without): decoupled decay on W_0."""
        r = np.ones(T) if rates is None else np.asarray(rates, float)
        if counts is not None:
            r = r * (np.asarray(counts) > 0)
        return np.concatenate([[1.0], np.cumprod(1.0 - r * shrink)])

    def buffer_weights(self, steps, t: int) -> np.ndarray:
        """The weights of stored pairs from ``steps`` in D at update t (0-based): β^{t−s}
        (heavy ball), β^{t−s+1} + [s = t] (Nesterov)."""
        steps = np.asarray(steps)
        w = self.momentum ** (t - steps).astype(float)
        if self.nesterov:
            w = self.momentum * w + (steps == t)
        return w

    def move_pairs(self, omega, GP, GQ, t: int, B: int, rate: float, lr: float,
                   shrink: float, xp=np, counts=None) -> None:
        """Ω ← (1 − s δ) Ω + s η_l K̂ in place for a hidden matrix after update t (0-based):
        K̂ the core of its buffer over the k stored pairs (B per step) whose limit Gram
        matrices are G_P (backward vectors) and G_Q (forward vectors) (§11.4); Ω, G_P and
        G_Q are arrays of ``xp`` (on a GPU the k × k work stays on the device).

        ``counts`` (the matrix's update count per step, spec/phases.py; None: every step
        trains it): at a frozen step nothing moves, and the buffer holds the trained steps'
        pairs alone, weighted by the updates between them (docs/theory.md §10.10)."""
        k = len(GP)
        steps = np.arange(k) // B
        if counts is None:
            weights = self.buffer_weights(steps, t)
        else:
            c = np.asarray(counts)
            if not c[t]:
                return
            weights = np.where(c[steps] > 0, self.buffer_weights(c[steps] - 1, c[t] - 1), 0.0)
        K = self.hidden_core(weights, GP, GQ, xp)
        if rate * shrink:
            omega[:k, :k] *= 1.0 - rate * shrink
        omega[:k, :k] += (rate * lr) * K

    def hidden_core(self, weights, GP, GQ, xp=np):
        """K̂ with T(D) = (1/n) Pᵀ K̂ Q for D = (1/n) Pᵀ diag(weights) Q and the limit
        Gram matrices G_P = E[Z^{δh_i} Z^{δh_j}], G_Q = E[Z^{x_i} Z^{x_j}] (the cores are
        unchanged by the 1/n: every transform is a function of the singular values
        relative to each other, §11.7); rows of weight below PRUNE times the largest are
        left out.  ``weights`` on the host; G_P, G_Q and K̂ arrays of ``xp``."""
        keep = np.flatnonzero(weights > PRUNE * weights.max(initial=0.0))
        K = xp.zeros((len(weights), len(weights)))
        if len(keep):
            ix = xp.ix_(xp.asarray(keep), xp.asarray(keep))
            C = xp.asarray(np.diag(weights[keep]))
            K[ix] = self.spectral.core(C, GP[ix], GQ[ix], xp=xp)
        return K

    def kernel_refusal(self, regime: str) -> str | None:
        return (f"{self} in the {regime} regime: {self.spectral} of the buffer is not linear "
                "in the gradients; its limit there is not kernel gradient descent "
                "(docs/theory.md §11); use tp.mup(L, optimizer='muon')")


@dataclass(frozen=True)
class Muon(BufferSpectral):
    """Muon: momentum then the matrix sign, scaled by √(fan_out/fan_in) (docs/theory.md §11).

    ``momentum`` β ∈ [0, 1); ``nesterov``: D = G + β M (else M); ``ns_steps``: Newton–
    Schulz iterations (None: the exact polar factor); ``weight_decay`` λ: decoupled,
    W ← (1 − η_l λ) W per step (width-free, §10.1); ``vector_layers``: 'muon' (every
    layer) or 'adam' (Adam on the input layer and the readout, with ``adam_betas`` and
    ``adam_eps``; the parametrization then follows the 'muon_adam' exponents).
    """

    momentum: float = hyperparameter(0.95, unit_interval, "Muon's momentum β in [0, 1)",
                                     toml="muon_momentum")
    nesterov: bool = hyperparameter(True, check_bool,
                                    "Muon: Nesterov's momentum (D = G + β M)",
                                    toml="muon_nesterov", kind="bool")
    ns_steps: int | None = hyperparameter(5, _ns_steps, "Muon: Newton–Schulz iterations "
                                          "(None or 'exact': the exact polar factor)",
                                          kind="int|str")
    weight_decay: float = decay_field()
    vector_layers: str = hyperparameter("muon", _vector_layers,
                                        "Muon: 'muon' on every layer, or 'adam' on the input "
                                        "layer and the readout", kind="str")
    adam_betas: tuple = hyperparameter((0.9, 0.999), _betas, "Adam's (β₁, β₂)",
                                       kind="numbers")
    adam_eps: float = hyperparameter(1e-8, finite_non_negative,
                                     "Adam's ε in width-free units (docs/theory.md §10.3)")

    name = "muon"

    @classmethod
    def for_exponents(cls, kind: str):
        return {"muon": cls(), "muon_adam": cls(vector_layers="adam")}.get(kind)

    @property
    def spectral(self) -> Msign:
        return Msign(self.ns_steps)


class BufferUpdate:
    """The buffer's own update on one layer — momentum, then the spectral transform of the
    buffer — as the optimizer of that layer (a :class:`BufferSpectral` composes it with
    the vector layers' optimizer): the finite network's step from its history of
    factors, and in the limit the move of the vector layers' particle coordinates."""

    exact_linear = True

    def __init__(self, opt: BufferSpectral):
        self.opt = opt

    def finite_state(self, W, l: int, layers: int, backend) -> tuple:
        return (MuonHistory(W.shape[0], W.shape[1], backend.xp),)

    def finite_step(self, W, state, G, X, const, l, t, backend, rate=1.0):
        """W ← (1 − s δ_l) W − s η_l n^{−(a_l + c_l)} κ_l T(D)."""
        opt = self.opt
        (hist,) = state
        hist.push(G, X, opt.momentum)
        spectral_step(W, opt.direction_matrix(hist, const, l, backend.xp), opt, const, l, rate)

    def finite_state_bytes(self, shape, l, layers, B, T, itemsize):
        k = self.opt.finite_state_rows(B, T)
        return k * (shape[0] + shape[1]) * itemsize + 16.0 * k * k + \
            shape[0] * shape[1] * itemsize

    def particle_state(self, Z, layer):
        return (Z * 0.0,)

    def move_particles(self, Z, state, left, right, lr, alpha, shrink, t, rate, layer,
                       moments=None):
        """The input layer's rows Z^U (N, d) or the readout's columns Z^{nV} (N, d_out):
        with the gradient rows g = α left @ right, m ← β m + g, D = g + β m (or m), and
        Z ← (1 − s δ) Z − s lr κ D R with R the transform's rows of S = E[D Dᵀ] (k × k;
        msign: S^{−1/2}, or the Newton–Schulz polynomial of S; §11.4, §11.7)."""
        opt = self.opt
        (m,) = state
        g = alpha * (left @ right)
        m = opt.momentum * m + g
        D = g + opt.momentum * m if opt.nesterov else m
        return move_rows(Z, D, opt.spectral, lr, shrink, rate, layer, moments), (m,)


def spectral_step(W, U, opt, const, l: int, rate: float) -> None:
    """W ← (1 − s δ_l) W − s η_l n^{−(a_l + c_l)} κ_l U in place, U a transformed direction
    of spectral norm one (the buffer's, or Adam's dense one in spectral_update.py)."""
    shrink = opt.shrinks(const.decay)[l] * rate
    if shrink:
        W *= 1.0 - shrink
    step = rate * const.adam_lr[l] * const.w_scale[l] * shape_factor(l, len(const.lr), W.shape)
    W -= step * U


def move_rows(Z, D, spectral, lr, shrink, rate, layer: str, moments=None):
    """Z ← (1 − s δ) Z − s lr κ D R for particle rows Z and their directions D (N, k): R the
    transform's rows of S = E[D Dᵀ] (``moments(D, D)``, default the mean over the rows),
    κ = k^{−1/2} for the input layer and k^{1/2} for the readout (§11.4, §11.7)."""
    S = _host(D.T @ D) / len(D) if moments is None else moments(D, D)
    R = spectral.rows(S)
    k = Z.shape[1]
    kappa = k ** -0.5 if layer == "input" else k ** 0.5
    return (1.0 - rate * shrink) * Z - (rate * lr * kappa) * (D @ _like(R, D))


def _norm_scale(const, l: int, n_out: int, n_in: int) -> float:
    """n^{g_l − a_l − j_l/2} (see the module docstring): D̃ = scale · D has a Θ(1) Frobenius
    norm at every width."""
    width = const.width
    sides = (n_out == width) + (n_in == width)
    return const.w_scale[l] / const.eps_scale[l] * width ** (-sides / 2)
