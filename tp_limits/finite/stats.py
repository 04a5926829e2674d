"""Coordinate statistics of a finite network on its evaluation inputs (docs/theory.md §7.2).

Recorded at every t = 0..T (leading axis), averaged over the E evaluation
inputs; "rms" is ‖v‖/√(size):

    h_rms, x_rms           (T+1, L)     rms h^l_t, x^l_t
    dh_rms, dx_rms         (T+1, L)     rms (h^l_t - h^l_0), (x^l_t - x^l_0)
    dWx_rms                (T+1, L+1)   rms (W^l_t - W^l_0) x^{l-1}_t  (readout: without α)
    spectral_ratio         (T+1, L+1)   ‖W^l_t - W^l_0‖_* / ‖W^l_0‖_*
    frobenius_ratio        (T+1, L+1)   ‖W^l_t - W^l_0‖_F / ‖W^l_0‖_F
    feature_kernel         (T+1, E, E)  ⟨x^L_t(ξ_i), x^L_t(ξ_j)⟩ = x·x'/n
    feature_kernel_change  (T+1,)       rms over entries of feature_kernel_t - feature_kernel_0

Spectral norms of n x n matrices come from block power iteration (no SVD);
ΔW is low rank (rank <= t·B), so warm-started iteration converges in a few
sweeps.  Thin matrices (input layer, readout) use the exact Gram eigenvalue.
"""
from __future__ import annotations

import numpy as np

from .network import FiniteNetwork

THIN = 64                  # below this many rows or columns, use the exact Gram matrix
POWER_ITERS_INIT = 60      # ‖W_0‖_* of a Gaussian matrix: gap ~ n^{-2/3}, cap the work
POWER_ITERS_DELTA = 40
POWER_RTOL = 1e-6
BLOCK = 8                  # vectors per sweep of the block power iteration


def spectral_norm(matmat, rmatmat, shape, backend, dtype, v0=None, iters=POWER_ITERS_DELTA,
                  rtol=POWER_RTOL, block=BLOCK):
    """Largest singular value of an operator by block power (subspace) iteration.

    ``matmat(V)`` = M V and ``rmatmat(U)`` = Mᵀ U for blocks of ``block``
    vectors: reading M once per sweep serves every vector, so a block costs
    about what one vector does on a bandwidth-bound machine, and convergence
    goes like (σ_{k+1}/σ_1)^{2·sweeps} instead of (σ_2/σ_1)^{2·sweeps}.
    The estimate ‖M V‖_2 (V orthonormal, Rayleigh–Ritz) approaches ‖M‖_* from
    below.  Returns (sigma, V) so the next call can warm-start from V.
    """
    xp = backend.xp
    k = min(block, shape[1])
    if v0 is None:
        v0 = xp.asarray(np.random.default_rng(12345).standard_normal((shape[1], k)), dtype=dtype)
    V, _ = xp.linalg.qr(v0)
    sigma = 0.0
    for _ in range(iters):
        U = matmat(V)
        new = float(np.sqrt(max(float(xp.linalg.eigvalsh(U.T @ U)[-1]), 0.0)))
        if new == 0.0:
            return 0.0, V
        W = rmatmat(U)
        V, _ = xp.linalg.qr(W)
        if abs(new - sigma) <= rtol * new:
            return new, V
        sigma = new
    return sigma, V


def _thin_norm(M, backend) -> float:
    xp = backend.xp
    g = M.T @ M if M.shape[0] >= M.shape[1] else M @ M.T
    return float(np.sqrt(max(float(xp.linalg.eigvalsh(g)[-1]), 0.0)))


