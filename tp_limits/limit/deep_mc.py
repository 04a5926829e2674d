"""Monte Carlo limit of a deep (L >= 2) feature-learning MLP, Stein Ż estimator (docs §4).

Particles carry Z^U ∈ R^d, Z^{nV} ∈ R^{d_out} and, per hidden matrix W^l
(2 <= l <= L), the history of training forward vectors x^{l-1}_{s,i} with
their hats Ẑ^{W^l x} (family F^l) and backward vectors δh^l_{s,i} with their
hats Ẑ^{W^lᵀ δh} (family G^l), stored as rows (k x N).  All batch items (and
all evaluation inputs) of a layer are processed as one (m, N) block.

**Hats.** New hats of vectors V (m rows) in a family with stored vectors X and
hats Ĥ are drawn jointly and conditionally on the family (docs §4.3):
C = σ² XXᵀ/N, κ = σ² XVᵀ/N, K_0 = σ² VVᵀ/N, β = C⁺κ,
Ĥ_new = βᵀĤ + (K_0 - κᵀβ)^{1/2} ε   (m = 1: ĥ = Ĥβ + √(κ_0 - κᵀβ) ε).

**Ż by Stein's lemma** (docs §4.4(c), §11.2).  The hats ĝ of one family are
jointly Gaussian and independent of every other base variable, so
E[∇_ĝ Z] = Cov(ĝ)⁻¹ E[ĝ Z]: the least-squares coefficients of Z regressed on
the family's sampled hats.  Hence

    forward   Ż^{W^l x} = σ_l² Σ_j Z^{δh_j} b_j,   b = OLS of Z^x on the G^l hats,
    backward  Ż^{W^lᵀ δh} = σ_l² Σ_e Z^{x_e} b_e,  b = OLS of Z^{δh} on the F^l hats
              (including the current step's forward hats).

The ΔW^l sums use the stored pairs (s < t): -η_l e_l Σ Z^{δh_{s,i}} E[Z^{x_{s,i}} Z^x]
forward and -η_l e_l Σ Z^{x_{s,j}} E[Z^{δh_{s,j}} Z^{δh}] backward.
``decoupled=True`` drops the Ż terms.  Gram matrices and their
(ridge-regularized) inverses are cached per family, so a step costs a few passes over the
histories: time O(N L B T² (B+E)) in all, memory O(N L B T).
"""
from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from ..backend import numpy_backend
from ..errors import DivergenceError
from ..losses import get_loss
from ..steps import StepLoop
from ._history import combine_rows, mean_and_cross, rows_dot
from .deep_tangent import Tangents

_NP = numpy_backend()
RCOND = 1e-10
GROUPS = 32          # particle groups for the batch-means standard error


CHUNK_ELEMENTS = 1 << 19     # float64 elements of one block of a history (4 MiB: in cache)


