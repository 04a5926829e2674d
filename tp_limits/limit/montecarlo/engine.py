"""The deep Monte Carlo engine: replicated runs of :class:`~.montecarlo.DeepRun`, or, for
an optimizer that is not linear in the gradients (Adam), of the partner-particle run of
partners.py, with the options and memory checked first (docs/theory.md §4, §10.6)."""
from __future__ import annotations

import contextlib

import numpy as np
from threadpoolctl import threadpool_limits

from ...engine.budget import refuse_beyond_budget
from ...engine.heap import reused_heap
from ...engine.memory import require_particles
from ...engine.progress import compile_notice
from ...errors import SpecError
from ..base import FeatureLearningEngine
from ..replicates import run_replicates
from ..result import LimitResult
from ..sampling import fitting_count, fitting_particles_advice
from . import history_kernels
from .montecarlo import GROUPS, DeepRun, RunSpec, qmc_dims
from .msign import MsignDeepRun
from .partners import bytes_per_particle as partner_bytes
from .partners import run_partners
from .zdot import estimator_class

NAME = "limit/deep_monte_carlo"


def _run(spec: RunSpec, rng, on_step) -> LimitResult:
    """The run the optimizer's traits call for: partner particles (an entrywise nonlinear
    update), a coefficient matrix over stored pairs (a matrix function of the buffer), or
    the schedule of a linear optimizer."""
    opt = spec.problem.optimizer
    if opt.partners:
        return run_partners(spec, rng, on_step)
    return (MsignDeepRun if opt.pair_matrix else DeepRun)(spec, rng).run(on_step)


def run_once(spec: RunSpec, rng, on_step=lambda t: None) -> LimitResult:
    """One Monte Carlo run.

    On the host the passes over the histories are Numba kernels
    (history_kernels.py) between small BLAS products; the two thread pools
    would spin against each other, so BLAS is pinned to one thread for the
    run (the two pools would otherwise take turns at the cores).  The
    run's large temporaries come from a reused heap (engine/heap.py), not
    from fresh mappings that fault in page by page.
    """
    with host_settings(spec):
        return _run(spec, rng, on_step)


@contextlib.contextmanager
def host_settings(spec: RunSpec):
    """What a run on the host holds while it works (run_once's docstring): the history
    kernels compiled, BLAS on one thread, the reused heap.  A GPU run needs none of them."""
    if spec.backend != "numpy":
        yield
        return
    with compile_notice("the history kernels"):
        history_kernels.warm_up()
    with threadpool_limits(limits=1, user_api="blas"), reused_heap():
        yield


def run_in_worker(spec: RunSpec, seed_seq) -> LimitResult:
    """One replicate in a worker process (no progress callback there)."""
    return run_once(spec, np.random.default_rng(seed_seq))


def cost_units(problem, particles: int, partners: int = 0) -> tuple:
    """The terms of one replicate's cost (docs/performance.md, "Time estimates"):

    * hist = N (L − 1) B (B + E) T²/2: each step's hats conditioned on every stored one;
    * step = N T (L + 1)(B + E): each step's forward and backward pass over the particles;
    * call = T (L + 1): each layer's library calls and bookkeeping, whatever N;
    * pair = M N T (L + 1)/2¹⁴: the M partner particles of an optimizer not linear in the
      gradients (Adam; M counts both sets where they are debiased);
    * core = (L − 1) B³ T⁴/4: a pair-matrix optimizer's k × k cores (Muon), k = B t."""
    net, T, B, E = problem.net, problem.T, problem.B, problem.E
    L, N = net.L, particles
    core = (L - 1) * B ** 3 * T ** 4 / 4 if problem.optimizer.pair_matrix else 0.0
    return (N * (L - 1) * B * (B + E) * T * T / 2, N * T * (L + 1) * (B + E), T * (L + 1),
            partners * N * T * (L + 1) / 2 ** 14, core)


#: seconds per unit of each term of :func:`cost_units` on the two-core machine of
#: docs/performance.md, fitted to measured runs by benchmarks/bench_cost_model.py --fit
#: (the history term for float64 storage; float32 histories read half the bytes and
#: cost HIST_FLOAT32 of it there)
COST = (1.4e-9, 2.48e-8, 1.85e-3, 4.2e-4, 5.4e-9)
HIST_FLOAT32 = 2.4 / 3.8


