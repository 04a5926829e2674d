"""Plain vectorized twin of the fused kernel in sweep.py, on any array backend.

Same inputs, same outputs (per-block sums, same columns, see columns.py), written as
whole-array expressions over all particles.  It is the reference the tests
check the Numba kernel against, the baseline of the benchmark, a fallback
(``kernel="numpy"``) where Numba is unwanted, and, given a CuPy backend
(``b``), the sweep of the one-hidden-layer limit on a GPU: the particles,
batch and χ are then device arrays, and so are the block sums returned.
"""
from __future__ import annotations

from ...engine.backend import numpy_backend
from ...nonlinearities import get_nonlinearity
from .state import HP

_NP = numpy_backend()


def _block_sums(values, block: int, xp):
    """(K, N) per-particle values -> (nb, K) sums over consecutive blocks of ``block``."""
    K, N = values.shape
    full = N - N % block
    sums = values[:, :full].reshape(K, -1, block).sum(axis=2)
    if full < N:
        sums = xp.concatenate([sums, values[:, full:].sum(axis=1, keepdims=True)], axis=1)
    return sums.T


def sweep_numpy(U, V, w, U0, phi: str, Xb, chi, step_u, step_v, Xn, Xe, stats: bool,
                block: int, SU=None, SV=None, hp=None, b=_NP, cache=None, cached=False):
    """Update U, V in place with the batch (Xb, chi), then return the block sums.

    ``SU``, ``SV``, ``hp`` as in sweep.py: heavy-ball buffers (k = 1) or Adam moments
    (k = 2), updated in place; None (or k = 0) is plain SGD.  ``b``: the backend of
    the arrays (``hp`` and ``w`` stay host arrays).  ``cache`` (planes, B', N) and
    ``cached`` as in sweep.py: φ of the next batch is kept there (and φ′ when it
    does not follow from φ, planes = 2), and with ``cached`` the update reads those
    of its own batch.
    """
    nl, xp = get_nonlinearity(phi), b.xp
    d, N = U.shape
    nb = (N + block - 1) // block
    mode = 0 if SU is None else SU.shape[0]
    if len(Xb):
        S = chi @ V                                  # (B, N): χ_iᵀ Z^{nV}
        if cached:
            P = cache[0][:len(Xb)]
            Dv = (nl.dphi_of_value(P, b) if cache.shape[0] == 1 else cache[1][:len(Xb)])
        else:
            H = Xb @ U                               # (B, N)
            P, Dv = nl.phi(H, b), nl.dphi(H, b)
        G = S * Dv
        if mode == 0:
            if step_u != 0.0:
                U -= step_u * (Xb.T @ G)
            if step_v != 0.0:
                V -= step_v * (chi.T @ P)
        else:
            h = dict(zip(HP, hp))
            for Z, St, inc, shrink, lr in ((U, SU, step_u * (Xb.T @ G), h["decay_u"], h["lr_u"]),
                                          (V, SV, step_v * (chi.T @ P), h["decay_v"], h["lr_v"])):
                if mode == 1:                        # M ← μ M + δ Z + increment, Z ← Z − M
                    St[0] *= h["momentum"]
                    St[0] += shrink * Z + inc
                    Z -= St[0]
                    continue
                b1, b2 = h["beta1"], h["beta2"]      # Adam on the gradient ĝ = inc
                St[0] *= b1
                St[0] += (1 - b1) * inc
                St[1] *= b2
                St[1] += (1 - b2) * inc * inc
                den = xp.sqrt(St[1] / h["bias2"]) + h["eps"]
                # 0/0 (ε = 0, no gradient yet) is a zero step
                psi = xp.where(den > 0, (St[0] / h["bias1"]) / xp.where(den > 0, den, 1.0), 0.0)
                Z *= 1 - shrink
                Z -= lr * psi
    ww = xp.asarray(w) if len(w) == N else xp.full(N, float(w[0]))
    cols = []
    keep = cache is not None and cache.shape[1] >= len(Xn) > 0
    for X in (Xn, Xe):
        if len(X):
            H = X @ U
            Ph = nl.phi(H, b)                        # (n, N)
            if keep and X is Xn:
                cache[0][:len(X)] = Ph
                if cache.shape[0] > 1:
                    cache[1][:len(X)] = nl.dphi(H, b)
            Ph = Ph * ww
            cols.append((Ph[:, None, :] * V[None, :, :]).reshape(-1, N))
    if stats and len(Xe):
        H, H0 = Xe @ U, Xe @ U0
        Xv, X0 = nl.phi(H, b), nl.phi(H0, b)
        cols += [ww * H * H, ww * (H - H0) ** 2, ww * Xv * Xv, ww * (Xv - X0) ** 2,
                 (ww * Xv[:, None, :] * Xv[None, :, :]).reshape(-1, N)]
    if not cols:
        return xp.zeros((nb, 0))
    return _block_sums(xp.concatenate(cols, axis=0), block, xp)
