"""The one-hidden-layer feature-learning limit (docs/theory.md §2, §5.1).

Constants come from the MLP (:meth:`~tp_limits.MLP.limit_constants`):
σ_u, σ_v = σ_1 s, σ_2 s; α the output multiplier; η_1 e_1, η_2 e_V the
switched learning rates, so that

    f̊(ξ) = α E[Z^{nV} φ(Z^U ξ)],   χ_{t,i} = ∇ℓ(f̊_t(ξ_{t,i}), y_{t,i}) / B,

and each sweep moves Z^U and Z^{nV} by the optimizer's rule fed α η_1 e_1 and
α η_2 e_V times their gradient sums under SGD (contract.py).  Three engines share
this description:

* :class:`ParticleEngine` with ``method="monte_carlo"``: N antithetic
  particles through one of the sweeps of sweeps.py — the fused kernel of
  sweep.py, its NumPy twin (``kernel="numpy"``), or on a GPU (``backend="cupy"``)
  the CUDA kernel of sweep_cuda.py; standard errors from batch means over
  particle blocks, or from independent replicates when replicates > 1;
* :class:`ParticleEngine` with ``method="quadrature"``: tensor Gauss–Hermite
  nodes (d + d_out <= 3), run twice (k and ~3k/4 nodes per coordinate); the
  difference is reported as the error estimate;
* :class:`LinearEngine` (φ = id): the closed form of linear.py.
"""
from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from ...engine.budget import refuse_beyond_budget
from ...engine.memory import require_particles, usable_bytes
from ...engine.progress import compile_notice
from ...engine.steps import StepLoop, check_size
from ...errors import DivergenceError, SpecError
from ..base import FeatureLearningEngine
from ..replicates import run_replicates
from ..result import LimitResult
from ..sampling import Draws, fitting_count, fitting_particles_advice
from .blocks import MIN_BLOCK, block_size
from .columns import STAT_FIELDS, SweepColumns, n_columns
from .contract import SweepData, sweep_args
from .cost import time_estimate
from ..exact.one_hidden import linear_one_hidden
from .particles import MAX_NODES, quadrature_particles, random_particles
from .phi import cache_pays, cache_planes
from .sweep_cuda import MAX_D
from .sweep_cuda import fits as fits_cuda
from .sweeps import make_sweep
from .tiling import tiles_for

NAME = "limit/one_hidden"
#: the coarser quadrature rules, as fractions of the node count, and the factor on the
#: larger of their two differences that makes the error estimate a bound: measured on
#: tanh (k = 20..79, data D1) the true error reached 1.28 times that larger difference,
#: and 3.7 times the one difference of two rules that the estimate used to be
#: (docs/theory.md §2.3)
COARSER = (0.75, 0.5625)
ERROR_FACTOR = 2.0


def bytes_per_particle(d: int, d_out: int, dtype, stats: bool, K: int,
                       state: int = 0) -> float:
    """Particle storage (plus the copy of Z^U_0 for statistics, and ``state`` arrays of the
    optimizer per coordinate: heavy-ball buffers, Adam moments) and the per-block sums."""
    rows = (d + d_out) * (1 + state) + (d if stats else 0)
    return np.dtype(dtype).itemsize * rows + 8.0 * K / MIN_BLOCK


def _block_weights(w, N, nb, block):
    if len(w) == 1:
        sizes = np.minimum(block, N - np.arange(nb) * block)
        return sizes * w[0]
    return np.add.reduceat(w, np.arange(0, N, block))


class LinearEngine(FeatureLearningEngine):
    """φ = id: the exact closed form (no Monte Carlo error)."""

    name, method = NAME, "exact"

    def run(self, on_step) -> LimitResult:
        return linear_one_hidden(self.problem, self.const, self.options.eval_steps(self.problem.T),
                                 on_step, self.options.divergence_bound)


