"""The one-hidden-layer feature-learning limit (docs/theory.md §2, §5.1, §8).

Constants, read off the MLP and its classification:

    σ_u, σ_v = effective σ_1, σ_2;   α = output multiplier;
    lr_u = α η_1 e_1,  lr_v = α η_2 e_V   (η_l = lr · lr_mult_l; e_l, e_V switches),
    f̊(ξ) = α E[Z^{nV} φ(Z^U ξ)],   χ_{t,i} = ∇ℓ(f̊_t(ξ_{t,i}), y_{t,i}) / B.

Three methods share this description:

* ``monte_carlo``: N antithetic particles, the fused kernel of _numba.py
  (or its NumPy twin, ``kernel="numpy"``); standard errors from batch means
  over particle blocks, or from independent replicates when replicates > 1;
* ``quadrature``: tensor Gauss–Hermite nodes (d + d_out <= 3), run twice
  (k and ~3k/4 nodes per coordinate); the difference is reported as the
  error estimate;
* ``exact`` (φ = id): the closed form of linear.py.
"""
from __future__ import annotations

import numpy as np

from ..errors import DivergenceError, SpecError
from ..losses import get_loss
from ..steps import StepLoop
from . import linear
from ._numba import MIN_BLOCK, PHI_CODES, block_size, n_columns, sweep
from .montecarlo import check_memory, run_replicates
from .particles import MAX_NODES, antithetic_particles, quadrature_particles
from .reference import sweep_numpy


class Problem:
    """The constants of one (MLP, Routine, classification) triple."""

    def __init__(self, net, routine, switches):
        self.net, self.routine = net, routine
        self.d, self.d_out = net.d_in, net.d_out
        self.sigma_u, self.sigma_v = net.effective_sigma
        self.alpha = net.output_multiplier
        self.readout_init = switches.readout_init
        self.eta_u = routine.lr * net.lr_mult[0] * float(switches.train_layers[0])
        self.eta_v = routine.lr * net.lr_mult[1] * float(switches.readout_update)
        self.X, self.B, self.T = routine.X, routine.batch_size, routine.steps
        # writable C-ordered copies: one compiled kernel signature for every call
        self.Y = np.array(routine.targets(net.d_out), dtype=np.float64)
        self.Xe = np.array(routine.eval_inputs, dtype=np.float64)
        self.loss = get_loss(routine.loss)
        self.phi = net.phi

    def batch(self, t):
        s = slice(t * self.B, (t + 1) * self.B)
        return np.array(self.X[s], dtype=np.float64), self.Y[s]


def bytes_per_particle(d: int, d_out: int, dtype, stats: bool, K: int) -> float:
    """Particle storage (plus the copy of Z^U_0 for statistics) and the per-block sums."""
    return np.dtype(dtype).itemsize * (d + d_out + (d if stats else 0)) + 8.0 * K / MIN_BLOCK


def _block_weights(w, N, nb, block):
    if len(w) == 1:
        sizes = np.minimum(block, N - np.arange(nb) * block)
        return sizes * w[0]
    return np.add.reduceat(w, np.arange(0, N, block))


def run_particles(prob: Problem, U, V, w, eval_steps: set, stats: bool, kernel: str, on_step):
    """Run the particle system once.  Returns a dict of arrays (NaN where not evaluated)."""
    T, E, do = prob.T, len(prob.Xe), prob.d_out
    d, N = U.shape
    block = block_size(d, do, prob.B, E, N, stats)
    nb = (N + block - 1) // block
    Wb = _block_weights(w, N, nb, block)
    U0 = U.copy() if stats else np.zeros((d, 1), U.dtype)   # unread without stats
    code = PHI_CODES[prob.phi]
    empty_x, empty_chi = np.zeros((0, d)), np.zeros((0, do))
    res = {"f_eval": np.full((T + 1, E, do), np.nan), "se": np.full((T + 1, E, do), np.nan),
           "f_train": np.zeros((T, prob.B, do)), "loss": np.zeros(T),
           "h2": np.full((T + 1, E), np.nan), "dh2": np.full((T + 1, E), np.nan),
           "x2": np.full((T + 1, E), np.nan), "dx2": np.full((T + 1, E), np.nan),
           "fk": np.full((T + 1, E, E), np.nan)}

    def do_sweep(t_after, Xb, chi, lr_u, lr_v, Xn):
        """Sweep producing the state after ``t_after`` updates; store its evaluations."""
        evaluate = t_after in eval_steps
        Xe = prob.Xe if evaluate else empty_x
        st = stats and evaluate
        Bn = len(Xn)
        if kernel == "numba":
            out = np.zeros((nb, n_columns(Bn, len(Xe), do, st)))
            sweep(U, V, w, U0, code, Xb, chi, lr_u, lr_v, Xn, Xe, st, block, out)
        else:
            out = sweep_numpy(U, V, w, U0, prob.phi, Xb, chi, lr_u, lr_v, Xn, Xe, st, block)
        tot = out.sum(axis=0)
        f_next = prob.alpha * tot[: Bn * do].reshape(Bn, do)
        if not np.all(np.isfinite(tot)):
            raise DivergenceError(t_after, None, "output f")
        if evaluate:
            c0, c1 = Bn * do, (Bn + E) * do
            res["f_eval"][t_after] = prob.alpha * tot[c0:c1].reshape(E, do)
            means = out[:, c0:c1] / Wb[:, None]
            dev = means - tot[c0:c1][None, :]
            var = (Wb[:, None] ** 2 * dev ** 2).sum(axis=0) * nb / max(nb - 1, 1)
            res["se"][t_after] = abs(prob.alpha) * np.sqrt(var).reshape(E, do)
            if st:
                s = tot[c1:]
                for j, key in enumerate(("h2", "dh2", "x2", "dx2")):
                    res[key][t_after] = s[j * E:(j + 1) * E]
                res["fk"][t_after] = s[4 * E:].reshape(E, E)
        return f_next

    lr_u, lr_v = prob.alpha * prob.eta_u, prob.alpha * prob.eta_v
    loop = StepLoop(T, on_step)
    with loop:
        f_next = do_sweep(0, empty_x, empty_chi, 0.0, 0.0, prob.batch(0)[0])
        for t in loop:
            Xb, Yb = prob.batch(t)
            f = f_next
            res["f_train"][t] = f
            res["loss"][t] = float(np.mean(prob.loss.value(f, Yb, np)))
            chi = np.ascontiguousarray(prob.loss.grad(f, Yb, np) / prob.B)
            Xn = prob.batch(t + 1)[0] if t + 1 < T else empty_x
            f_next = do_sweep(t + 1, Xb, chi, lr_u, lr_v, Xn)
    res.update(completed=loop.completed, interrupted=loop.interrupted, diverged=loop.diverged)
    return res


