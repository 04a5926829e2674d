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

**Low rank.** D is a sum of the gradients' outer products, D = Pᵀ C Q with P the
rows of ∂Loss/∂h (k × n_out), Q the layer inputs (k × n_in) and C diagonal (the
momentum weights).  With the Gram matrices G_P = P Pᵀ and G_Q = Q Qᵀ every iterate
is X = Pᵀ K Q for a k × k core (:func:`newton_schulz_core`, :func:`polar_core`), so a
step never forms an n × n product of two dense matrices: O(n k² + k³) for the core and
O(n_out n_in k) to apply it.  Where a side is not wider than k (the input layer and the
readout: d, d_out) the update is formed densely and the iteration runs on the small
side's Gram.  The limit engines use the same core functions with the Gram matrices of
the particles (§11).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..checks import check_bool, check_choice, check_int, finite_non_negative, unit_interval
from ..initializations import shape_factor
from .adam import Adam, _betas
from .base import CoordinateRule, Optimizer, decay_field, hyperparameter

#: Newton–Schulz coefficients (a, b, c) of the quintic iteration
NS_COEFFS = (3.4445, -4.7750, 2.0315)
#: the regularizer of X₀ = D̃ / (‖D̃‖_F + NS_EPS)
NS_EPS = 1e-7
#: the exact polar factor drops singular values below this times the largest: the low-rank
#: routes work with Gram matrices, which square the singular values, and float64 Grams
#: resolve them to about 1e-7 of the largest
POLAR_RTOL = 1e-6
#: momentum weights below this times the largest are dropped from the history
PRUNE = 1e-16
#: the most Newton–Schulz steps one update may take
MAX_NS_STEPS = 100
VECTOR_LAYERS = ("muon", "adam")


# -- msign of D = Pᵀ C Q through k x k cores -------------------------------------------------
def frobenius_core(K, GP, GQ, xp=np) -> float:
    """‖Pᵀ K Q‖_F = √tr(Kᵀ G_P K G_Q) = √Σ (G_P K) ⊙ (K G_Q) (G_P symmetric); for a
    diagonal K = diag(w) the O(k²) form √(wᵀ (G_P ⊙ G_Q) w).  The cores take the array
    module of their Gram matrices (``xp``: NumPy, or CuPy for a limit run on a GPU)."""
    w = xp.diagonal(K)
    if int(xp.count_nonzero(K)) == int(xp.count_nonzero(w)):
        tr = w @ (GP * GQ) @ w
    else:
        tr = xp.sum((GP @ K) * (K @ GQ))
    return float(xp.sqrt(max(float(tr), 0.0)))


def newton_schulz_core(C, GP, GQ, steps: int, scale: float = 1.0, xp=np):
    """K with Pᵀ K Q = the Newton–Schulz msign of D = Pᵀ C Q, from the Gram matrices
    G_P = P Pᵀ, G_Q = Q Qᵀ: X = Pᵀ K Q gives X Xᵀ X = Pᵀ (K G_Q Kᵀ G_P) K Q, so each
    iteration is K ← (a I + b A + c A²) K with A = K G_Q Kᵀ G_P.  ``scale`` rescales D
    to D̃ (only the 1e-7 sees it)."""
    a, b, c = NS_COEFFS
    K = C / (scale * frobenius_core(C, GP, GQ, xp) + NS_EPS) * scale
    for _ in range(steps):
        A = K @ GQ @ K.T @ GP
        K = a * K + (b * A + c * (A @ A)) @ K
    return K


def _largest(v) -> float:
    """The largest entry of v, at least 0 (0 for an empty v)."""
    return max(float(v.max()), 0.0) if v.size else 0.0


def _sqrt_and_pinv_sqrt(G, rtol, xp=np):
    """G^{1/2} and the pseudo-inverse of G^{1/2} (eigenvalues below rtol · max dropped)."""
    w, U = xp.linalg.eigh((G + G.T) / 2)
    keep = w > rtol * _largest(w)
    r = xp.sqrt(xp.where(keep, w, 0.0))
    inv = xp.where(keep, 1.0 / xp.where(keep, r, 1.0), 0.0)
    return (U * r) @ U.T, (U * inv) @ U.T


