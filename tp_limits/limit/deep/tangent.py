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
family): first F^m's hats, then G^{m+1}'s.

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
    """

    def __init__(self, N: int, L: int, d: int, do: int, cap: int, sig: tuple, xp=np):
        self.xp = xp
        self.L, self.cap = L, cap
        self.D = {m: cap * ((m >= 2) + (m <= L - 1)) for m in range(1, L + 1)}
        self.offF = {m: 0 for m in range(2, L + 1)}
        self.offG = {m: (cap if m >= 2 else 0) for m in range(1, L)}
        self.s2 = {l: sig[l - 1] ** 2 for l in range(2, L + 1)}
        self.JU = xp.zeros((d, self.D[1], N))
        self.JV = xp.zeros((do, self.D[L], N))
        self.Jfwd = {l: xp.zeros((cap, self.D[l - 1], N)) for l in range(2, L + 1)}
        self.Jbwd = {l: xp.zeros((cap, self.D[l], N)) for l in range(2, L + 1)}

    # -- propagation ---------------------------------------------------------------
    def input(self, Xin):
        """J of h^1 = Z^U ξ for each row ξ of Xin: (m, D_1, N)."""
        return self.xp.tensordot(Xin, self.JU, axes=(1, 0))

    @staticmethod
    def times(J, a):
        """J of v·a for a deterministic-coefficient-free product with a (m, N) array a."""
        return J * a[:, None, :]

    @staticmethod
    def product(J_dx, dphi, dx, ddphi, J_h):
        """J of δx·φ'(h): φ'(h) J_δx + δx φ''(h) J_h."""
        return J_dx * dphi[:, None, :] + (dx * ddphi)[:, None, :] * J_h

    def _combine(self, coef, stored, k, m, D, unit_offset=None):
        """Σ_j coef[j, i] stored[j] (+ the unit column of item i's own hat)."""
        N, xp = stored.shape[2], self.xp
        if k:
            out = (coef.T @ stored[:k].reshape(k, -1)).reshape(m, D, N)
        else:
            out = xp.zeros((m, D, N))
        if unit_offset is not None:
            out[xp.arange(m), unit_offset + xp.arange(m)] += 1.0
        return out

    # -- forward: layer l's pre-activation from x = x^{l-1} -------------------------------
    def forward_zdot(self, l: int, J_x, kG: int):
        """σ_l² E[∂x/∂ĝ_j] for the kG stored G^l hats: (kG, m)."""
        o = self.offG[l - 1]
        return self.s2[l] * J_x[:, o:o + kG].mean(axis=2).T

    def forward_J(self, l: int, coef, kG: int, m: int, new_hat_index):
        """J of h^l: the coefficients applied to the stored G^l derivatives, plus own hats."""
        unit = None if new_hat_index is None else self.offF[l] + new_hat_index
        return self._combine(coef, self.Jbwd[l], kG, m, self.D[l], unit)

    def store_forward(self, l: int, k0: int, J_x) -> None:
        self.Jfwd[l][k0:k0 + len(J_x)] = J_x

    # -- backward: δx^{l-1} from δh = δh^l ----------------------------------------------
    def backward_zdot(self, l: int, J_dh, kF: int):
        """σ_l² E[∂δh/∂f̂_e] for the kF stored F^l hats (this step's included): (kF, m)."""
        o = self.offF[l]
        return self.s2[l] * J_dh[:, o:o + kF].mean(axis=2).T

    def backward_J(self, l: int, coef, kF: int, m: int, new_hat_index: int):
        """J of δx^{l-1}: coefficients on the stored F^l derivatives, plus own hats."""
        return self._combine(coef, self.Jfwd[l], kF, m, self.D[l - 1],
                             self.offG[l - 1] + new_hat_index)

    def store_backward(self, l: int, k0: int, J_dh) -> None:
        self.Jbwd[l][k0:k0 + len(J_dh)] = J_dh

    # -- readout and parameter updates --------------------------------------------------
    def readout(self, alpha: float, chi):
        """J of δx^L = α Z^{nV} χ_i for each batch item: (B, D_L, N)."""
        return alpha * self.xp.tensordot(chi, self.JV, axes=(1, 0))

    def update(self, eta_in: float, Xb, J_dh1, eta_out: float, alpha: float, chi, J_xL) -> None:
        """Z^U -= η_1 Σ_i δh^1_i ξ_iᵀ and Z^{nV} -= η_{L+1} α Σ_i x^L_i χ_iᵀ, differentiated."""
        self.JU -= eta_in * self.xp.tensordot(Xb, J_dh1, axes=(0, 0))
        self.JV -= eta_out * alpha * self.xp.tensordot(chi, J_xL, axes=(0, 0))