class ParticleEngine(FeatureLearningEngine):
    """Particles (Monte Carlo) or quadrature nodes, through the fused sweep.

    On a GPU (``backend="cupy"``) the Monte Carlo particles live on the device
    and each sweep is the whole-array twin run by CuPy; quadrature rules are
    small and stay on the host."""

    name = NAME
    on_backend = has_kernel = has_sampler = True

    def __init__(self, problem, classification, options):
        super().__init__(problem, classification, options)
        self.method = options.method or "monte_carlo"
        if self.method == "quadrature":
            self.backend = "numpy"
            if options.sampler not in (None, "antithetic"):
                raise SpecError(f"sampler={options.sampler!r} draws Monte Carlo particles; "
                                "method='quadrature' uses Gauss–Hermite nodes")
        net = problem.net
        self.kernel = self._kernel(options.kernel, net.d_in)
        self.stats = options.record_stats
        self.cols_K = n_columns(problem.B, problem.E, net.d_out, self.stats)
        per = bytes_per_particle(net.d_in, net.d_out, options.dtype, self.stats, self.cols_K,
                                 len(problem.optimizer.rule.slots))
        if self.method == "quadrature":
            dims = net.d_in + (net.d_out if self.const.readout_init else 0)
            if dims > 3:
                raise SpecError(f"quadrature needs at most 3 Gaussian coordinates (d + d_out "
                                f"with a nonzero readout); this problem has {dims}. Use "
                                "method='monte_carlo'")
            if not net.nonlinearity.smooth:
                raise SpecError(
                    f"quadrature cannot give an honest error for {net.phi}: at its kink "
                    "Gauss–Hermite rules converge slowly and unevenly, and the rules' "
                    "differences understated the error 5-12 times (docs/theory.md §2.3); "
                    "use method='monte_carlo', whose standard error is a sampling error")
            self.nodes = min(MAX_NODES, max(2, int(round(options.particles ** (1.0 / dims)))))
            self.coarse = tuple(max(2, int(round(self.nodes * q))) for q in COARSER)
            self._check_resolution(dims)
            self.particles = self.nodes ** dims
            require_particles(self.particles, per, "the quadrature nodes", fixed=3 * (
                LimitResult.bytes_needed(problem.T, problem.E, problem.B, net.d_out,
                                         1 if self.stats else None)),
                fixed_what="the three rules' recorded results",
                fixed_advice=LimitResult.shrink_advice(problem.E, self.stats))
            self.cache_phi = self._cache_fits(per)
            self.info = {"kernel": self.kernel, "particles": self.particles,
                         "nodes_per_coordinate": self.nodes}
        else:
            self.sampler, self.particles = options.sampler_used, options.particle_count
            at_once = min(options.workers, options.replicates)     # replicates held at once
            kept = options.replicates * LimitResult.bytes_needed(
                problem.T, problem.E, problem.B, net.d_out, 1 if self.stats else None)
            require_particles(self.particles, per * at_once, "the particles"
                              + (f" in {at_once} worker processes" if at_once > 1 else ""),
                              self.b, fixed=kept, fixed_what="the recorded results",
                              fixed_advice=LimitResult.shrink_advice(problem.E, self.stats),
                              usable=lambda k: fitting_count(k, self.sampler))
            self.cache_phi = self._cache_fits(per, at_once)
            self.bar_total = problem.T * options.replicates
            self.info = {"kernel": self.kernel, "particles": self.particles,
                         "sampler": self.sampler}
            if self.kernel == "numba":            # the host kernel's measured prices
                def price(n):
                    return time_estimate(problem, n, self.stats, options.replicates, at_once)
                estimate = price(self.particles)
                refuse_beyond_budget(
                    estimate, options.time_budget,
                    f"this one-hidden-layer Monte Carlo run (T = {problem.T} steps, "
                    f"{self.particles:,} particles, replicates = {options.replicates})",
                    "fewer steps, particles or replicates",
                    fitting_particles_advice(price, self.particles, options.time_budget,
                                             self.sampler))
                self.info["time_estimate_s"] = round(estimate, 3)
        self.info["phi_cache"] = self.cache_phi
        # the pre-activation tiles of the fused kernel, one choice for the run (tiling.py)
        self.info["tiles"] = (tiles_for(net.d_in, problem.B, self.cache_phi)
                              if self.kernel == "numba" else None)

    def _cache_fits(self, per: float, copies: int = 1) -> bool:
        """Whether the sweeps keep φ (and φ′ where it does not follow from φ) of the next
        batch, ``cache_planes`` · B float64 per particle, for the update that follows:
        on the host kernels, where it pays (``cache_pays``: for the φ that cost an
        evaluation always, for id and relu from ``CACHE_MIN_D`` on), and only where it
        fits beside the particles (it is a saving, never a reason to refuse a run)."""
        net = self.problem.net
        need = copies * self.particles * (per + 8 * cache_planes(net.phi) * self.problem.B)
        return (self.kernel in ("numba", "numpy") and cache_pays(net.phi, net.d_in)
                and need <= usable_bytes(self.b))

    def _kernel(self, asked, d: int) -> str:
        """The sweep: 'numba' on the host, the fused 'cuda' kernel on a GPU (the array twin
        'numpy' for inputs too wide for its registers); refuses a kernel off its device."""
        on_host = self.backend == "numpy"
        kernel = asked or ("numba" if on_host else "cuda" if fits_cuda(d) else "numpy")
        if kernel == "numba" and not on_host:
            raise SpecError(f"kernel='numba' runs on the CPU; with backend={self.backend!r} use "
                            "kernel='cuda' (the default there) or 'numpy' (the array twin)")
        if kernel == "cuda" and on_host:
            raise SpecError("kernel='cuda' runs on a GPU: use backend='cupy' (or the default "
                            "kernel='numba' on the CPU)")
        if kernel == "cuda" and not fits_cuda(d):
            raise SpecError(f"kernel='cuda' takes inputs of dimension <= {MAX_D}, got d = {d}; "
                            "use kernel='numpy' (the array twin)")
        return kernel

    def _check_resolution(self, dims: int) -> None:
        """Refuse a Gauss–Hermite rule too coarse for the pre-activations' scale.

        A smooth saturating φ (tanh, gelu, ...) changes over a unit of its
        argument; with pre-activations σ_1 ξ·z of standard deviation s that is
        1/s in z, while k Gauss–Hermite nodes are π/√k apart near 0.  Below
        k = 2π²s² (√2 nodes per feature width) the rule misses the feature and
        its difference to a coarser rule stops being an honest error estimate
        (docs/theory.md §2.3).  Positively homogeneous φ (relu, id) have no scale.
        """
        p = self.problem
        if p.net.nonlinearity.homogeneous:
            return
        X = np.vstack([p.routine.training_inputs, p.eval_inputs])
        s = self.const.sigma[0] * float(np.max(np.linalg.norm(X, axis=1)))
        needed = int(np.ceil(2 * np.pi ** 2 * s * s))
        if self.nodes < needed:
            fix = (f"use at least particles={needed ** dims:,} ({needed} nodes per coordinate)"
                   if needed <= MAX_NODES else
                   f"that is more than the {MAX_NODES} a rule can have")
            raise SpecError(
                f"quadrature with {self.nodes} nodes per coordinate cannot resolve {p.net.phi} "
                f"at pre-activation scale σ_1·max|ξ| = {s:.3g}: it needs {needed}; {fix}, "
                "or use method='monte_carlo' (exact in law at any scale)")

    def run(self, on_step) -> LimitResult:
        p, o, c = self.problem, self.options, self.const
        d, do = p.net.d_in, p.net.d_out
        if self.kernel == "numba":
            with compile_notice(f"the one-hidden-layer particle kernel for {p.net.phi}"):
                make_sweep(self.kernel, self.b).warm_up(p.net.phi, p.optimizer, o.dtype)
        if self.method == "quadrature":
            runs = []
            for nodes in (self.nodes, *self.coarse):
                U, V, w = self._placed(quadrature_particles(nodes, d, do, c.sigma[0],
                                                            c.sigma[1], c.readout_init, o.dtype))
                runs.append(self._sweeps(U, V, w, on_step if nodes == self.nodes
                                         else (lambda t: None)))
                del U, V
            res = runs[0]
            res.f_eval_se = ERROR_FACTOR * np.maximum(
                np.abs(runs[0].f_eval - runs[1].f_eval), np.abs(runs[1].f_eval - runs[2].f_eval))
            res.se_dof = None                     # an error estimate, not a sampling error
            k1, k2 = self.coarse
            res.se_method = (f"{ERROR_FACTOR:g} max(|f(k={self.nodes}) - f(k={k1})|, "
                             f"|f(k={k1}) - f(k={k2})|): a bound from three rules")
            res.info = dict(self.info)
            return res

        res = run_replicates(lambda rng: self.run_once(rng, on_step), o.seed, o.replicates,
                             task=_Replicate(self), workers=o.workers, executor=o.executor,
                             on_done=lambda: [on_step(t) for t in range(p.T)])
        if res is None:                    # Ctrl-C before any worker's replicate finished
            res = LimitResult.empty(p.T, p.E, p.B, do, 1 if self.stats else None)
            res.interrupted, res.se_method = True, "none: interrupted before any replicate"
        res.info = {**self.info, **res.info}
        return res

    def run_once(self, rng, on_step=lambda t: None) -> LimitResult:
        """One Monte Carlo run from antithetic particles drawn with ``rng``."""
        p, o, c = self.problem, self.options, self.const
        U, V, w = self._placed(random_particles(
            self.particles, p.net.d_in, p.net.d_out, c.sigma[0], c.sigma[1], c.readout_init,
            Draws(self.b, rng, o.random), o.dtype, self.b.xp, self.sampler))
        return self._sweeps(U, V, w, on_step)

    def _placed(self, particles):
        """(U, V, w) with U and V on cache lines (engine/aligned.py), so that the sweep's
        vector loads of a row do not straddle two lines; the drawn arrays are dropped
        here, not held beside their copies for the whole run."""
        U, V, w = particles
        return self.b.as_aligned(U), self.b.as_aligned(V), w

    def _sweeps(self, U, V, w, on_step) -> LimitResult:
        """Run the particle system once (one sweep per step) from particles (U, V, w)."""
        p, o = self.problem, self.options
        T, E, do, B = p.T, p.E, p.net.d_out, p.B
        eval_steps = o.eval_steps(T)
        d, N = U.shape
        block = block_size(d, do, B, E, N, self.stats)
        nb = (N + block - 1) // block
        Wb = _block_weights(w, N, nb, block)
        xp, b = self.b.xp, self.b
        U0 = b.zeros_aligned((d, N) if self.stats else (d, 1), U.dtype)  # unread without stats
        if self.stats:
            U0[...] = U
        Xe = xp.array(p.eval_inputs)                     # writable: one kernel signature
        empty_x, empty_chi = xp.zeros((0, d)), xp.zeros((0, do))
        c, opt = self.const, p.optimizer
        alpha = c.alpha
        # the optimizer's state beside the particles: slot s of row r is row s·rows + r
        k = len(opt.rule.slots)
        SU = b.zeros_aligned((k * d, N if k else 1), U.dtype)
        SV = b.zeros_aligned((k * do, N if k else 1), U.dtype)
        decay_u, decay_v = opt.shrinks(c.decay)
        run_sweep = make_sweep(self.kernel, b)
        # φ (and φ′ unless it follows from φ) of the next batch, kept by each sweep for
        # the next one's update
        cache = (b.zeros_aligned((cache_planes(p.net.phi), B, N), np.float64) if self.cache_phi
                 else None)
        # the coordinate moments ((T+1)·E·E for the feature kernel) only when asked for
        res = LimitResult.empty(T, E, B, do, L=1 if self.stats else None)

        def do_sweep(t_after, Xb, chi, Xn):
            """Sweep producing the state after ``t_after`` updates; store its evaluations."""
            evaluate = t_after in eval_steps
            update = max(t_after, 1)               # t_after = 0: no batch, nothing moves
            rate = p.rate(update - 1)
            scale_u, h_u = opt.coordinate(c.eta[0], alpha, decay_u, update, rate)
            scale_v, h_v = opt.coordinate(c.eta[1], alpha, decay_v, update, rate)
            Xs = Xe if evaluate else empty_x
            cols = SweepColumns(len(Xn), len(Xs), do, self.stats and evaluate)
            data = SweepData(U, V, w, U0, Xb, chi, scale_u, scale_v, Xn, Xs, cols.stats, block,
                             SU, SV, cache, cache is not None and t_after > 0)
            out = run_sweep(sweep_args(data, opt, h_u, h_v, p.net.phi, xp,
                                       self.info["tiles"] or "plain"))
            tot = out.sum(axis=0)
            check_size(alpha * tot[: (cols.Bn + cols.E) * do], t_after, None, "output f",
                       o.divergence_bound)
            if not np.all(np.isfinite(tot)):
                raise DivergenceError(t_after, None, "statistics")
            if evaluate:
                res.f_eval[t_after] = alpha * cols.eval_outputs(tot)
                dev = cols.eval_outputs(out) / Wb[:, None, None] - cols.eval_outputs(tot)
                var = (Wb[:, None, None] ** 2 * dev ** 2).sum(axis=0) * nb / max(nb - 1, 1)
                res.f_eval_se[t_after] = abs(alpha) * np.sqrt(var)
                if cols.stats:
                    m = cols.moments(tot)
                    for key in STAT_FIELDS:
                        getattr(res.moments, key)[t_after, 0] = m[key]
                    res.moments.feature_kernel[t_after] = m["feature_kernel"]
            return alpha * cols.next_outputs(tot)

        loop = StepLoop(T, on_step)
        with loop:
            f_next = do_sweep(0, empty_x, empty_chi, xp.asarray(p.batch(0)[0]))
            for t in loop:
                Xb, Yb = p.batch(t)
                f = f_next
                res.f_train[t] = f
                res.loss[t] = float(np.mean(p.loss.value(f, Yb, np)))
                chi = xp.ascontiguousarray(xp.asarray(p.loss.grad(f, Yb, np) / B))
                Xn = xp.asarray(p.batch(t + 1)[0]) if t + 1 < T else empty_x
                f_next = do_sweep(t + 1, xp.asarray(Xb), chi, Xn)
        res.se_method = ("batch means over particle blocks (ignores error carried by chi; "
                         "use replicates > 1 for the full Monte Carlo error)")
        res.se_dof = nb - 1
        return res.finish(loop)


class _Replicate:
    """Picklable ``task(seed_sequence)``: one Monte Carlo run in a worker process."""

    def __init__(self, engine: ParticleEngine):
        self.engine = copy.copy(engine)        # without the executor: it stays here
        self.engine.options = replace(engine.options, executor=None, workers=1)

    def __call__(self, seed_seq) -> LimitResult:
        return self.engine.run_once(np.random.default_rng(seed_seq))