def polar_core(C, GP, GQ, rtol: float = POLAR_RTOL, xp=np):
    """K with Pᵀ K Q = U Vᵀ, the exact polar factor of D = Pᵀ C Q: with Φ = Pᵀ G_P^{−1/2}
    and Ψ = Qᵀ G_Q^{−1/2} orthonormal, D = Φ S Ψᵀ, S = G_P^{1/2} C G_Q^{1/2}, so
    msign(D) = Φ msign(S) Ψᵀ (singular values of S below rtol times the largest, and
    Gram eigenvalues below rtol², dropped)."""
    sP, iP = _sqrt_and_pinv_sqrt(GP, rtol ** 2, xp)
    sQ, iQ = _sqrt_and_pinv_sqrt(GQ, rtol ** 2, xp)
    U, sv, Vt = xp.linalg.svd(sP @ C @ sQ)
    keep = sv > rtol * (float(sv.max()) if sv.size else 0.0)
    return iP @ (U[:, keep] @ Vt[keep]) @ iQ


def newton_schulz_dense(D, steps: int, scale: float = 1.0, xp=np):
    """The Newton–Schulz msign of a dense D, iterated on its smaller side's Gram (X ←
    X (a I + b Y + c Y²), Y = Xᵀ X, for a tall X; the transpose for a wide one)."""
    a, b, c = NS_COEFFS
    wide = D.shape[0] < D.shape[1]
    X = D.T if wide else D
    X = X / (scale * float(xp.linalg.norm(X)) + NS_EPS) * scale
    for _ in range(steps):
        Y = X.T @ X
        X = X @ (a * xp.eye(len(Y)) + b * Y + c * (Y @ Y))
    return X.T if wide else X


def polar_dense(D, rtol: float = POLAR_RTOL, xp=np):
    """U Vᵀ of a dense D through its smaller side's Gram: D (DᵀD)^{+1/2} for a tall D."""
    wide = D.shape[0] < D.shape[1]
    X = D.T if wide else D
    _, inv = _sqrt_and_pinv_sqrt(_host(X.T @ X), rtol ** 2)
    out = X @ xp.asarray(inv)
    return out.T if wide else out


def _host(a):
    return a.get() if hasattr(a, "get") else a


def _like(a, ref):
    """The host array ``a`` where ``ref`` lives (NumPy, or a CuPy device)."""
    if isinstance(ref, np.ndarray):
        return a
    import cupy                      # only reached with device arrays
    return cupy.asarray(a)


def polar_rows(S, rtol: float = POLAR_RTOL):
    """R with rows D R the polar factor of a tall D (N, k) whose S = E[D Dᵀ]: S^{+−1/2}."""
    return _sqrt_and_pinv_sqrt(S, rtol ** 2)[1]


def newton_schulz_rows(S, steps: int):
    """R with D R the Newton–Schulz iterate of a tall D in particle units: X₀ = D/(√tr S +
    10⁻⁷) has Gram Y₀ = S/(√tr S + 10⁻⁷)², and X ← X P(Y), Y ← P Y P with
    P = a I + b Y + c Y² (P commutes with Y)."""
    a, b, c = NS_COEFFS
    norm = float(np.sqrt(max(np.trace(S), 0.0))) + NS_EPS
    R = np.eye(len(S)) / norm
    Y = S / norm ** 2
    for _ in range(steps):
        P = a * np.eye(len(S)) + b * Y + c * (Y @ Y)
        R, Y = R @ P, P @ Y @ P
    return R


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


