"""``simulate_limit``: the infinite-width limit of an MLP on a Routine.

    options -> engine -> result -> Trajectory

1. :class:`~tp_limits.limit.options.LimitOptions` checks every option;
2. :func:`~tp_limits.limit.select.select_engine` picks the engine from the
   exact classification, and the engine checks what concerns it and the
   memory it needs (:func:`prepare_limit` stops here: nothing has run);
3. the engine returns a :class:`~tp_limits.limit.result.LimitResult`;
4. which becomes the :class:`~tp_limits.Trajectory`, with the run metadata.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..engine.meta import run_meta
from ..engine.progress import progress_bar
from ..engine.steps import DIVERGENCE_BOUND
from ..engine.trajectory import Trajectory
from ..errors import DivergenceError
from ..spec import MLP, Problem, Routine
from .options import LimitOptions
from .select import select_engine


@dataclass(frozen=True)
class LimitPlan:
    """A checked limit computation, ready to run: the problem, its options and engine."""

    problem: Problem
    options: LimitOptions
    engine: object

    def run(self) -> Trajectory:
        o, eng, p = self.options, self.engine, self.problem
        started = time.perf_counter()
        with progress_bar(o.progress, eng.bar_total, f"limit ({eng.method})",
                          per_step=eng.particles if eng.method == "monte_carlo" else None
                          ) as on_step:
            # overflow is detected and reported as a DivergenceError below, not warned about
            with np.errstate(over="ignore", invalid="ignore"):
                res = eng.run(on_step)
        res.check_loss()
        if res.diverged and o.on_divergence == "raise":
            d = res.diverged
            raise DivergenceError(d.step, d.layer, d.quantity, "in the limit engine",
                                  size=float("inf") if d.size is None else d.size,
                                  bound=o.divergence_bound)
        k = p.net.param.classify()
        sw = k.limit_switches
        meta = run_meta(
            p, res.status(), time.perf_counter() - started, engine=eng.name, method=eng.method,
            kernel=None, backend=eng.backend, seed=o.seed, replicates=o.replicates,
            dtype=o.dtype.name, regime=k.regime, backprop=o.backprop,
            switches=None if sw is None else {"train_layers": list(sw.train_layers),
                                              "readout_init": sw.readout_init,
                                              "readout_update": sw.readout_update},
            eval_steps=[s for s in o.eval_steps(p.T) if s <= res.completed],
            se_method=res.se_method)
        meta.update(res.info)
        return res.to_trajectory(meta, o.record_stats, p)


def prepare_limit(net: MLP, routine: Routine, **options) -> LimitPlan:
    """Check everything :func:`simulate_limit` would check — options, classification,
    engine-specific options and memory — without running anything."""
    problem = Problem(net, routine)
    opts = LimitOptions.of(**options)
    return LimitPlan(problem, opts, select_engine(problem, opts))


def simulate_limit(net: MLP, routine: Routine, particles: int = 100_000, seed: int = 0,
                   replicates: int = 8, method: str | None = None, eval_every: int = 1,
                   progress: bool = False, dtype=np.float64, record=("stats",),
                   kernel: str | None = None, f0="sample", samples: int = 64,
                   backprop: str = "exact", on_divergence: str = "raise",
                   zdot: str = "stein", workers: int = 1,
                   divergence_bound: float | None = DIVERGENCE_BOUND,
                   executor=None, partners: int | None = None,
                   debias_partners: bool = True, backend: str = "numpy",
                   random: str = "backend", sampler: str | None = None) -> Trajectory:
    """Simulate the infinite-width training dynamics; returns a :class:`Trajectory`.

    Parameters
    ----------
    particles : Monte Carlo particles per replicate (rounded up to an even
        count for antithetic pairs), or the node budget of ``quadrature``.
    replicates : independent Monte Carlo runs (default 8); their spread gives
        ``f_eval_se`` with replicates − 1 degrees of freedom (``se_dof``,
        intervals from :meth:`Trajectory.f_eval_ci`).  With 1, the standard
        error is the run's own batch means, which ignores the error carried
        from step to step by χ and can be off by a factor 2 (docs/theory.md §8.1).
    method : 'exact' (φ = id, the default for it), 'monte_carlo' (default
        otherwise) or 'quadrature' (d + d_out <= 3).
    eval_every : evaluate f̊ on the eval inputs every k-th step (and at 0
        and T), in every engine; rows in between are NaN and
        ``meta["eval_steps"]`` lists the evaluated ones.
    record : ('stats',) to record per-layer statistics (keeps the initial
        particles, or the initial eval-input values of the deep engine), or
        () to save that memory.
    kernel : one hidden layer: 'numba' (the fused kernel; the default on the host) or
        'numpy' (its plain whole-array twin; the sweep on a GPU).
    backend : 'numpy', or 'cupy' to run the Monte Carlo engines (one hidden layer and
        deep, every estimator and dtype) on a GPU; the exact, quadrature and kernel
        engines work on small matrices and stay on the host (``meta["backend"]``
        says where a run went).  The memory guard then counts device memory.
    random : 'backend' (draws from the backend's own generator, seeded from
        ``seed``: the same law on either backend) or 'host' (every draw from the
        host generator, copied over: a CuPy run then sees the random inputs of
        the NumPy run of the same seed and agrees with it to rounding).
    sampler : Monte Carlo engines: how the Gaussians are drawn — 'qmc' (scrambled
        Sobol' points mapped to Gaussians, N rounded up to a power of two;
        randomized quasi-Monte Carlo, whose error fell like N^{-0.91} (one hidden
        layer) and N^{-0.68} (the demo's deep run) instead of N^{-1/2}; the default
        when replicates >= 2, whose spread over independent scramblings is the
        error bar; one hidden layer: the initial particles, docs/theory.md §2.2;
        deep: Z^U, Z^{nV} and the hats of the first steps, up to 256 coordinates
        per particle, §4.8), 'antithetic' (± pairs of Z^{nV}; the default for a
        single replicate) or 'mc' (independent draws).  ``meta["sampler"]``
        records it.
    dtype : storage precision of the particles (one hidden layer) or of the
        hat histories (deep Monte Carlo): float64, or float32 to halve memory
        and memory traffic; expectations are accumulated in float64.
    backprop : 'exact', or 'decoupled' (deep limits: docs/theory.md §3, a
        negative control).
    zdot : deep Monte Carlo only: the Ż estimator — 'stein' (regression on the
        sampled hats; time ∝ T², the default) or 'tangent' (forward-mode
        derivatives per particle; exact given the particles, time ∝ T³,
        memory ∝ T²; smooth φ only).  ``meta["zdot"]`` records it.
    workers : Monte Carlo: run the replicates in this many local processes
        (each with one BLAS and Numba thread; same seeds, same result as
        ``workers=1``).  Worth it when one run cannot keep every core busy.
    executor : Monte Carlo: run the replicates on this concurrent.futures
        Executor or Dask ``distributed.Client`` instead (same seeds, same result).
    on_divergence : 'raise' a DivergenceError naming the step and quantity, or
        'stop' and return the steps before it (``divergence`` says where).
    divergence_bound : an output whose magnitude exceeds this counts as a
        divergence even while finite (default 1e10; None: only inf and NaN do).
    f0, samples : kernel and trivial regimes only: the initial function —
        'sample' (``samples`` NNGP draws when p = 1/2; mean ± standard error
        reported, draws in ``stats["f_eval_samples"]``), 'zero', or an array
        on ``tp.kernel_points(routine)`` such as a finite network's own f_0
        (:func:`tp_limits.initial_outputs`).
    partners, debias_partners : deep limit of Adam training only: the ΔW terms are
        expectations over a partner particle, estimated with ``partners`` M
        particles (default min(256, N/2)); with ``debias_partners`` (default) the
        run is made with M and 2M partners and 2 f(2M) − f(M) is reported (the
        1/M bias removed; both in ``stats["f_eval_partners_M"]``,
        ``["f_eval_partners_2M"]`` with their ``_se``; docs/theory.md §10.6).

    The optimizer (momentum, weight decay, Adam) is the routine's (docs/theory.md §10).
    Every option is checked before any work starts (:func:`prepare_limit`).
    Ctrl-C returns the completed steps (``interrupted`` True, ``completed_steps``).
    """
    return prepare_limit(net, routine, particles=particles, seed=seed, replicates=replicates,
                         method=method, eval_every=eval_every, progress=progress, dtype=dtype,
                         record=record, kernel=kernel, f0=f0, samples=samples,
                         backprop=backprop, on_divergence=on_divergence, zdot=zdot,
                         workers=workers, divergence_bound=divergence_bound,
                         executor=executor, partners=partners,
                         debias_partners=debias_partners, backend=backend,
                         random=random, sampler=sampler).run()