def time_estimate(problem, particles: int, dtype, replicates: int, workers: int,
                  partners: int = 0) -> float:
    """Seconds the deep Monte Carlo run should take: the terms of :func:`cost_units`
    times their fitted costs, times the replicates run one after another."""
    units = cost_units(problem, particles, partners)
    cost = list(COST)
    if np.dtype(dtype).itemsize == 4:
        cost[0] *= HIST_FLOAT32
    rounds = -(-replicates // max(workers, 1))
    return rounds * float(np.dot(units, cost))


class MonteCarloEngine(FeatureLearningEngine):
    """Replicated Monte Carlo runs of the deep feature-learning limit."""

    name, method = NAME, "monte_carlo"
    on_backend = has_sampler = True

    def __init__(self, problem, classification, options):
        super().__init__(problem, classification, options)
        net = problem.net
        if options.method == "quadrature":
            why = (f"L = {net.L} hidden layers" if net.L > 1 else
                   "a routine in phases (the fused sweep does not read which steps freeze a "
                   "layer)" if problem.clocks.phased else
                   "biases or a normalization (the fused sweep takes plain MLPs)"
                   if not problem.program.plain else
                   "an optimizer whose step needs the particles' means first")
            raise SpecError("method='quadrature' applies to one hidden layer only, in the "
                            f"fused sweep, which this problem does not run in: {why}; use "
                            "method='monte_carlo'")
        decoupled = options.backprop == "decoupled"
        zdot = estimator_class(options.zdot, decoupled, net.nonlinearity)
        if zdot.name == "tangent" and not problem.program.plain:
            raise SpecError("zdot='tangent' follows plain MLPs only: its tangents do not take "
                            "the skip connections of a residual network, carry the biases' "
                            "particles or go through a normalization's moments; use "
                            "zdot='stein' (the default), which needs no chain rule")
        if zdot.name == "tangent" and not problem.optimizer.plain:
            raise SpecError(f"zdot='tangent' follows plain SGD only; with {problem.optimizer} "
                            "use zdot='stein' (the default)")
        self.sampler, self.particles = options.sampler_used, options.particle_count
        if self.particles < GROUPS:
            raise SpecError(f"particles = {options.particles!r}: the deep Monte Carlo engine "
                            f"needs at least {GROUPS} (its batch-means standard error splits "
                            f"the particles into {GROUPS} groups); thousands are typical")
        partners, debias = self._partners(problem, options)
        self.spec = RunSpec(problem, self.const, self.particles,
                            zdot, options.dtype, options.eval_steps(problem.T),
                            options.record_stats, options.divergence_bound, partners, debias,
                            self.backend, options.random, self.sampler)
        self.workers = min(options.workers, options.replicates)    # replicates held at once
        what = ("the deep engine's histories"
                + (" and derivative arrays (zdot='tangent'; 'stein' needs far less)"
                   if zdot.name == "tangent" else "")
                + (f" in {self.workers} worker processes" if self.workers > 1 else ""))
        T = problem.T
        require_particles(self.particles, self.bytes_per_particle() * self.workers, what, self.b,
                          fixed=self.history_bytes() * self.workers + self.result_bytes(),
                          fixed_what=f"the (B·T)² history Gram arrays (T = {T} steps) and "
                                     "the recorded results",
                          fixed_advice="shorten the run" + (
                              f"; {LimitResult.shrink_advice(problem.E, True)}"
                              if self.spec.record_stats else ""),
                          usable=lambda k: fitting_count(k, self.sampler))
        self.bar_total = problem.T * options.replicates
        def price(n):
            return time_estimate(problem, n, options.dtype, options.replicates, self.workers,
                                 partners * (2 if debias else 1))
        estimate = price(self.particles)
        refuse_beyond_budget(
            estimate, options.time_budget,
            f"this deep Monte Carlo run (its cost grows like T²: T = {problem.T} steps, "
            f"{self.particles:,} particles, replicates = {options.replicates})",
            "fewer steps, particles or replicates",
            fitting_particles_advice(price, self.particles, options.time_budget,
                                     self.sampler))
        self.info = {"particles": self.particles, "zdot": zdot.name, "workers": self.workers,
                     "sampler": self.sampler, "time_estimate_s": round(estimate, 3)}
        if partners:
            self.info.update(partners=partners, debias_partners=debias)

    def _partners(self, problem, options):
        """(M, debias) for an optimizer that is not linear in the gradients (Adam,
        docs/theory.md §10.6); (0, False) for one that is."""
        if not problem.optimizer.partners:
            if options.partners is not None or not options.debias_partners:
                raise SpecError(f"partners= and debias_partners= apply to the deep limit of "
                                f"entrywise optimizers that are not linear in the gradients "
                                f"(Adam training only, of those built); {problem.optimizer} "
                                "follows "
                                + ("a schedule" if problem.optimizer.linear else
                                   "a coefficient matrix over stored pairs") + " instead")
            return 0, False
        N, debias = self.particles, options.debias_partners
        most = N // 2 if debias else N
        M = options.partners if options.partners is not None else min(256, most)
        if M > most:
            raise SpecError(f"partners = {M} needs {'2 × ' if debias else ''}partners <= "
                            f"particles = {N}" + (" (debias_partners runs M and 2M)"
                                                  if debias else ""))
        return M, debias

    def history_bytes(self) -> float:
        """What does not grow with N but with T²: per hidden matrix, the two families'
        covariances of their stored vectors and hats and the factors of both, four
        float64 (B·T)² arrays each (families.py, gram.py)."""
        p = self.problem
        cap = p.B * p.T
        # a pair-matrix optimizer (Muon) keeps one more: the pairs' coefficient matrix Ω
        arrays = 8 + p.optimizer.pair_matrix
        return 8.0 * (p.net.L - 1) * arrays * cap * cap

    def result_bytes(self) -> float:
        """Every replicate's recorded outputs and statistics, which the run keeps until the
        replicates are combined (the (T+1)·E·E feature kernels with ``record`` stats)."""
        p = self.problem
        return self.options.replicates * LimitResult.bytes_needed(
            p.T, p.E, p.B, p.net.d_out, p.net.L if self.spec.record_stats else None)

    def bytes_per_particle(self) -> float:
        """Histories in the storage dtype; one pass's float64 arrays, the statistics'
        initial values and the estimator's own arrays beside them."""
        p, s = self.problem, self.spec
        L, d, do, B, T, E = p.net.L, p.net.d_in, p.net.d_out, p.B, p.T, p.E
        hist = 4 * (L - 1) * B * T                                  # vec + hat, F and G
        slots = 1 + len(getattr(p.optimizer.rule, "slots", ()))
        biases = len(p.program.hidden_bias_layers) * slots     # Z^{b^l} and their state
        per = np.dtype(s.dtype).itemsize * hist + 8 * (d + do + biases + 4 * L * max(B, E))
        if s.record_stats:
            per += 8 * 2 * L * E                                    # h_0, x_0 of the eval inputs
        if s.partners:
            per += partner_bytes(L, d, do, s.partners * (2 if s.debias else 1),
                                 len(p.optimizer.rule.slots))
        if s.sampler == "qmc":
            per += 8 * qmc_dims(s)                                  # the Sobol' coordinates
        return per + s.zdot.bytes_per_particle(L, d, do, B, T, E)

    def run(self, on_step) -> LimitResult:
        o, spec = self.options, self.spec
        res = run_replicates(lambda rng: run_once(spec, rng, on_step), o.seed, o.replicates,
                             task=_Task(spec), workers=o.workers, executor=o.executor,
                             on_done=lambda: [on_step(t) for t in range(spec.problem.T)])
        if res is None:                    # Ctrl-C before any worker's replicate finished
            p = spec.problem
            res = LimitResult.empty(p.T, p.E, p.B, p.net.d_out,
                                    p.net.L if spec.record_stats else None)
            res.interrupted, res.se_method = True, "none: interrupted before any replicate"
        res.info = {**self.info, **res.info}
        return res


class _Task:
    """Picklable ``task(seed_sequence)`` for the process pool."""

    def __init__(self, spec):
        self.spec = spec

    def __call__(self, seed_seq):
        return run_in_worker(self.spec, seed_seq)