@dataclass(frozen=True)
class Muon(Optimizer):
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

    @property
    def exponents(self) -> str:
        return {"muon": "muon", "adam": "muon_adam"}[self.vector_layers]

    @classmethod
    def for_exponents(cls, kind: str):
        return {"muon": cls(), "muon_adam": cls(vector_layers="adam")}.get(kind)

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
        raise TypeError("Muon moves whole matrices (msign), not coordinates one by one")

    # -- composition: Muon's own update, and the optimizer of the vector layers -----------
    @property
    def vectors(self):
        """The optimizer of the input layer and the readout: Muon's own update (its
        msign rows in the limit), or Adam with ``vector_layers='adam'``."""
        return {"muon": MsignUpdate(self), "adam": self.adam}[self.vector_layers]

    def layer_optimizer(self, l: int, layers: int):
        """What moves layer l of ``layers``: the vector layers' optimizer for the input layer
        and the readout, Muon's own update for the hidden matrices."""
        return self.vectors if l in (0, layers - 1) else MsignUpdate(self)

    # -- the finite network -------------------------------------------------------------
    def finite_state(self, W, l: int, layers: int, backend) -> tuple:
        return self.layer_optimizer(l, layers).finite_state(W, l, layers, backend)

    def finite_step(self, W, state, G, X, const, l, t, backend, rate=1.0):
        """W ← (1 − s δ_l) W − s η_l n^{−(a_l + c_l)} κ_l msign(D) (see the module docstring);
        the vector layers of vector_layers='adam' take Adam's step."""
        return self.layer_optimizer(l, len(const.lr)).finite_step(W, state, G, X, const, l, t,
                                                                   backend, rate)

    def direction_matrix(self, hist: MuonHistory, const, l: int, xp):
        """msign(D) (n_out, n_in) of the buffer's update D = Pᵀ diag(w_D) Q."""
        if self.nesterov:                            # D = G + β M
            w = self.momentum * hist.w
            w[-hist.last:] += 1.0
        else:
            w = hist.w                               # D = M
        n_out, n_in = hist.P.shape[1], hist.Q.shape[1]
        scale = _norm_scale(const, l, n_out, n_in)
        if min(n_out, n_in) <= len(hist):            # a side no wider than the rank: dense
            D = hist.P.T @ (xp.asarray(w)[:, None] * hist.Q)
            if self.ns_steps is None:
                return polar_dense(D, xp=xp)
            return newton_schulz_dense(D, self.ns_steps, scale, xp)
        C = np.diag(w)
        K = (polar_core(C, hist.GP, hist.GQ) if self.ns_steps is None
             else newton_schulz_core(C, hist.GP, hist.GQ, self.ns_steps, scale))
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
        # msign moves the vector layers linearly given their Gram; Adam on them does not
        return self.vectors.exact_linear

    def particle_state(self, Z, layer):
        # the coordinates particles carry are the vector layers' (input and readout)
        return self.vectors.particle_state(Z, layer)

    def move_particles(self, Z, state, left, right, lr, alpha, shrink, t, rate, layer,
                       moments=None):
        return self.vectors.move_particles(Z, state, left, right, lr, alpha, shrink, t, rate,
                                           layer, moments)

    def init_factor(self, shrink, T, rates=None):
        """ρ_t = Π_{s<t} (1 − s_s δ): decoupled decay on W_0."""
        r = np.ones(T) if rates is None else np.asarray(rates, float)
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
                   shrink: float, xp=np) -> None:
        """Ω ← (1 − s δ) Ω + s η_l K̂ in place for a hidden matrix after update t (0-based):
        K̂ the core of its buffer over the k stored pairs (B per step) whose limit Gram
        matrices are G_P (backward vectors) and G_Q (forward vectors) (§11.4); Ω, G_P and
        G_Q are arrays of ``xp`` (on a GPU the k × k work stays on the device)."""
        k = len(GP)
        K = self.hidden_core(self.buffer_weights(np.arange(k) // B, t), GP, GQ, xp)
        if rate * shrink:
            omega[:k, :k] *= 1.0 - rate * shrink
        omega[:k, :k] += (rate * lr) * K

    def hidden_core(self, weights, GP, GQ, xp=np):
        """K̂ with msign(D) = (1/n) Pᵀ K̂ Q for D = (1/n) Pᵀ diag(weights) Q and the limit
        Gram matrices G_P = E[Z^{δh_i} Z^{δh_j}], G_Q = E[Z^{x_i} Z^{x_j}] (the cores of
        §11.3 are unchanged by the 1/n); rows of weight below PRUNE times the largest
        are left out.  ``weights`` on the host; G_P, G_Q and K̂ arrays of ``xp``."""
        keep = np.flatnonzero(weights > PRUNE * weights.max(initial=0.0))
        K = xp.zeros((len(weights), len(weights)))
        if len(keep):
            ix = xp.ix_(xp.asarray(keep), xp.asarray(keep))
            C = xp.asarray(np.diag(weights[keep]))
            K[ix] = (polar_core(C, GP[ix], GQ[ix], xp=xp) if self.ns_steps is None
                     else newton_schulz_core(C, GP[ix], GQ[ix], self.ns_steps, xp=xp))
        return K

    def kernel_refusal(self, regime: str) -> str | None:
        return (f"{self} in the {regime} regime: msign(D) is not linear in the gradients; "
                "its limit there is not kernel gradient descent (docs/theory.md §11); use "
                "tp.mup(L, optimizer='muon')")


class MsignUpdate:
    """Muon's own update on one layer — momentum, then the matrix sign of the buffer — as
    the optimizer of that layer (Muon composes it with the vector layers' optimizer):
    the finite network's step from its history of factors, and in the limit the move of
    the vector layers' particle coordinates."""

    exact_linear = True

    def __init__(self, muon: Muon):
        self.muon = muon

    def finite_state(self, W, l: int, layers: int, backend) -> tuple:
        return (MuonHistory(W.shape[0], W.shape[1], backend.xp),)

    def finite_step(self, W, state, G, X, const, l, t, backend, rate=1.0):
        """W ← (1 − s δ_l) W − s η_l n^{−(a_l + c_l)} κ_l msign(D)."""
        mu = self.muon
        layers = len(const.lr)
        (hist,) = state
        hist.push(G, X, mu.momentum)
        U = mu.direction_matrix(hist, const, l, backend.xp)
        shrink = mu.shrinks(const.decay)[l] * rate
        if shrink:
            W *= 1.0 - shrink
        step = rate * const.adam_lr[l] * const.w_scale[l] * shape_factor(l, layers, W.shape)
        W -= step * U

    def finite_state_bytes(self, shape, l, layers, B, T, itemsize):
        k = self.muon.finite_state_rows(B, T)
        return k * (shape[0] + shape[1]) * itemsize + 16.0 * k * k + \
            shape[0] * shape[1] * itemsize

    def particle_state(self, Z, layer):
        return (Z * 0.0,)

    def move_particles(self, Z, state, left, right, lr, alpha, shrink, t, rate, layer,
                       moments=None):
        """The input layer's rows Z^U (N, d) or the readout's columns Z^{nV} (N, d_out):
        with the gradient rows g = α left @ right, m ← β m + g, D = g + β m (or m), and
        Z ← (1 − s δ) Z − s lr κ D R with R = S^{−1/2} (S = E[D Dᵀ], k × k: the polar
        factor's rows in the limit) or the Newton–Schulz polynomial of S."""
        mu = self.muon
        (m,) = state
        g = alpha * (left @ right)
        m = mu.momentum * m + g
        D = g + mu.momentum * m if mu.nesterov else m
        S = _host(D.T @ D) / len(D) if moments is None else moments(D, D)
        R = polar_rows(S) if mu.ns_steps is None else newton_schulz_rows(S, mu.ns_steps)
        k = Z.shape[1]
        kappa = k ** -0.5 if layer == "input" else k ** 0.5
        Z = (1.0 - rate * shrink) * Z - (rate * lr * kappa) * (D @ _like(R, D))
        return Z, (m,)


def _norm_scale(const, l: int, n_out: int, n_in: int) -> float:
    """n^{g_l − a_l − j_l/2} (see the module docstring): D̃ = scale · D has a Θ(1) Frobenius
    norm at every width."""
    width = const.width
    sides = (n_out == width) + (n_in == width)
    return const.w_scale[l] / const.eps_scale[l] * width ** (-sides / 2)