def run_exact_linear(prob: Problem, on_step):
    f_eval, f_train, completed, st, diverged = linear.linear_one_hidden(
        prob.sigma_u, prob.sigma_v, prob.alpha, prob.eta_u, prob.eta_v, prob.readout_init,
        prob.X[: prob.T * prob.B], prob.Y[: prob.T * prob.B], prob.B,
        lambda f, y: prob.loss.grad(f, y, np), prob.Xe, on_step)
    loss = np.array([np.mean(prob.loss.value(f_train[t], prob.batch(t)[1], np))
                     for t in range(completed)] + [0.0] * (prob.T - completed))
    return {"f_eval": f_eval, "se": np.zeros_like(f_eval), "f_train": f_train, "loss": loss,
            "h2": st["h2"], "dh2": st["dh2"], "x2": st["h2"], "dx2": st["dh2"], "fk": st["fk"],
            "completed": completed, "diverged": diverged,
            "interrupted": completed < prob.T and diverged is None}


def stats_from(res, upto: int) -> dict:
    """Per-layer statistics with the finite engine's names.

    Second moments come as (T+1, E) for one hidden layer or (T+1, L, E).
    """
    rt = lambda a: np.sqrt(np.mean(a if a.ndim == 3 else a[:, None, :], axis=2))[:upto]  # noqa
    fk = res["fk"][:upto]
    change = np.sqrt(np.mean((fk - fk[0]) ** 2, axis=(1, 2)))
    return {"h_rms": rt(res["h2"]), "x_rms": rt(res["x2"]), "dh_rms": rt(res["dh2"]),
            "dx_rms": rt(res["dx2"]), "feature_kernel": fk, "feature_kernel_change": change}


def simulate_one_hidden(net, routine, switches, particles, seed, replicates, method,
                        eval_every, stats, kernel, dtype, on_step):
    """Run the chosen method; return (result dict, meta additions)."""
    prob = Problem(net, routine, switches)
    T = prob.T
    eval_steps = set(range(0, T + 1, eval_every)) | {T}
    if method == "exact":
        return run_exact_linear(prob, on_step), {"se_method": "exact (closed form)"}
    if kernel not in ("numba", "numpy"):
        raise SpecError(f"kernel = {kernel!r}; use 'numba' or 'numpy'")
    K = n_columns(prob.B, len(prob.Xe), prob.d_out, stats)
    if method == "quadrature":
        dims = prob.d + (prob.d_out if prob.readout_init else 0)
        k = min(MAX_NODES, max(2, int(round(particles ** (1.0 / dims)))))
        coarse = max(2, int(round(0.75 * k)))
        check_memory(k ** dims, bytes_per_particle(prob.d, prob.d_out, dtype, stats, K),
                     "the quadrature nodes")
        runs = []
        for nodes in (k, coarse):
            U, V, w = quadrature_particles(nodes, prob.d, prob.d_out, prob.sigma_u, prob.sigma_v,
                                           prob.readout_init, dtype)
            runs.append(run_particles(prob, U, V, w, eval_steps, stats, kernel,
                                      on_step if nodes == k else (lambda t: None)))
        res = runs[0]
        res["se"] = np.abs(runs[0]["f_eval"] - runs[1]["f_eval"])
        return res, {"particles": k ** dims, "nodes_per_coordinate": k,
                     "se_method": f"|f(k={k}) - f(k={coarse})|: difference to a coarser rule"}
    N = particles + (particles % 2 if prob.readout_init else 0)   # antithetic pairs
    check_memory(N, bytes_per_particle(prob.d, prob.d_out, dtype, stats, K), "the particles")

    def run_one(rng):
        U, V, w = antithetic_particles(N, prob.d, prob.d_out, prob.sigma_u, prob.sigma_v,
                                       prob.readout_init, rng, dtype)
        return run_particles(prob, U, V, w, eval_steps, stats, kernel, on_step)

    res, extra = run_replicates(run_one, seed, replicates,
                                "batch means over particle blocks (ignores error carried by "
                                "chi; use replicates > 1 for the full Monte Carlo error)")
    extra["particles"] = N
    return res, extra