def _chunks(rows):
    """Column slices of ``rows`` (k, N) of about CHUNK_ELEMENTS elements each."""
    k, N = rows.shape
    width = max(256, CHUNK_ELEMENTS // max(k, 1))
    return [slice(j, min(j + width, N)) for j in range(0, N, width)]


def rows_times(rows, V):
    """rows @ Vᵀ -> (k, m) float64, for stored ``rows`` (k, N) and float64 V (m, N).

    float64 storage: one BLAS product; float32: the mixed-precision kernel of
    _history.py (float32 reads, float64 sums).
    """
    return rows @ V.T if rows.dtype == np.float64 else rows_dot(rows, V)


def times_rows(coef, rows):
    """coefᵀ @ rows -> (m, N) float64, for stored ``rows`` (k, N)."""
    return coef.T @ rows if rows.dtype == np.float64 else combine_rows(coef, rows)


class Family:
    """Stored vectors and hats of one hat family, with cached Gram matrices.

    Rows are stored vectors (capacity x N, row-contiguous) in the storage
    ``dtype``; every Gram matrix, coefficient and new particle value is
    float64.  ``Cv`` = σ² ⟨v_i, v_j⟩ and ``Ch`` = ⟨ĥ_i, ĥ_j⟩ grow by one block
    per store, and their inverses are recomputed once per store, so a query
    costs O(N k) (one pass over the history) plus O(k²).

    Conditional variances below ``RCOND`` times the new vectors' own variance
    are rounding noise and treated as zero: a vector that repeats a stored
    one must reuse its hat.
    """

    def __init__(self, N: int, capacity: int, sigma2: float, dtype=np.float64):
        self.vec = np.zeros((capacity, N), dtype)
        self.hat = np.zeros((capacity, N), dtype)
        self.Cv = np.zeros((capacity, capacity))
        self.Ch = np.zeros((capacity, capacity))
        self.k = 0
        self.sigma2 = sigma2
        self._Pv = self._Ph = None

    def _solver(self, C):
        """A function x -> C⁺ x for the current k x k Gram matrix.

        The inverse of C + ridge I, ridge = RCOND x (mean diagonal), computed
        once per store (O(k³), in NumPy's BLAS: mixing in SciPy's separate
        BLAS here makes the two thread pools fight); a solve is then one
        k x k product.  The ridge is the regularized pseudo-inverse and only
        matters on (near-)degenerate families, e.g. repeated inputs.
        """
        k = self.k
        A = C[:k, :k]
        scale = float(np.trace(A)) / k
        if not scale > 0.0:
            # every stored vector is 0 (e.g. backward vectors at step 0 with a
            # zero readout): the family carries no information, C⁺ = 0
            return lambda x: np.zeros_like(x)
        try:
            P = np.linalg.inv(A + RCOND * scale * np.eye(k))
        except np.linalg.LinAlgError:
            P = np.linalg.pinv(A, rcond=RCOND, hermitian=True)
        return lambda x: P @ x

    def sample(self, V, rng, will_store: bool = False):
        """Hats for the rows of V (m, N), jointly, conditional on the stored hats.

        Returns (hats, info); ``info`` = (κ, K_0, cross) is what :meth:`store`
        needs.  With ``will_store`` the cross products ⟨ĥ_old, ĥ_new⟩ are
        accumulated in the same pass over the stored hats that forms the
        conditional mean βᵀĤ, so storing costs no extra pass.  Hats are
        rounded to the storage dtype here, so the particles use exactly the
        values that are stored.
        """
        N, k, m = V.shape[1], self.k, len(V)
        dt = self.hat.dtype
        # the values that will be stored (float32 storage rounds them first)
        Vs = V if dt == np.float64 else V.astype(dt).astype(np.float64)
        K0 = self.sigma2 * (Vs @ Vs.T) / N
        if k == 0:
            kappa, beta, cond = np.zeros((0, m)), None, K0
        else:
            if self._Pv is None:
                self._Pv = self._solver(self.Cv)
            kappa = self.sigma2 * rows_times(self.vec[:k], Vs) / N         # (k, m)
            beta = self._Pv(kappa)
            cond = K0 - kappa.T @ beta
        w, Q = np.linalg.eigh((cond + cond.T) / 2)
        w = np.where(w > RCOND * max(float(np.max(np.diag(K0))), 0.0), w, 0.0)
        hats = (Q * np.sqrt(w)) @ rng.standard_normal((m, N))
        cross = np.zeros((k, m)) if will_store else None
        if k and dt != np.float64:
            cross = mean_and_cross(beta, self.hat[:k], hats, will_store)
        elif k:
            H = self.hat[:k]
            for c in _chunks(H):               # one pass: mean, then cross while in cache
                hats[:, c] += beta.T @ H[:, c]
                if will_store:
                    cross += H[:, c] @ hats[:, c].T
        elif dt != np.float64:
            hats = hats.astype(dt).astype(np.float64)
        return hats, (kappa, K0, cross)

    def store(self, V, hats, info):
        kappa, K0, cross = info
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
        self._Pv = self._Ph = None

    def stein_coefficients(self, Z):
        """σ² b (k, m): b = least-squares coefficients of each row of Z on the hats.

        Σ_j v_j (σ² b_j) is then the Ż term; the caller combines it with the
        ΔW coefficients into one pass over the stored vectors.
        """
        k = self.k
        if self._Ph is None:
            self._Ph = self._solver(self.Ch)
        return self.sigma2 * self._Ph(rows_times(self.hat[:k], Z) / Z.shape[1])


def deep_monte_carlo(net, routine, switches, particles: int, rng, decoupled: bool,
                     eval_steps: set, on_step, zdot: str = "stein", dtype=np.float64):
    """One Monte Carlo run (see :func:`_deep_monte_carlo_run`).

    With float32 histories the passes over them are Numba kernels
    (_history.py) between small BLAS products; the two thread pools would
    spin against each other, so BLAS is pinned to one thread for the run
    (measured: 2x faster than leaving both pools at two threads).
    """
    args = (net, routine, switches, particles, rng, decoupled, eval_steps, on_step, zdot, dtype)
    if np.dtype(dtype) == np.float64:
        return _deep_monte_carlo_run(*args)
    with threadpool_limits(limits=1, user_api="blas"):
        return _deep_monte_carlo_run(*args)


def _deep_monte_carlo_run(net, routine, switches, particles: int, rng, decoupled: bool,
                          eval_steps: set, on_step, zdot: str = "stein", dtype=np.float64):
    """One Monte Carlo run; returns the result dict shared by the limit engines.

    ``zdot``: 'stein' (regression on the sampled hats) or 'tangent' (forward-mode
    derivatives, limit/deep_tangent.py); irrelevant when ``decoupled``.
    ``dtype``: storage of the histories (float32 halves memory and traffic;
    every expectation is still accumulated in float64).
    """
    L, d, do, N = net.L, net.d_in, net.d_out, particles
    T, B = routine.steps, routine.batch_size
    Xe, E = routine.eval_inputs, len(routine.eval_inputs)
    Y = routine.targets(do)
    loss = get_loss(routine.loss)
    phi = net.nonlinearity
    sig = net.effective_sigma
    alpha = net.output_multiplier
    eta = [routine.lr * m * float(e) for m, e in
           zip(net.lr_mult, list(switches.train_layers) + [switches.readout_update])]
    ZU = sig[0] * rng.standard_normal((N, d))
    half = rng.standard_normal((N // 2, do))
    ZV = (sig[L] if switches.readout_init else 0.0) * np.concatenate([half, -half])
    cap = B * T
    F = {l: Family(N, cap, sig[l - 1] ** 2, dtype) for l in range(2, L + 1)}
    G = {l: Family(N, cap, sig[l - 1] ** 2, dtype) for l in range(2, L + 1)}
    npairs = {l: 0 for l in range(2, L + 1)}       # pairs (s < t) usable by ΔW^l
    tan = Tangents(N, L, d, do, cap, sig) if zdot == "tangent" and not decoupled else None

    def coefficients(own, other, z, kappa, l, zc):
        """Coefficients (k, m) on ``other``'s stored vectors for the new rows z of ``own``.

        Ż part: ``zc`` (tangent means) or a Stein regression on ``other``'s
        hats; ΔW part: -η_l E[v_{s,i} z] over the stored pairs, which are the
        first rows of the conditioning covariances κ/σ² already computed for
        the hat.  Both multiply ``other``'s stored vectors, so the caller
        needs one pass over them.
        """
        k, kp = other.k, npairs[l]
        if k == 0:
            return np.zeros((0, len(z)))
        if decoupled:
            coef = np.zeros((k, len(z)))
        else:
            coef = zc if zc is not None else other.stein_coefficients(z)
        if kp:
            coef[:kp] -= eta[l - 1] * kappa[:kp] / own.sigma2
        return coef

    def forward(Xin, store: bool):
        """Pre-activations h^1..h^L and activations x^1..x^L, each (m, N), for inputs Xin.

        The m hats of a layer are drawn jointly, conditional on the stored
        training hats: for training items this equals drawing them one after
        the other, conditioning each on the previous ones.  With the tangent
        estimator also returns the derivative arrays (J_h, J_x) per layer.
        """
        hs = [Xin @ ZU.T]
        xs = [phi.phi(hs[0], _NP)]
        Jh = Jx = None
        if tan is not None:
            Jh = [tan.input(Xin)]
            Jx = [tan.times(Jh[0], phi.dphi(hs[0], _NP))]
        for l in range(2, L + 1):
            x = xs[-1]
            hat, info = F[l].sample(x, rng, will_store=store)
            kappa = info[0]
            k0, kG = F[l].k, G[l].k
            zc = tan.forward_zdot(l, Jx[-1], kG) if tan is not None and kG else None
            coef = coefficients(F[l], G[l], x, kappa, l, zc)
            h = hat + times_rows(coef, G[l].vec[:kG]) if kG else hat
            if tan is not None:
                Jh.append(tan.forward_J(l, coef, kG, len(x), k0 if store else None))
                if store:
                    tan.store_forward(l, k0, Jx[-1])
            if store:
                F[l].store(x, hat, info)
            hs.append(h)
            xs.append(phi.phi(h, _NP))
            if tan is not None:
                Jx.append(tan.times(Jh[-1], phi.dphi(h, _NP)))
        return hs, xs, (Jh, Jx)

    groups = np.array_split(np.arange(N), GROUPS)

    def output(xL, step, with_se=False):
        """f̊ for each row of x^L (m, N) -> (m, d_out), and its batch-means error."""
        contrib = alpha * xL[:, :, None] * ZV[None]                       # (m, N, do)
        f = contrib.mean(axis=1)
        if not np.all(np.isfinite(f)):
            raise DivergenceError(step, None, "output f")
        if not with_se:
            return f
        gm = np.stack([contrib[:, g].mean(axis=1) for g in groups])
        return f, gm.std(axis=0, ddof=1) / np.sqrt(len(groups))

    f_eval = np.full((T + 1, E, do), np.nan)
    se = np.full((T + 1, E, do), np.nan)
    f_train = np.zeros((T, B, do))
    losses = np.zeros(T)
    h2 = np.full((T + 1, L, E), np.nan)
    dh2 = np.full((T + 1, L, E), np.nan)
    x2 = np.full((T + 1, L, E), np.nan)
    dx2 = np.full((T + 1, L, E), np.nan)
    fk = np.full((T + 1, E, E), np.nan)
    init = []                          # (h^l_0, x^l_0) on the eval inputs, from the first evaluation

    def evaluate(t):
        if t not in eval_steps:
            return
        hs, xs, _ = forward(Xe, store=False)
        if not init:
            init.extend(zip(hs, xs))
        for l, ((h, x), (h0, x0)) in enumerate(zip(zip(hs, xs), init)):
            h2[t, l] = np.mean(h ** 2, axis=1)
            dh2[t, l] = np.mean((h - h0) ** 2, axis=1)
            x2[t, l] = np.mean(x ** 2, axis=1)
            dx2[t, l] = np.mean((x - x0) ** 2, axis=1)
        f_eval[t], se[t] = output(xs[-1], t, with_se=True)
        fk[t] = xs[-1] @ xs[-1].T / N

    loop = StepLoop(T, on_step)
    with loop:
        evaluate(0)
        for t in loop:
            Xb, Yb = routine.X[t * B:(t + 1) * B], Y[t * B:(t + 1) * B]
            hs, xs, (Jh, Jx) = forward(Xb, store=True)
            xL = xs[-1]
            fb = output(xL, t)
            f_train[t] = fb
            losses[t] = float(np.mean(loss.value(fb, Yb, np)))
            chi = loss.grad(fb, Yb, np) / B
            dx = alpha * (chi @ ZV.T)                                      # δx^L, (B, N)
            dh = dx * phi.dphi(hs[-1], _NP)                                 # δh^L
            if tan is not None:
                Jdh = tan.product(tan.readout(alpha, chi), phi.dphi(hs[-1], _NP), dx,
                                  phi.d2phi(hs[-1], _NP), Jh[-1])
            for l in range(L, 1, -1):
                hat, info = G[l].sample(dh, rng, will_store=True)
                kappa = info[0]
                k0, kF = G[l].k, F[l].k
                zc = tan.backward_zdot(l, Jdh, kF) if tan is not None else None
                coef = coefficients(G[l], F[l], dh, kappa, l, zc)
                dx = hat + times_rows(coef, F[l].vec[:kF])
                if tan is not None:
                    Jdx = tan.backward_J(l, coef, kF, B, k0)
                    tan.store_backward(l, k0, Jdh)
                G[l].store(dh, hat, info)
                h = hs[l - 2]
                dh = dx * phi.dphi(h, _NP)
                if tan is not None:
                    Jdh = tan.product(Jdx, phi.dphi(h, _NP), dx, phi.d2phi(h, _NP), Jh[l - 2])
            if tan is not None:
                tan.update(eta[0], Xb, Jdh, eta[L], alpha, chi, Jx[-1])
            ZU_new = ZU - eta[0] * dh.T @ Xb                              # δh^1 ξᵀ summed over i
            ZV = ZV - eta[L] * alpha * xL.T @ chi
            ZU = ZU_new
            for l in range(2, L + 1):
                npairs[l] += B
            evaluate(t + 1)
    return {"f_eval": f_eval, "se": se, "f_train": f_train, "loss": losses, "h2": h2,
            "dh2": dh2, "x2": x2, "dx2": dx2, "fk": fk, "completed": loop.completed,
            "interrupted": loop.interrupted, "diverged": loop.diverged}
