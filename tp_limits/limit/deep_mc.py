"""Monte Carlo limit of a deep (L >= 2) feature-learning MLP, Stein Ż estimator (docs §4).

Particles carry Z^U ∈ R^d, Z^{nV} ∈ R^{d_out} and, per hidden matrix W^l
(2 <= l <= L), the history of training forward vectors x^{l-1}_{s,i} with
their hats Ẑ^{W^l x} (family F^l) and backward vectors δh^l_{s,i} with their
hats Ẑ^{W^lᵀ δh} (family G^l).  Arrays are (N, k): particles x stored vectors.

**Hats.** A new hat of vector v in a family with stored vectors X and hats Ĥ
is sampled conditionally on the family (docs §4.3):
C = σ² XᵀX/N, κ = σ² Xᵀv/N, κ_0 = σ² vᵀv/N, β = C⁺κ,
ĥ = Ĥβ + √max(κ_0 - κᵀβ, 0) ε.

**Ż by Stein's lemma** (docs §4.4(c), §11.2).  The hats ĝ of one family are
jointly Gaussian and independent of every other base variable, so
E[∇_ĝ Z] = Cov(ĝ)⁻¹ E[ĝ Z]: the least-squares coefficients of Z regressed on
the family's sampled hats.  Hence

    forward   Ż^{W^l x} = σ_l² Σ_j Z^{δh_j} b_j,   b = OLS of Z^x on the G^l hats,
    backward  Ż^{W^lᵀ δh} = σ_l² Σ_e Z^{x_e} b_e,  b = OLS of Z^{δh} on the F^l hats
              (including the current step's forward hats).

The ΔW^l sums use the stored pairs (s < t): -η_l e_l Σ Z^{δh_{s,i}} E[Z^{x_{s,i}} Z^x]
forward and -η_l e_l Σ Z^{x_{s,j}} E[Z^{δh_{s,j}} Z^{δh}] backward.
``decoupled=True`` drops the Ż terms.  Cost per vector O(N k) plus a k x k
pseudo-inverse (k <= B T): time O(N L B T² (B+E)), memory O(N L B T).
"""
from __future__ import annotations

import numpy as np

from ..backend import numpy_backend
from ..losses import get_loss

_NP = numpy_backend()
RCOND = 1e-10
GROUPS = 32          # particle groups for the batch-means standard error


class Family:
    """Stored vectors and their hats for one hat family (capacity known in advance)."""

    def __init__(self, N: int, capacity: int, sigma2: float):
        self.vec = np.zeros((N, capacity))
        self.hat = np.zeros((N, capacity))
        self.k = 0
        self.sigma2 = sigma2

    def sample(self, v, rng):
        """A hat for v, conditional on the stored hats (not stored)."""
        N, k = len(v), self.k
        kappa0 = self.sigma2 * float(v @ v) / N
        if k == 0:
            return np.sqrt(kappa0) * rng.standard_normal(N)
        X, H = self.vec[:, :k], self.hat[:, :k]
        C = self.sigma2 * (X.T @ X) / N
        kappa = self.sigma2 * (X.T @ v) / N
        beta = np.linalg.pinv(C, rcond=RCOND, hermitian=True) @ kappa
        resid = max(kappa0 - float(kappa @ beta), 0.0)
        return H @ beta + np.sqrt(resid) * rng.standard_normal(N)

    def store(self, v, hat):
        self.vec[:, self.k] = v
        self.hat[:, self.k] = hat
        self.k += 1

    def stein(self, z, upto=None):
        """σ² Σ_j vec_j b_j with b the least-squares coefficients of z on the hats."""
        k = self.k if upto is None else upto
        if k == 0:
            return 0.0
        H = self.hat[:, :k]
        b = np.linalg.lstsq(H, z, rcond=RCOND)[0]
        return self.sigma2 * (self.vec[:, :k] @ b)


