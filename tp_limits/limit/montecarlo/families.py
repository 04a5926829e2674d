"""Hat families of the deep limit: stored vectors, their hats, cached Gram matrices
(docs/theory.md §4).

For a hidden matrix W^l the forward family F^l holds the training vectors
x^{l-1}_{s,i} with their hats Ẑ^{W^l x}, the backward family G^l the vectors
δh^l_{s,i} with their hats Ẑ^{W^lᵀ δh}.  Within a family the hats are jointly
Gaussian with covariance σ_l² E[Z^x Z^{x'}]; families are independent.

**Sampling.** New hats of vectors V (m rows) are drawn jointly and
conditionally on the family's stored hats Ĥ: with C = σ² XXᵀ/N,
κ = σ² XVᵀ/N, K_0 = σ² VVᵀ/N and β = C⁺κ,

    Ĥ_new = βᵀĤ + (K_0 - κᵀβ)^{1/2} ε.

**Stein coefficients.** The hats ĝ of a family are independent of every
other base variable, so E[∇_ĝ Z] = Cov(ĝ)⁻¹ E[ĝ Z]: the least-squares
coefficients of Z regressed on the family's sampled hats.
"""
from __future__ import annotations

import numpy as np

from .gram import RCOND, GramFactor, grown_square
from .passes import HostPasses


def _host(a):
    """A small device array's host copy (a host array itself)."""
    return a.get() if hasattr(a, "get") else a



class NonFiniteLaw(ArithmeticError):
    """The Gaussian law of new hats has a non-finite covariance: the run has diverged
    (the engine reports the step and layer)."""

