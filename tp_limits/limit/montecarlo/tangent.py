"""Forward-mode (tangent) Ż estimator for the deep Monte Carlo engine (docs/theory.md §4).

Every particle carries, beside each variable Z, its partial derivatives with
respect to the training hats it depends on; the Ż coefficients are then the
particle means of those derivatives — exact given the particles, with no
regression (docs/theory.md §4.4).

**Sparsity** (docs/theory.md §4.4).  A hat is a base variable of its own, so the
variables of hidden layer m (h^m, x^m, δx^m, δh^m) depend only on the forward
hats of W^m (family F^m, m >= 2) and on the backward hats of W^{m+1} (family
G^{m+1}, m <= L-1); Z^U enters layer 1 and depends on G^2, Z^{nV} enters layer
L and depends on F^L.  Layer m's derivative arrays therefore have
D_m = cap·[m >= 2] + cap·[m <= L-1] columns (cap = B·T training items per
family).

**Active columns.**  Columns are ordered by step: with both families, step s
owns columns 2Bs .. 2Bs+2B−1, first F^m's B hats of that step, then
G^{m+1}'s; with one family, step s owns Bs .. Bs+B−1.  A derivative can be
nonzero only in columns of hats drawn so far, which are then a prefix, so
every array is kept and computed only as wide as its prefix (axis 1 of a
(rows, width, N) array).  At step t of T that is about 2Bt columns instead
of 2BT: the products over stored derivatives, which dominate, cost about a
third of the full-width ones over a run.

With J_v the (D, N) derivative array of a vector v (axis 0: hat, axis 1: particle):

    forward   Ż^{W^l x} = Σ_j σ_l² mean(J_x[G^l_j]) Z^{δh^l_j}           (J_x: layer l-1)
    backward  Ż^{W^lᵀ δh} = Σ_e σ_l² mean(J_δh[F^l_e]) Z^{x^{l-1}_e}     (J_δh: layer l)

and a new vector's derivative is the same linear combination of the stored
vectors' derivatives plus the unit column of its own hat (training items
only: nothing depends on an evaluation hat).  φ and the products follow the
chain rule:  J_φ(h) = φ'(h) J_h,  J_{δx φ'(h)} = φ'(h) J_δx + δx φ''(h) J_h.

Cost: memory O(N·L·(B·T)²), time O(N·L·B²·T³·(B+E)) — the reference
estimator for short runs; ``zdot="stein"`` scales as T² (docs/theory.md §4.4).
"""
from __future__ import annotations

import numpy as np


def tangent_bytes_per_particle(L: int, d: int, do: int, B: int, T: int, E: int,
                               itemsize: int = 8) -> float:
    """Bytes per particle of the derivative arrays (stored vectors + one pass's temporaries)."""
    cap = B * T
    D = [cap * ((m >= 2) + (m <= L - 1)) for m in range(1, L + 1)]
    stored = sum(cap * (D[l - 2] + D[l - 1]) for l in range(2, L + 1))
    params = d * D[0] + do * D[-1]
    passes = 4 * max(B, E) * max(D)          # J_h, J_x, J_δx, J_δh of one block
    return itemsize * (stored + params + passes + L * max(B, E) * max(D))


