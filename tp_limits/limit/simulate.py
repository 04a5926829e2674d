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
from ..engine.options import Knobs
from ..engine.progress import progress_bar
from ..engine.trajectory import Trajectory
from ..errors import DivergenceError, SpecError
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


def prepare_limit(net: MLP, routine: Routine, knobs: Knobs | None = None,
                  **options) -> LimitPlan:
    """Check everything :func:`simulate_limit` would check — options, classification,
    engine-specific options and memory — without running anything.  ``options``: any
    of simulate_limit's (knobs too); ``knobs``: a :class:`~tp_limits.Knobs`."""
    problem = Problem(net, routine)
    opts = LimitOptions.of(**merge_knobs(knobs, options))
    return LimitPlan(problem, opts, select_engine(problem, opts))


def merge_knobs(knobs: Knobs | None, options: dict) -> dict:
    """The options with a Knobs record's knobs added; a knob given both ways is refused."""
    if knobs is None:
        return options
    if not isinstance(knobs, Knobs):
        raise SpecError(f"knobs must be a tp.Knobs(...), got {knobs!r}")
    twice = sorted(set(knobs.given()) & set(options))
    if twice:
        raise SpecError(f"{twice} given both in knobs= and as keywords; give each once")
    return {**options, **knobs.given()}


def simulate_limit(net: MLP, routine: Routine, particles: int = 100_000, seed: int = 0,
                   replicates: int = 8, method: str | None = None, progress: bool = False,
                   dtype=np.float64, record=("stats",), backend: str = "numpy",
                   on_divergence: str = "raise", knobs: Knobs | None = None,
                   **more) -> Trajectory:
    """Simulate the infinite-width training dynamics; returns a :class:`Trajectory`.

    Every option is declared once, with its check and default, in the option table of
    docs/api.md (``tp_limits.engine.options.LIMIT_OPTIONS``), and checked before any
    work starts (:func:`prepare_limit`).

    Parameters
    ----------
    particles : Monte Carlo particles per replicate (rounded as the sampler needs:
        even for antithetic pairs, a power of two for Sobol' points), or the node
        budget of ``quadrature``.
    replicates : independent Monte Carlo runs (default 8); their spread gives
        ``f_eval_se`` with replicates − 1 degrees of freedom (``se_dof``,
        intervals from :meth:`Trajectory.f_eval_ci`).  With 1, the standard
        error is the run's own batch means, which ignores the error carried
        from step to step by χ and can be off by a factor 2 (docs/theory.md §8.1).
    method : 'exact' (φ = id, the default for it), 'monte_carlo' (default
        otherwise) or 'quadrature' (d + d_out <= 3).
    record : ('stats',) to record per-layer statistics (keeps the initial
        particles, or the initial eval-input values of the deep engine), or
        () to save that memory.
    dtype : storage precision of the particles (one hidden layer) or of the
        hat histories (deep Monte Carlo): float64, or float32 to halve memory
        and memory traffic; expectations are accumulated in float64.
    backend : 'numpy', or 'cupy' to run the Monte Carlo engines (one hidden layer and
        deep, every estimator and dtype) on a GPU; the exact, quadrature and kernel
        engines work on small matrices and stay on the host (``meta["backend"]``
        says where a run went).  The memory guard then counts device memory.
    on_divergence : 'raise' a DivergenceError naming the step and quantity, or
        'stop' and return the steps before it (``divergence`` says where).
    knobs, more : the rarely used engine knobs, as a :class:`~tp_limits.Knobs` or as
        keywords (the same names): ``eval_every`` (evaluate f̊ every k-th step, and at 0
        and T; ``meta["eval_steps"]``), ``kernel`` (one hidden layer: 'numba', 'numpy' or
        'cuda'), ``f0`` and ``samples`` (kernel and trivial regimes: the initial function
        — 'sample' NNGP draws, 'zero', or an array on ``tp.kernel_points(routine)``),
        ``backprop`` ('exact' or 'decoupled', docs/theory.md §3), ``zdot`` (deep Monte
        Carlo: 'stein' or 'tangent', §4.4), ``workers`` and ``executor`` (where the
        replicates run; same seeds, same result), ``divergence_bound`` (default 1e10;
        None: only inf and NaN), ``partners`` and ``debias_partners`` (the deep limit of
        an optimizer not linear in the gradients, Adam: M partner particles and the
        2 f(2M) − f(M) extrapolation, §10.6), ``random`` ('backend' or 'host': a CuPy
        run then sees the NumPy run's random inputs, §4.7) and ``sampler`` ('qmc',
        'antithetic' or 'mc', §2.2, §4.8; ``meta["sampler"]``).

    The optimizer (momentum, weight decay, Adam) is the routine's (docs/theory.md §10).
    Ctrl-C returns the completed steps (``interrupted`` True, ``completed_steps``).
    """
    return prepare_limit(net, routine, knobs, particles=particles, seed=seed,
                         replicates=replicates, method=method, progress=progress, dtype=dtype,
                         record=record, backend=backend, on_divergence=on_divergence,
                         **more).run()