class StatsRecorder:
    """Fills the arrays of the module docstring from evaluation forward passes."""

    def __init__(self, network: FiniteNetwork, T: int, E: int, coordinates: bool = True,
                 spectral: bool = True):
        L = network.net.L
        self.nw, self.coordinates, self.spectral = network, coordinates, spectral
        self.stats = {}
        if coordinates:
            for k in ("h_rms", "x_rms", "dh_rms", "dx_rms"):
                self.stats[k] = np.zeros((T + 1, L))
            self.stats["dWx_rms"] = np.zeros((T + 1, L + 1))
            self.stats["feature_kernel"] = np.zeros((T + 1, E, E))
            self.stats["feature_kernel_change"] = np.zeros(T + 1)
        if spectral:
            self.stats["spectral_ratio"] = np.zeros((T + 1, L + 1))
        if coordinates or spectral:
            self.stats["frobenius_ratio"] = np.zeros((T + 1, L + 1))
        self._h0 = self._x0 = None
        xp = network.b.xp
        self._fro0 = [float(xp.linalg.norm(w)) for w in network.W0]
        self._spec0 = self._spec_vectors = None

    def truncate(self, upto: int) -> dict:
        return {k: v[:upto] for k, v in self.stats.items()}

    def record(self, t: int, hs, xs, f) -> None:
        nw = self.nw
        L = nw.net.L
        if t == 0:
            self._h0, self._x0 = hs, xs
            self._spec0 = [self._norm_init(l) for l in range(L + 1)] if self.spectral else None
            self._spec_vectors = [None] * (L + 1)
        if self.coordinates:
            self._record_coordinates(t, hs, xs, f)
        self._record_norms(t)

    def _record_coordinates(self, t, hs, xs, f) -> None:
        nw, b = self.nw, self.nw.b
        xp, mm, tonp = b.xp, b.matmul, b.to_numpy
        rms = lambda a: float(xp.sqrt(xp.mean(a * a)))  # noqa: E731
        L, s = nw.net.L, self.stats
        for l in range(L):
            s["h_rms"][t, l] = rms(hs[l])
            s["x_rms"][t, l] = rms(xs[l + 1])
            s["dh_rms"][t, l] = rms(hs[l] - self._h0[l])
            s["dx_rms"][t, l] = rms(xs[l + 1] - self._x0[l + 1])
            s["dWx_rms"][t, l] = rms(hs[l] - mm(xs[l], nw.W0[l].T))
        s["dWx_rms"][t, L] = rms(f / nw.alpha - mm(xs[L], nw.W0[L].T))
        xL = xs[L]
        K = tonp(mm(xL, xL.T)) / nw.n
        s["feature_kernel"][t] = K
        dK = K - s["feature_kernel"][0]
        s["feature_kernel_change"][t] = float(np.sqrt(np.mean(dK * dK)))

    def _record_norms(self, t) -> None:
        nw, xp, s = self.nw, self.nw.b.xp, self.stats
        L = nw.net.L
        for l in range(L + 1):
            d = nw.W[l] - nw.W0[l] if l in (0, L) else None
            fro = float(xp.linalg.norm(d)) if d is not None else self._delta_fro(l)
            s["frobenius_ratio"][t, l] = fro / self._fro0[l] if self._fro0[l] else np.inf
            if self.spectral:
                s["spectral_ratio"][t, l] = (self._norm_delta(l, d) / self._spec0[l]
                                             if self._spec0[l] else np.inf)

    def _delta_fro(self, l) -> float:
        """‖W_t - W_0‖_F for an n x n layer, in row blocks (no n x n temporary)."""
        nw, xp = self.nw, self.nw.b.xp
        W, W0 = nw.W[l], nw.W0[l]
        step = max(1, (1 << 22) // W.shape[1])
        tot = 0.0
        for i in range(0, W.shape[0], step):
            d = W[i:i + step] - W0[i:i + step]
            tot += float(xp.sum(d * d))
        return float(np.sqrt(tot))

    def _norm_init(self, l) -> float:
        nw = self.nw
        M = nw.W0[l]
        if min(M.shape) <= THIN:
            return _thin_norm(M, nw.b)
        mm = nw.b.matmul
        sigma, _ = spectral_norm(lambda V: mm(M, V), lambda U: mm(M.T, U),
                                 M.shape, nw.b, nw.dtype, iters=POWER_ITERS_INIT)
        return sigma

    def _norm_delta(self, l, d) -> float:
        nw = self.nw
        if d is not None and min(d.shape) <= THIN:
            return _thin_norm(d, nw.b)
        W, W0, mm = nw.W[l], nw.W0[l], nw.b.matmul
        sigma, v = spectral_norm(lambda V: mm(W, V) - mm(W0, V),
                                 lambda U: mm(W.T, U) - mm(W0.T, U),
                                 W.shape, nw.b, nw.dtype, v0=self._spec_vectors[l])
        self._spec_vectors[l] = v
        return sigma