def deep_monte_carlo(net, routine, switches, particles: int, rng, decoupled: bool,
                     eval_steps: set, on_step):
    """One Monte Carlo run; returns the result dict shared by the limit engines."""
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
    F = {l: Family(N, cap, sig[l - 1] ** 2) for l in range(2, L + 1)}
    G = {l: Family(N, cap, sig[l - 1] ** 2) for l in range(2, L + 1)}
    npairs = {l: 0 for l in range(2, L + 1)}       # pairs (s < t) usable by ΔW^l

    def forward(zeta, store: bool):
        """Pre-activations h^1..h^L (list of (N,)) for one input."""
        hs = [ZU @ zeta]
        for l in range(2, L + 1):
            x = phi.phi(hs[-1], _NP)
            hat = F[l].sample(x, rng)
            h = hat.copy()
            if not decoupled:
                h += G[l].stein(x)
            k = npairs[l]
            if k:
                coef = F[l].vec[:, :k].T @ x / N                 # E[x_{s,i} x]
                h -= eta[l - 1] * (G[l].vec[:, :k] @ coef)
            if store:
                F[l].store(x, hat)
            hs.append(h)
        return hs

    groups = np.array_split(np.arange(N), GROUPS)

    def output(hL, with_se=False):
        contrib = alpha * ZV * phi.phi(hL, _NP)[:, None]       # (N, do)
        f = contrib.mean(axis=0)
        if not with_se:
            return f
        gm = np.array([contrib[g].mean(axis=0) for g in groups])
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
    h0 = [None] * E

    def evaluate(t):
        if t not in eval_steps:
            return
        xL = []
        for e in range(E):
            hs = forward(Xe[e], store=False)
            if h0[e] is None:
                h0[e] = hs
            for l in range(L):
                xv, x0 = phi.phi(hs[l], _NP), phi.phi(h0[e][l], _NP)
                h2[t, l, e] = np.mean(hs[l] ** 2)
                dh2[t, l, e] = np.mean((hs[l] - h0[e][l]) ** 2)
                x2[t, l, e] = np.mean(xv ** 2)
                dx2[t, l, e] = np.mean((xv - x0) ** 2)
            xL.append(phi.phi(hs[-1], _NP))
            f_eval[t, e], se[t, e] = output(hs[-1], with_se=True)
        A = np.array(xL)
        fk[t] = A @ A.T / N

    completed, interrupted = 0, False
    try:
        evaluate(0)
        for t in range(T):
            Xb, Yb = routine.X[t * B:(t + 1) * B], Y[t * B:(t + 1) * B]
            fwd = [forward(Xb[i], store=True) for i in range(B)]
            fb = np.array([output(hs[-1]) for hs in fwd])
            f_train[t] = fb
            losses[t] = float(np.mean(loss.value(fb, Yb, np)))
            chi = loss.grad(fb, Yb, np) / B
            dh1 = []
            for i in range(B):
                hs = fwd[i]
                dh = alpha * (ZV @ chi[i]) * phi.dphi(hs[-1], _NP)      # δh^L
                for l in range(L, 1, -1):
                    hat = G[l].sample(dh, rng)
                    dx = hat.copy()
                    if not decoupled:
                        dx += F[l].stein(dh)
                    k = npairs[l]
                    if k:
                        coef = G[l].vec[:, :k].T @ dh / N               # E[δh_{s,j} δh]
                        dx -= eta[l - 1] * (F[l].vec[:, :k] @ coef)
                    G[l].store(dh, hat)
                    dh = dx * phi.dphi(hs[l - 2], _NP)
                dh1.append(dh)
            ZU_new = ZU - eta[0] * sum(np.outer(dh1[i], Xb[i]) for i in range(B))
            ZV = ZV - eta[L] * alpha * sum(np.outer(phi.phi(fwd[i][-1], _NP), chi[i])
                                           for i in range(B))
            ZU = ZU_new
            for l in range(2, L + 1):
                npairs[l] += B
            evaluate(t + 1)
            completed = t + 1
            on_step(t)
    except KeyboardInterrupt:
        interrupted = True
    return {"f_eval": f_eval, "se": se, "f_train": f_train, "loss": losses, "h2": h2,
            "dh2": dh2, "x2": x2, "dx2": dx2, "fk": fk, "completed": completed,
            "interrupted": interrupted, "diverged": None}
