"""Plain vectorized twin of the fused kernel of sweep.py, on any array backend.

Same record (contract.SweepArgs), same outputs (per-block sums, same columns,
columns.py), written as whole-array expressions over all particles.  It is the
reference the tests check the Numba kernel against, the baseline of the benchmark,
a fallback (``kernel="numpy"``) where Numba is unwanted, and, given a CuPy backend
(``b``), a sweep of the one-hidden-layer limit on a GPU: the particles, batch and χ
are then device arrays, and so are the block sums returned.  φ and the optimizer's
rule come from their registries: the array forms of the nonlinearity, and the
rule's scalar step applied to whole arrays.
"""
from __future__ import annotations

from ...engine.backend import numpy_backend
from ...nonlinearities import NONLINEARITIES
from ...spec.optimizers.base import rule_of_code

_NP = numpy_backend()
_ENTRIES = tuple(NONLINEARITIES.values())


def _block_sums(values, block: int, xp):
    """(K, N) per-particle values -> (nb, K) sums over consecutive blocks of ``block``."""
    K, N = values.shape
    full = N - N % block
    sums = values[:, :full].reshape(K, -1, block).sum(axis=2)
    if full < N:
        sums = xp.concatenate([sums, values[:, full:].sum(axis=1, keepdims=True)], axis=1)
    return sums.T


def _move(rule, Z, S, inc, h):
    """Z (and its state rows S, slot s of row r at s·rows + r) moved in place by the rule
    fed ``inc``."""
    if rule.plain:
        Z -= inc
        return
    R = Z.shape[0]
    state = tuple(S[s * R:(s + 1) * R] for s in range(len(rule.slots)))
    z, new = rule.apply(Z, inc, state, h)
    Z[...] = z
    for old, value in zip(state, new):
        old[...] = value


def sweep_numpy(args, b=_NP):
    """Update the particles (and the optimizer's state) of the sweep ``args``
    (contract.SweepArgs) in place with its batch, then return the (nb, K) block sums.
    ``b``: the backend of the arrays (the weights and the hyperparameters stay on the
    host)."""
    a = args.data
    nl, rule, xp = _ENTRIES[len(args.phi) - 1], rule_of_code(len(args.rule) - 1), b.xp
    U, V, w, Xb, chi, Xn, Xe, cache = a.U, a.V, a.w, a.Xb, a.chi, a.Xn, a.Xe, a.cache
    d, N = U.shape
    nb = (N + a.block - 1) // a.block
    if len(Xb):
        S = chi @ V                                  # (B, N): χ_iᵀ Z^{nV}
        if a.cached:
            P = cache[0][:len(Xb)]
            Dv = (nl.dphi_of_value(P) if cache.shape[0] == 1 else cache[1][:len(Xb)])
        else:
            H = Xb @ U                               # (B, N)
            P, Dv = nl.phi(H, b), nl.dphi(H, b)
        G = S * Dv
        if a.scale_u != 0.0 or not rule.plain:          # a rule with state moves anyway
            _move(rule, U, a.SU, a.scale_u * (Xb.T @ G), args.hyper_u)
        if a.scale_v != 0.0 or not rule.plain:
            _move(rule, V, a.SV, a.scale_v * (chi.T @ P), args.hyper_v)
    ww = xp.asarray(w) if len(w) == N else xp.full(N, float(w[0]))
    cols = []
    keep = cache.shape[1] >= len(Xn) > 0
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
    if a.stats and len(Xe):
        H, H0 = Xe @ U, Xe @ a.U0
        Xv, X0 = nl.phi(H, b), nl.phi(H0, b)
        cols += [ww * H * H, ww * (H - H0) ** 2, ww * Xv * Xv, ww * (Xv - X0) ** 2,
                 (ww * Xv[:, None, :] * Xv[None, :, :]).reshape(-1, N)]
    if not cols:
        return xp.zeros((nb, 0))
    return _block_sums(xp.concatenate(cols, axis=0), a.block, xp)

