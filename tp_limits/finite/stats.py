"""Coordinate statistics of a finite network on its evaluation inputs (docs/theory.md §7.2).

Recorded at every evaluated t of 0..T (leading axis; every step unless ``eval_every``
says otherwise, NaN at the others), averaged over the E evaluation inputs; "rms" is
‖v‖/√(size):

    h_rms, x_rms           (T+1, L)     rms h^l_t, x^l_t
    dh_rms, dx_rms         (T+1, L)     rms (h^l_t - h^l_0), (x^l_t - x^l_0)
    dWx_rms                (T+1, L+1)   rms (W^l_t - W^l_0) x^{l-1}_t  (readout: without α;
                                        a residual block: without its branch multiplier)
    spectral_ratio         (T+1, L+1)   ‖W^l_t - W^l_0‖_* / ‖W^l_0‖_*
    frobenius_ratio        (T+1, L+1)   ‖W^l_t - W^l_0‖_F / ‖W^l_0‖_F
    feature_kernel         (T+1, E, E)  ⟨x^L_t(ξ_i), x^L_t(ξ_j)⟩ = x·x'/n
    feature_kernel_change  (T+1,)       rms over entries of feature_kernel_t - feature_kernel_0

Spectral norms are iterative (no SVD of an n x n matrix): see norms.py.
"""
from __future__ import annotations

import numpy as np

from .network import FiniteNetwork
from .norms import THIN, frobenius_distance, operator_norm, spectral_norm, thin_norm


class StatsRecorder:
    """Fills the arrays of the module docstring from evaluation forward passes."""

    def __init__(self, network: FiniteNetwork, T: int, E: int, coordinates: bool = True,
                 spectral: bool = True):
        L = network.net.L
        self.nw, self.coordinates, self.spectral = network, coordinates, spectral
        self.stats = {}
        rows = lambda *shape: np.full((T + 1, *shape), np.nan)   # noqa: E731  NaN: not recorded
        if coordinates:
            for k in ("h_rms", "x_rms", "dh_rms", "dx_rms"):
                self.stats[k] = rows(L)
            self.stats["dWx_rms"] = rows(L + 1)
            self.stats["feature_kernel"] = rows(E, E)
            self.stats["feature_kernel_change"] = rows()
        if spectral:
            self.stats["spectral_ratio"] = rows(L + 1)
        if coordinates or spectral:
            self.stats["frobenius_ratio"] = rows(L + 1)
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
            s["dWx_rms"][t, l] = rms(nw.layer_product(hs, l) - mm(xs[l], nw.W0[l].T))
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
        """‖W_t - W_0‖_F of an n x n layer (see frobenius_distance)."""
        return frobenius_distance(self.nw.W[l], self.nw.W0[l], self.nw.b)

    def _norm_init(self, l) -> float:
        nw = self.nw
        return operator_norm(nw.W0[l], nw.b, nw.dtype)

    def _norm_delta(self, l, d) -> float:
        nw = self.nw
        if d is not None and min(d.shape) <= THIN:
            return thin_norm(d, nw.b)
        W, W0, mm = nw.W[l], nw.W0[l], nw.b.matmul
        sigma, v = spectral_norm(lambda V: mm(W, V) - mm(W0, V),
                                 lambda U: mm(W.T, U) - mm(W0.T, U),
                                 W.shape, nw.b, nw.dtype, v0=self._spec_vectors[l])
        self._spec_vectors[l] = v
        return sigma
