"""Step 1 of a sweep on one block of particles: the simultaneous update with the batch.

With χ_t, every particle's coordinates move by the optimizer's rule (rule.py) fed

    g^U = scale_u Σ_i (χ_iᵀ Z^{nV}) φ′(Z^U ξ_i) ξ_iᵀ,     g^V = scale_v Σ_i χ_i φ(Z^U ξ_i)

(docs/theory.md §2, §10).  For the plain rule (z ← z − g) the increments are
subtracted from the particles as they are formed; other rules get them in scratch
rows and then move each coordinate with its state.  With a φ cache the batch's
φ(Z^U ξ_i) (and φ′) are read from memory instead of recomputed (phi.py).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .blocks import BLAS_MIN_B, BLAS_MIN_D
from .forward import preacts
from .phi import dphi_from_cache, dphi_from_value, dphi_is_one, dphi_of_value, phi_times
from .rule import rule_plain, rule_rows


@njit(fastmath=True, error_model="numpy", cache=True)
def update_block(a, tag, rule, hyper_u, hyper_v, tiles, b, Su, Sv, defer_u):
    """Simultaneous update of the particles of block b (blocks.Block) with the batch
    (a.Xb, a.chi) of the sweep ``a`` (contract.SweepData), under φ ``tag`` and the
    optimizer's ``rule`` (its hyperparameter records for Z^U and Z^{nV}) and the
    pre-activation ``tiles`` (tiling.pre_tile); see the module docstring.

    The optimizer's state rows are the blocks (Su, b.a), (Sv, b.a).  With ``a.cached``
    the batch's φ(Z^U ξ_i), φ′(Z^U ξ_i) are read from the columns b.col.. of ``a.cache``
    (left there by the previous sweep's forward pass).  With ``defer_u`` (plain rule
    only) Z^U is not moved here: the forward pass takes that step
    (forward.forward_sums) with the φ′-weighted errors G returned.
    """
    Ub, Vb, pa, m, ca = b.U, b.V, b.a, b.m, b.col
    Xb, chi, cache, cached = a.Xb, a.chi, a.cache, a.cached
    d, do, B = Ub.shape[0], Vb.shape[0], Xb.shape[0]
    use_blas = d >= BLAS_MIN_D
    H = preacts(tiles, Ub, pa, m, Xb, use_blas) if not cached else np.empty((0, m))
    P = np.empty((0 if cached else B, m))
    P_rows, pr = (cache[0], ca) if cached else (P, 0)
    G = np.empty((B, m))
    if cached and dphi_from_value(tag) and do == 1:
        _chi_v_times_dphi(tag, chi, Vb, pa, G, cache[0], ca)
    else:
        # innermost loops run over particles j, so they vectorize
        for i in range(B):
            Gi = G[i]                       # G_i = χ_iᵀ Z^{nV}, times φ′_i below
            Gi[:] = 0.0
            for o in range(do):
                c = chi[i, o]
                Vo = Vb[o, pa:pa + m]
                for j in range(m):
                    Gi[j] += c * Vo[j]
            if not cached:
                phi_times(tag, H[i], P[i], Gi)
        if cached:                  # the last plane: φ′, or φ where φ′ follows from it
            _times_dphi(tag, G, cache[cache.shape[0] - 1], ca)
    plain = rule_plain(rule)
    if plain:                       # z ← z − g: subtract the increments where they form
        TU, TV, ta, sign = Ub, Vb, pa, 1.0
    else:                           # the increments in scratch, then the rule
        TU, TV, ta, sign = np.zeros((d, m)), np.zeros((do, m)), 0, -1.0
    if a.scale_u != 0.0 and not defer_u:
        if use_blas and B >= BLAS_MIN_B:
            _sub_scaled(TU, ta, sign * a.scale_u, np.dot(np.ascontiguousarray(Xb.T), G), 0, m)
        else:
            _sub_outer(TU, ta, m, sign * a.scale_u, Xb, G, 0)
    if a.scale_v != 0.0:
        _sub_outer(TV, ta, m, sign * a.scale_v, chi, P_rows, pr)
    if not plain:
        rule_rows(rule, Ub, pa, TU, Su, pa, m, hyper_u)
        rule_rows(rule, Vb, pa, TV, Sv, pa, m, hyper_v)
    return G


@njit(fastmath=True, error_model="numpy", cache=True)
def _chi_v_times_dphi(tag, chi, Vb, pa, G, P, ca):
    """G[i] = (χ_i Z^{nV}) φ′ for d_out = 1, with φ′ recovered from the cached values
    P[i, ca:ca + m] = φ: one pass per four rows, each cache row read once and each
    row of G written once (the general path builds G, then multiplies it by φ′)."""
    B, m = G.shape
    V0 = Vb[0, pa:pa + m]
    i = 0
    while i + 4 <= B:
        G0, G1, G2, G3 = G[i], G[i + 1], G[i + 2], G[i + 3]
        P0, P1 = P[i, ca:ca + m], P[i + 1, ca:ca + m]
        P2, P3 = P[i + 2, ca:ca + m], P[i + 3, ca:ca + m]
        c0, c1, c2, c3 = chi[i, 0], chi[i + 1, 0], chi[i + 2, 0], chi[i + 3, 0]
        for j in range(m):
            v = V0[j]
            G0[j] = (c0 * v) * dphi_of_value(tag, P0[j])
            G1[j] = (c1 * v) * dphi_of_value(tag, P1[j])
            G2[j] = (c2 * v) * dphi_of_value(tag, P2[j])
            G3[j] = (c3 * v) * dphi_of_value(tag, P3[j])
        i += 4
    for i2 in range(i, B):
        Gi, Pi, c = G[i2], P[i2, ca:ca + m], chi[i2, 0]
        for j in range(m):
            Gi[j] = (c * V0[j]) * dphi_of_value(tag, Pi[j])


@njit(fastmath=True, error_model="numpy", cache=True)
def _times_dphi(tag, G, C, ca):
    """G[i] *= φ′_i for every row i, from the cache plane C that holds it: φ′ itself,
    or φ where φ′ follows from it (dphi_from_cache); nothing to do for id (φ′ = 1).

    Four rows per pass: the rows of C are read here from memory, and four rows in
    one loop keep four streams in flight, which the hardware prefetchers serve
    faster than one row after another (each row of a block spans only a few pages
    and the prefetchers stop at page boundaries)."""
    if dphi_is_one(tag):
        return
    B, m = G.shape
    i = 0
    while i + 4 <= B:
        G0, G1, G2, G3 = G[i], G[i + 1], G[i + 2], G[i + 3]
        C0, C1 = C[i, ca:ca + m], C[i + 1, ca:ca + m]
        C2, C3 = C[i + 2, ca:ca + m], C[i + 3, ca:ca + m]
        for j in range(m):
            G0[j] *= dphi_from_cache(tag, C0[j])
            G1[j] *= dphi_from_cache(tag, C1[j])
            G2[j] *= dphi_from_cache(tag, C2[j])
            G3[j] *= dphi_from_cache(tag, C3[j])
        i += 4
    for i2 in range(i, B):
        Gi, Ci = G[i2], C[i2, ca:ca + m]
        for j in range(m):
            Gi[j] *= dphi_from_cache(tag, Ci[j])


@njit(fastmath=True, error_model="numpy", cache=True)
def _sub_outer(A, a, m, lr, C, M, ma):
    """A -= lr Cᵀ M on the blocks (A, a), (M, ma) of width m, C (B, rows); innermost loop
    over particles.

    Four rows of A and four batch rows per pass: each load of a row of M serves
    four rows of A, and one load and store of a row of A serves four
    multiply-adds.  A row of A is applied the batch rows in the same order and
    grouping as _sub_row_outer, so the result does not depend on which rows
    went four at a time.  Four rows of A together also keep four memory streams
    in flight where A is first read here (see _times_dphi).
    """
    B, R = C.shape[0], A.shape[0]
    k = 0
    while k + 4 <= R:
        A0, A1 = A[k, a:a + m], A[k + 1, a:a + m]
        A2, A3 = A[k + 2, a:a + m], A[k + 3, a:a + m]
        i = 0
        while i + 4 <= B:
            M0, M1 = M[i, ma:ma + m], M[i + 1, ma:ma + m]
            M2, M3 = M[i + 2, ma:ma + m], M[i + 3, ma:ma + m]
            c00, c01, c02, c03 = lr * C[i, k], lr * C[i + 1, k], lr * C[i + 2, k], lr * C[i + 3, k]
            c10, c11 = lr * C[i, k + 1], lr * C[i + 1, k + 1]
            c12, c13 = lr * C[i + 2, k + 1], lr * C[i + 3, k + 1]
            c20, c21 = lr * C[i, k + 2], lr * C[i + 1, k + 2]
            c22, c23 = lr * C[i + 2, k + 2], lr * C[i + 3, k + 2]
            c30, c31 = lr * C[i, k + 3], lr * C[i + 1, k + 3]
            c32, c33 = lr * C[i + 2, k + 3], lr * C[i + 3, k + 3]
            for j in range(m):
                m0, m1, m2, m3 = M0[j], M1[j], M2[j], M3[j]
                A0[j] -= (c00 * m0 + c01 * m1) + (c02 * m2 + c03 * m3)
                A1[j] -= (c10 * m0 + c11 * m1) + (c12 * m2 + c13 * m3)
                A2[j] -= (c20 * m0 + c21 * m1) + (c22 * m2 + c23 * m3)
                A3[j] -= (c30 * m0 + c31 * m1) + (c32 * m2 + c33 * m3)
            i += 4
        for i2 in range(i, B):
            Mi = M[i2, ma:ma + m]
            c0, c1, c2, c3 = lr * C[i2, k], lr * C[i2, k + 1], lr * C[i2, k + 2], lr * C[i2, k + 3]
            for j in range(m):
                mi = Mi[j]
                A0[j] -= c0 * mi
                A1[j] -= c1 * mi
                A2[j] -= c2 * mi
                A3[j] -= c3 * mi
        k += 4
    for k2 in range(k, R):
        _sub_row_outer(A[k2, a:a + m], lr, C, k2, M, ma)


@njit(fastmath=True, error_model="numpy", cache=True)
def _sub_row_outer(Ak, lr, C, k, M, ma):
    """Ak -= lr Σ_i C[i, k] M[i] for one row of A, four batch rows per pass."""
    B, m = C.shape[0], Ak.shape[0]
    i = 0
    while i + 4 <= B:
        c0, c1, c2, c3 = lr * C[i, k], lr * C[i + 1, k], lr * C[i + 2, k], lr * C[i + 3, k]
        M0, M1 = M[i, ma:ma + m], M[i + 1, ma:ma + m]
        M2, M3 = M[i + 2, ma:ma + m], M[i + 3, ma:ma + m]
        for j in range(m):
            Ak[j] -= (c0 * M0[j] + c1 * M1[j]) + (c2 * M2[j] + c3 * M3[j])
        i += 4
    for i2 in range(i, B):
        c = lr * C[i2, k]
        Mi = M[i2, ma:ma + m]
        for j in range(m):
            Ak[j] -= c * Mi[j]


@njit(fastmath=True, error_model="numpy", cache=True)
def _sub_scaled(A, a, lr, dA, da, m):
    for k in range(A.shape[0]):
        Ak, dAk = A[k, a:a + m], dA[k, da:da + m]
        for j in range(m):
            Ak[j] -= lr * dAk[j]
