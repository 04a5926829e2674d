"""Spectral transforms of an update direction Φ: the matrix functions T(Φ) = U f(Σ) Vᵀ
that the spectral-condition updates apply (docs/theory.md §11.7).

* :class:`Msign` — f(σ) = 1: the polar factor U Vᵀ, exactly or by ``ns_steps``
  Newton–Schulz iterations (Muon's transform, muon.py);
* :class:`Clip` — f(σ) = min(λ σ/σ_max, 1), singular-value clipping at the scale-free
  threshold σ_max/λ (λ ≥ 1): λ = 1 is spectral normalization Φ/‖Φ‖₂, λ → ∞ is msign.

Every transform has spectral norm one (f(σ_max) = 1) whatever the size of Φ, which is
what gives all of them one set of width exponents (§11.2).  Each is given three ways,
all of them exact (no Φ is ever decomposed at n × n):

* ``core(C, G_P, G_Q)`` — for a low-rank Φ = Pᵀ C Q (k pairs), the k × k K with
  T(Φ) = Pᵀ K Q from the Gram matrices G_P = P Pᵀ, G_Q = Q Qᵀ (finite networks'
  hidden matrices; in the limit, the particles' Gram matrices);
* ``dense(D)`` — a dense D with one side small, through that side's Gram;
* ``full(D)`` — a dense D of full rank (Adam's direction), by its own SVD (or Newton–
  Schulz), since a Gram squares the condition number the small singular values need;
* ``rows(S)`` — the k × k R with T(D) = n^{−1/2} D R for a tall D (n, k) whose rows are
  particles and S = E[D_α D_αᵀ] (the vector layers in the limit): R = h(S) with
  h(s) = f(√s)/√s.

Clipping is computed in one of two forms that are equal in exact arithmetic.  Up to
λ = ``CLIP_DIRECT`` the difference form, with b the singular values above σ_max/λ,

    T(Φ) = (λ/σ_max) Φ − Σ_{i ∈ b} u_i (λ σ_i/σ_max − 1) v_iᵀ,

which is exact on any spectrum (λ = 1, b empty, is Φ/σ_max to the last bit, and small
or zero singular values need no pseudo-inverse) but whose rounding grows like λ ε:
clipping amplifies Φ's directions below σ_max/λ by λ/σ_max, and the subtraction leaves
an error of ε σ_max in them.  Above it the direct form U f(Σ) Vᵀ over the singular
values above 10⁻⁶ σ_max (dropped ones as in the exact polar factor, which it becomes:
λ = 10⁶ equals msign to rounding).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Newton–Schulz coefficients (a, b, c) of the quintic iteration
NS_COEFFS = (3.4445, -4.7750, 2.0315)
#: the regularizer of X₀ = D̃ / (‖D̃‖_F + NS_EPS)
NS_EPS = 1e-7
#: the exact polar factor drops singular values below this times the largest: the low-rank
#: routes work with Gram matrices, which square the singular values, and float64 Grams
#: resolve them to about 1e-7 of the largest
POLAR_RTOL = 1e-6


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


def polar_dense(D, rtol: float = POLAR_RTOL):
    """U Vᵀ of a dense D through its smaller side's Gram: D (DᵀD)^{+1/2} for a tall D."""
    return through_small_gram(D, lambda S: _sqrt_and_pinv_sqrt(S, rtol ** 2)[1])


def through_small_gram(D, rows):
    """D rows(DᵀD) for a tall D (the transpose for a wide one): a matrix function of a dense
    D with one small side, from that side's Gram on the host (``rows``: S ↦ h(S))."""
    wide = D.shape[0] < D.shape[1]
    X = D.T if wide else D
    out = X @ _like(rows(_host(X.T @ X)), X)
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


#: clipping thresholds λ above which the direct form replaces the difference form (whose
#: rounding, about λ ε, is then above 10⁻¹²)
CLIP_DIRECT = 1e4
#: the transform names of SpectralUpdate(base, transform, clip)
TRANSFORMS = ("msign", "sn", "svc")


@dataclass(frozen=True)
class Msign:
    """T(Φ) = U Vᵀ: ``ns_steps`` Newton–Schulz iterations, or (None) the exact polar factor
    (docs/theory.md §11.1, §11.3).  ``scale`` rescales Φ to a Θ(1) Frobenius norm for
    Newton–Schulz's 10⁻⁷ (the only place a scale enters)."""

    ns_steps: int | None

    def core(self, C, GP, GQ, scale: float = 1.0, xp=np):
        if self.ns_steps is None:
            return polar_core(C, GP, GQ, xp=xp)
        return newton_schulz_core(C, GP, GQ, self.ns_steps, scale, xp)

    def dense(self, D, scale: float = 1.0, xp=np):
        if self.ns_steps is None:
            return polar_dense(D)
        return newton_schulz_dense(D, self.ns_steps, scale, xp)

    def rows(self, S):
        return polar_rows(S) if self.ns_steps is None else newton_schulz_rows(S, self.ns_steps)

    def full(self, D, scale: float = 1.0, xp=np):
        """T(D) of a dense D of full rank (an Adam direction): Newton–Schulz as in
        :meth:`dense`; the exact polar factor by an SVD of D itself (a Gram would square
        its condition number)."""
        if self.ns_steps is not None:
            return self.dense(D, scale, xp)
        return _by_svd(D, lambda x: x > POLAR_RTOL, xp)

    def __str__(self):
        return "msign" if self.ns_steps is None else f"msign (Newton–Schulz, {self.ns_steps})"