class Tangents:
    """Derivative arrays of the stored vectors, Z^U and Z^{nV}, and their propagation.

    Layers are numbered 1..L as in the docs; families F^l, G^l for l = 2..L.
    Arrays are allocated at full width D_m and read only up to their active
    prefix; a temporary (rows, width, N) is as wide as what it depends on.
    """

    def __init__(self, N: int, L: int, d: int, do: int, cap: int, sig: tuple, B: int, xp=np):
        self.xp = xp
        self.B = B
        self.D = {m: cap * ((m >= 2) + (m <= L - 1)) for m in range(1, L + 1)}
        self.both = {m: 2 <= m <= L - 1 for m in range(1, L + 1)}
        self.s2 = {l: sig[l - 1] ** 2 for l in range(2, L + 1)}
        self.JU = xp.zeros((d, self.D[1], N))
        self.JV = xp.zeros((do, self.D[L], N))
        self.Jfwd = {l: xp.zeros((cap, self.D[l - 1], N)) for l in range(2, L + 1)}
        self.Jbwd = {l: xp.zeros((cap, self.D[l], N)) for l in range(2, L + 1)}
        # active width (columns in use) of each persistent array
        self.width = {"U": 0, "V": 0, **{("f", l): 0 for l in range(2, L + 1)},
                      **{("b", l): 0 for l in range(2, L + 1)}}

    # -- columns ---------------------------------------------------------------------
    def col_F(self, m: int, j):
        """Column of F^m's j-th hat (j = B s + i: item i of step s) in layer m's arrays."""
        B = self.B
        return 2 * B * (j // B) + j % B if self.both[m] else j

    def col_G(self, m: int, j):
        """Column of G^{m+1}'s j-th hat in layer m's arrays."""
        B = self.B
        return 2 * B * (j // B) + B + j % B if self.both[m] else j

    def _widen(self, J, width: int):
        """J with at least ``width`` columns (the new ones zero)."""
        if J.shape[1] >= width:
            return J
        out = self.xp.zeros((J.shape[0], width, J.shape[2]))
        out[:, :J.shape[1]] = J
        return out

    def _means(self, J, cols):
        """(k, m): particle means of the columns ``cols`` (ascending) of J (m, width, N)."""
        if len(cols) == 0:
            return self.xp.zeros((0, J.shape[0]))
        J = self._widen(J, int(cols[-1]) + 1)
        return J[:, self.xp.asarray(cols)].mean(axis=2).T

    # -- propagation ---------------------------------------------------------------
    def input(self, Xin):
        """J of h^1 = Z^U ξ for each row ξ of Xin: (m, width, N)."""
        return self.xp.tensordot(Xin, self.JU[:, :self.width["U"]], axes=(1, 0))

    @staticmethod
    def times(J, a):
        """J of v·a for a deterministic-coefficient-free product with a (m, N) array a."""
        return J * a[:, None, :]

    def product(self, J_dx, dphi, dx, ddphi, J_h):
        """J of δx·φ'(h): φ'(h) J_δx + δx φ''(h) J_h (written in place, as wide as the
        wider of the two)."""
        m, w1, N = J_dx.shape
        w2 = J_h.shape[1]
        out = self.xp.empty((m, max(w1, w2), N))
        self.xp.multiply(J_dx, dphi[:, None, :], out=out[:, :w1])
        out[:, w1:] = 0.0
        out[:, :w2] += (dx * ddphi)[:, None, :] * J_h
        return out

    def _combine(self, coef, stored, width: int, k: int, m: int, unit_cols=None):
        """Σ_j coef[j, i] stored[j] over the active columns (+ the unit column of item
        i's own hat at ``unit_cols[i]``)."""
        xp, N = self.xp, stored.shape[2]
        w = width if unit_cols is None else max(width, int(unit_cols[-1]) + 1)
        if not (k and width):
            width = 0
        out = xp.empty((m, w, N))
        if width:
            # stored[:k, :width] is k rows of width·N contiguous numbers, and so is the
            # output's prefix: one gemm, written in place
            dst = out[:, :width].reshape(m, -1)
            xp.matmul(coef.T, stored[:k, :width].reshape(k, -1), out=dst)
            if dst.base is None:            # an array module whose reshape copied
                out[:, :width] = dst.reshape(m, width, N)
        out[:, width:] = 0.0
        if unit_cols is not None:
            out[xp.arange(m), xp.asarray(unit_cols)] += 1.0
        return out

    # -- forward: layer l's pre-activation from x = x^{l-1} -------------------------------
    def forward_zdot(self, l: int, J_x, kG: int):
        """σ_l² E[∂x/∂ĝ_j] for the kG stored G^l hats: (kG, m)."""
        return self.s2[l] * self._means(J_x, self.col_G(l - 1, np.arange(kG)))

    def forward_J(self, l: int, coef, kG: int, m: int, new_hat_index):
        """J of h^l: the coefficients applied to the stored G^l derivatives, plus own hats."""
        unit = (None if new_hat_index is None
                else self.col_F(l, new_hat_index + np.arange(m)))
        return self._combine(coef, self.Jbwd[l], self.width[("b", l)], kG, m, unit)

    def store_forward(self, l: int, k0: int, J_x) -> None:
        w = J_x.shape[1]
        self.Jfwd[l][k0:k0 + len(J_x), :w] = J_x
        self.width[("f", l)] = max(self.width[("f", l)], w)

    # -- backward: δx^{l-1} from δh = δh^l ----------------------------------------------
    def backward_zdot(self, l: int, J_dh, kF: int):
        """σ_l² E[∂δh/∂f̂_e] for the kF stored F^l hats (this step's included): (kF, m)."""
        return self.s2[l] * self._means(J_dh, self.col_F(l, np.arange(kF)))

    def backward_J(self, l: int, coef, kF: int, m: int, new_hat_index: int):
        """J of δx^{l-1}: coefficients on the stored F^l derivatives, plus own hats."""
        return self._combine(coef, self.Jfwd[l], self.width[("f", l)], kF, m,
                             self.col_G(l - 1, new_hat_index + np.arange(m)))

    def store_backward(self, l: int, k0: int, J_dh) -> None:
        w = J_dh.shape[1]
        self.Jbwd[l][k0:k0 + len(J_dh), :w] = J_dh
        self.width[("b", l)] = max(self.width[("b", l)], w)

    # -- readout and parameter updates --------------------------------------------------
    def readout(self, alpha: float, chi):
        """J of δx^L = α Z^{nV} χ_i for each batch item: (B, width, N)."""
        return alpha * self.xp.tensordot(chi, self.JV[:, :self.width["V"]], axes=(1, 0))

    def update(self, eta_in: float, Xb, J_dh1, eta_out: float, alpha: float, chi, J_xL) -> None:
        """Z^U -= η_1 Σ_i δh^1_i ξ_iᵀ and Z^{nV} -= η_{L+1} α Σ_i x^L_i χ_iᵀ, differentiated."""
        xp = self.xp
        wu, wv = J_dh1.shape[1], J_xL.shape[1]
        self.JU[:, :wu] -= eta_in * xp.tensordot(Xb, J_dh1, axes=(0, 0))
        self.JV[:, :wv] -= eta_out * alpha * xp.tensordot(chi, J_xL, axes=(0, 0))
        self.width["U"] = max(self.width["U"], wu)
        self.width["V"] = max(self.width["V"], wv)
