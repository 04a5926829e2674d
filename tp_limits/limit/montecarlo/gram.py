"""Solves with a family's growing Gram matrix, through a Cholesky factor extended block by
block (docs/theory.md §4.3).

A family's Gram matrix C (k x k) grows by one block of m rows per store, and
every query needs (C + Λ)⁻¹ x for a few columns x.  Recomputing an inverse
(or a factorization) per store costs O(k³), eight per step — at k in the
hundreds more than the passes over the histories of a short run.
Extending a Cholesky factor costs O(k² m): with C partitioned as
[[C11, C12], [C21, C22]] and L11 L11ᵀ = C11 + Λ1 already known,

    X = L11⁻¹ C12,      L22 L22ᵀ = C22 + λ I − Xᵀ X,      L = [[L11, 0], [Xᵀ, L22]],

and a query is two triangular solves, O(k² m), like a product with an inverse.

**Ridge.** Λ is the ridge that makes the pseudo-inverse of a (near-)degenerate
family well defined (repeated inputs, linear φ): each block gets
λ = ``RCOND`` x the mean diagonal of C when it is factored, and a family whose
rows are all zero so far (backward vectors at step 0 under a zero readout)
gets λ = 1, so its rows, whose κ are exactly 0, keep coefficients 0.
If rounding makes the new Schur complement indefinite, its eigenvalues are
clipped at λ before the factorization.
"""
from __future__ import annotations

import numpy as np

RCOND = 1e-10


def _scipy_triangular():
    from functools import partial

    from scipy.linalg import solve_triangular
    return partial(solve_triangular, check_finite=False)   # finite by construction


def _cupy_triangular():
    from cupyx.scipy.linalg import solve_triangular
    return solve_triangular


def triangular_solver(xp):
    """The triangular solve (a, b, lower, trans) -> a⁻¹ b for arrays of ``xp`` (chosen once)."""
    return _scipy_triangular() if xp is np else _cupy_triangular()


def grown_square(M, capacity: int, k: int, xp):
    """M, or a zero (capacity × capacity) matrix holding M's leading k × k block when M is
    smaller than that (a growing Gram matrix or factor given more room)."""
    if capacity <= len(M):
        return M
    grown = xp.zeros((capacity, capacity))
    grown[:k, :k] = M[:k, :k]
    return grown


class GramFactor:
    """x -> (C[:k, :k] + Λ)⁻¹ x for the leading k x k block of a growing Gram matrix C."""

    def __init__(self, capacity: int, xp=np, solve_triangular=None):
        self.xp = xp
        self.L = xp.zeros((capacity, capacity))
        self.k = 0                          # rows factored so far
        self._tri = solve_triangular or triangular_solver(xp)

    def reserve(self, capacity: int) -> None:
        """Room for a Gram matrix of ``capacity`` rows, the factored ones kept."""
        self.L = grown_square(self.L, capacity, self.k, self.xp)

    def truncate(self, k: int) -> None:
        """Forget the factor's rows from the k-th on (the Gram matrix lost them)."""
        self.k = min(self.k, k)

    def extend(self, C, k: int) -> None:
        """Factor rows self.k .. k of C (C[:k, :k] symmetric, rows before self.k unchanged)."""
        k0, xp = self.k, self.xp
        if k <= k0:
            return
        scale = float(xp.trace(C[:k, :k])) / k
        ridge = RCOND * scale if scale > 0.0 else 1.0
        S = C[k0:k, k0:k] + ridge * xp.eye(k - k0)
        if k0:
            X = self._tri(self.L[:k0, :k0], C[:k0, k0:k], lower=True)
            self.L[k0:k, :k0] = X.T
            S = S - X.T @ X
        S = (S + S.T) / 2
        try:
            L22 = xp.linalg.cholesky(S)
            if not bool(xp.all(xp.isfinite(L22))):      # CuPy reports failure as NaN
                raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            w, Q = xp.linalg.eigh(S)
            L22 = xp.linalg.cholesky((Q * xp.maximum(w, ridge)) @ Q.T)
        self.L[k0:k, k0:k] = L22
        self.k = k

    def solve(self, x):
        """(C + Λ)⁻¹ x for x (k, m): forward then backward triangular solve."""
        L = self.L[:self.k, :self.k]
        y = self._tri(L, x, lower=True)
        return self._tri(L, y, lower=True, trans="T")