@dataclass(frozen=True)
class Clip:
    """T(Φ) = U min(λ Σ/σ_max, 1) Vᵀ, λ = ``clip`` ≥ 1 (λ = 1: Φ/‖Φ‖₂).  Scale-free: the
    ``scale`` argument of the other transforms is accepted and unused.  A zero Φ moves
    nothing."""

    clip: float

    def rows(self, S):
        """R = h(S), h(s) = min(λ/σ_max, 1/√s) over the eigenvalues σ² of S: the difference
        form (λ/σ_max) I − V_b diag(λ/σ_max − 1/σ_b) V_bᵀ over σ_b > σ_max/λ, or the direct
        form V h(Σ²) Vᵀ over σ > 10⁻⁶ σ_max (λ > CLIP_DIRECT)."""
        w, V = np.linalg.eigh((S + S.T) / 2)
        sigma = np.sqrt(np.maximum(w, 0.0))
        top = float(sigma.max()) if sigma.size else 0.0
        if top == 0.0:
            return np.zeros_like(S)
        lam = self.clip / top
        if self.clip > CLIP_DIRECT:
            keep = sigma > POLAR_RTOL * top
            return (V[:, keep] * np.minimum(lam, 1.0 / sigma[keep])) @ V[:, keep].T
        b = sigma > top / self.clip
        return lam * np.eye(len(S)) - (V[:, b] * (lam - 1.0 / sigma[b])) @ V[:, b].T

    def dense(self, D, scale: float = 1.0, xp=np):
        """D R(DᵀD) for a tall D (the transpose for a wide one): the smaller side's Gram."""
        return through_small_gram(D, self.rows)

    def core(self, C, GP, GQ, scale: float = 1.0, xp=np):
        """K with Pᵀ K Q = T(Pᵀ C Q): S = G_P^{1/2} C G_Q^{1/2} = U Σ Vᵀ has Φ's singular
        values (Pᵀ G_P^{+1/2} and Qᵀ G_Q^{+1/2} have orthonormal columns, as in the exact
        polar core), so K = (λ/σ_max) C − G_P^{+1/2} U_b diag(λ Σ_b/σ_max − 1) V_bᵀ
        G_Q^{+1/2} (the difference form) or G_P^{+1/2} U f(Σ) Vᵀ G_Q^{+1/2} (the direct
        form, λ > CLIP_DIRECT)."""
        sP, iP = _sqrt_and_pinv_sqrt(GP, POLAR_RTOL ** 2, xp)
        sQ, iQ = _sqrt_and_pinv_sqrt(GQ, POLAR_RTOL ** 2, xp)
        U, sv, Vt = xp.linalg.svd(sP @ C @ sQ)
        top = float(sv.max()) if sv.size else 0.0
        if top == 0.0:
            return xp.zeros_like(C)
        lam = self.clip / top
        if self.clip > CLIP_DIRECT:
            keep = sv > POLAR_RTOL * top
            return iP @ ((U[:, keep] * xp.minimum(lam * sv[keep], 1.0)) @ Vt[keep]) @ iQ
        b = sv > top / self.clip
        return lam * C - iP @ ((U[:, b] * (lam * sv[b] - 1.0)) @ Vt[b]) @ iQ

    def full(self, D, scale: float = 1.0, xp=np):
        """T(D) of a dense D of full rank (an Adam direction), by an SVD of D itself."""
        return _by_svd(D, lambda x: xp.minimum(self.clip * x, 1.0), xp)

    def __str__(self):
        return "spectral normalization" if self.clip == 1.0 else \
            f"singular values clipped at σ_max/{self.clip:g}"


def _by_svd(D, f, xp):
    """U f(Σ/σ_max) Vᵀ by a thin SVD of D (zero for a zero D)."""
    U, s, Vt = xp.linalg.svd(D, full_matrices=False)
    top = float(s.max()) if s.size else 0.0
    if top == 0.0:
        return xp.zeros_like(D)
    return (U * f(s / top)) @ Vt


def transform_of(name: str, clip, ns_steps):
    """The transform SpectralUpdate's ``transform`` names (checked there): 'msign', 'sn'
    (Clip(1)) or 'svc' (Clip(clip))."""
    if name == "msign":
        return Msign(ns_steps)
    return Clip(1.0 if name == "sn" else float(clip))


__all__ = ["Msign", "Clip", "TRANSFORMS", "CLIP_DIRECT", "transform_of"]