class Family:
    """Stored vectors and hats of one hat family, with cached Gram matrices.

    Rows are stored vectors (capacity x N, row-contiguous) in the storage
    ``dtype``; every Gram matrix, coefficient and new particle value is
    float64.  ``Cv`` = σ² ⟨v_i, v_j⟩ and ``Ch`` = ⟨ĥ_i, ĥ_j⟩ grow by one block
    per store, and so do their Cholesky factors (gram.py: O(k² m) per block,
    where an inverse would cost O(k³)), so a query costs O(N k) (one pass
    over the history) plus O(k² m).

    Conditional variances below ``RCOND`` times the new vectors' own variance
    are rounding noise and treated as zero: a vector that repeats a stored
    one must reuse its hat.
    """

    def __init__(self, N: int, capacity: int, sigma2: float, dtype=np.float64,
                 passes=HostPasses()):
        self.passes = passes                 # passes.py: the backend's passes over the rows
        xp = self.xp = passes.xp
        # on the host (passes.zeros): rows on cache lines, and every page written once now,
        # not first from inside the parallel passes that store rows (engine/aligned.py)
        self.vec = passes.zeros((capacity, N), dtype)
        self.hat = passes.zeros((capacity, N), dtype)
        self.Cv = xp.zeros((capacity, capacity))
        self.Ch = xp.zeros((capacity, capacity))
        self.k = 0
        self.sigma2 = sigma2
        self._fv = GramFactor(capacity, xp, passes.solve_triangular)   # of Cv
        self._fh = GramFactor(capacity, xp, passes.solve_triangular)   # of Ch

    def _solve(self, factor, C, x):
        """(C + Λ)⁻¹ x through the family's Cholesky factor, extended to k rows first."""
        factor.extend(C, self.k)
        return factor.solve(x)

    def sample(self, V, draws, store_rows: int = 0):
        """Hats for the rows of V (m, N), jointly, conditional on the stored hats.

        Returns (hats, info); ``info`` = (κ, K_0, cross) is what :meth:`store`
        needs.  The cross products ⟨ĥ_old, ĥ_new⟩ of the first ``store_rows``
        rows (those :meth:`store` will keep) are accumulated in the same pass
        over the stored hats that forms the conditional mean βᵀĤ, so storing
        costs no extra pass.  Hats are
        rounded to the storage dtype here, so the particles use exactly the
        values that are stored.
        """
        N, k, m, xp = V.shape[1], self.k, len(V), self.xp
        dt = self.hat.dtype
        # the values that will be stored (float32 storage rounds them first)
        Vs = V if dt == np.float64 else V.astype(dt).astype(np.float64)
        K0 = self.sigma2 * self.passes.rows_times(Vs, Vs) / N
        if k == 0:
            kappa, beta, cond = xp.zeros((0, m)), None, K0
        else:
            kappa = self.sigma2 * self.passes.rows_times(self.vec[:k], Vs) / N   # (k, m)
            beta = self._solve(self._fv, self.Cv, kappa)
            cond = K0 - kappa.T @ beta
        # the m x m root on the host for every backend (one LAPACK keeps a device run's hats
        # those of the host run with the same draws).  The symmetric root Q √w Qᵀ, not
        # Q √w: any root gives the hats their law, but only the symmetric one is a
        # continuous function of the covariance (eigenvectors swap where eigenvalues cross,
        # and their signs are arbitrary), so a run with fixed draws is continuous in the
        # learning rate and every other constant (docs/theory.md §4.3)
        C = _host((cond + cond.T) / 2)
        if not np.all(np.isfinite(C)):
            raise NonFiniteLaw("the conditional covariance of the new hats is not finite")
        w, Q = np.linalg.eigh(C)
        w = np.where(w > RCOND * max(float(np.max(np.diag(_host(K0)))), 0.0), w, 0.0)
        eps = xp.ascontiguousarray(draws.normal((m, N)))
        hats = self.passes.times_rows(xp.asarray((Q * np.sqrt(w)) @ Q.T), eps)
        cross = xp.zeros((k, store_rows)) if store_rows else None
        if k:
            # one pass: the conditional mean, and the cross products for the store
            cross = self.passes.mean_and_cross(beta, self.hat[:k], hats, store_rows)
        elif dt != np.float64:
            hats = hats.astype(dt).astype(np.float64)
        return hats, (kappa, K0, cross)

    def store(self, V, hats, info, rows: int | None = None):
        """Store the first ``rows`` (default all) of the sampled V and hats: the rows after
        them (evaluation inputs drawn jointly with the training items) are not kept."""
        kappa, K0, cross = info
        if rows is not None and rows < len(V):
            V, hats = V[:rows], hats[:rows]
            kappa, K0 = kappa[:, :rows], K0[:rows, :rows]
        k, m = self.k, len(V)
        N = V.shape[1]
        self.vec[k:k + m], self.hat[k:k + m] = V, hats
        self.Cv[:k, k:k + m] = kappa
        self.Cv[k:k + m, :k] = kappa.T
        self.Cv[k:k + m, k:k + m] = K0
        self.Ch[:k, k:k + m] = cross / N
        self.Ch[k:k + m, :k] = cross.T / N
        self.Ch[k:k + m, k:k + m] = hats @ hats.T / N
        self.k += m

    def reserve(self, capacity: int) -> None:
        """Room for ``capacity`` rows, the stored ones kept: a run continued past the steps
        it was sized for (a pretrained network's frozen layers in its fine-tuning)."""
        k = self.k
        if capacity <= len(self.vec):
            return
        for name in ("vec", "hat"):
            rows = getattr(self, name)
            grown = self.passes.zeros((capacity, rows.shape[1]), rows.dtype)
            grown[:k] = rows[:k]
            setattr(self, name, grown)
        self.Cv = grown_square(self.Cv, capacity, k, self.xp)
        self.Ch = grown_square(self.Ch, capacity, k, self.xp)
        self._fv.reserve(capacity)
        self._fh.reserve(capacity)

    def truncate(self, k: int) -> None:
        """Forget every stored row from the k-th on (a step interrupted mid-way)."""
        self.k = k
        self._fv.truncate(k)
        self._fh.truncate(k)

    def stein_coefficients(self, Z):
        """σ² b (k, m): b = least-squares coefficients of each row of Z on the hats.

        Σ_j v_j (σ² b_j) is then the Ż term; the caller combines it with the
        ΔW coefficients into one pass over the stored vectors.
        """
        k = self.k
        moments = self.passes.rows_times(self.hat[:k], Z) / Z.shape[1]
        return self.sigma2 * self._solve(self._fh, self.Ch, moments)
