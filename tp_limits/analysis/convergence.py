"""Convergence of finite networks to their infinite-width limit (docs/theory.md §7.2).

For each width n and seed s the finite trajectory f^{(n,s)} is compared with
the limit f̊ on the evaluation inputs at the chosen steps.  Per width:

* ``rms``: RMS over seeds of e_{n,s} = RMS over (t, input, output) of
  f^{(n,s)}_t - f̊_t — the typical distance of one network from the limit,
  expected to fall like n^{-1/2};
* ``bias``: RMS over (t, input, output) of the seed-mean deviation
  mean_s(f^{(n,s)}_t) - f̊_t — what survives averaging over seeds (expected
  O(1/n) plus noise of order rms/√seeds).

The exponent is the least-squares slope of log rms against log n; its 95 %
interval comes from the spread of per-seed slopes (Student t).  The limit's
own Monte Carlo error is reported beside it: widths where the finite error is
not well above it cannot resolve the slope.

When the limit is random through f_0 (kernel or trivial regime with p = 1/2,
f_0 an NNGP sample), each network is compared with kernel gradient descent
started from that network's own f_0 (``conditioned=True``, the default
there): the residual is then O(n^{-1/2}) per network (docs/theory.md §5.2).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..abc.table import Table
from ..engine.executors import Interrupted, completed, run_tasks
from ..engine.meta import problem_mismatch
from ..engine.options import (
    LIMIT_OPTIONS,
    check_executor,
    check_options,
    check_seeds,
    check_steps,
    check_train_kwargs,
    check_widths,
)
from ..engine.trajectory import Trajectory
from ..errors import SpecError
from ..finite.ntk import initial_outputs
from ..finite.train import train_finite
from ..limit import simulate_limit
from ..spec import Problem
from .fits import width_exponent
from .plotting import width_axis
from .saving import saved


def _finite_run(net, routine, width, seed, kwargs, keep):
    """The finite network's Trajectory (``keep``) or just its f_eval (saves transfer)."""
    # a run whose f_eval alone is kept records nothing, unless the caller asked
    tr = completed(train_finite(net, routine, width, seed=seed,
                                **{**({} if keep else {"record": ()}), **kwargs}))
    return tr if keep else tr.f_eval


def _finite_and_conditioned_limit(net, routine, width, seed, kwargs, keep):
    """A finite network and kernel gradient descent started from its own f_0."""
    f0 = initial_outputs(net, routine, width, seed=seed)
    lim = simulate_limit(net, routine, f0=f0)
    return _finite_run(net, routine, width, seed, kwargs, keep), lim.f_eval


def _f_eval(out):
    return out.f_eval if isinstance(out, Trajectory) else out


@saved
@dataclass(frozen=True)
class ConvergenceStudy:
    """Result of :func:`convergence` (arrays indexed by width)."""

    label: str
    widths: tuple
    seeds: tuple
    steps: tuple
    rms: np.ndarray
    rms_se: np.ndarray
    bias: np.ndarray
    bias_se: np.ndarray
    errors: np.ndarray          # (widths, seeds): e_{n,s}
    exponent: float
    exponent_ci: float
    limit_error: float          # RMS of the limit's f_eval_se over the compared entries
    limit: Trajectory | None    # None when each network had its own conditioned limit
    conditioned: bool = False
    runs: tuple = ()            # keep_runs=True: the finished Trajectories, one tuple per
                                # width (positions, not values: use run(width, seed))
    run_limits: tuple = ()      # conditioned: each run's own limit f_eval, the same layout
    finished: np.ndarray | None = None   # (widths, seeds): which runs finished
    interrupted: bool = False   # Ctrl-C stopped the study; it holds the finished runs

    def run(self, width, seed):
        """The Trajectory of the network of ``width`` and ``seed`` (``keep_runs=True``):
        ``runs`` holds the finished ones by position, this finds one by its values."""
        if not self.runs:
            raise SpecError("the study kept no runs: call tp.convergence(..., keep_runs=True)")
        if width not in self.widths or seed not in self.seeds:
            raise SpecError(f"no run of width {width!r} and seed {seed!r}: the study has widths "
                            f"{list(self.widths)} and seeds {list(self.seeds)}")
        i, j = self.widths.index(width), self.seeds.index(seed)
        done = (np.ones((len(self.widths), len(self.seeds)), bool) if self.finished is None
                else self.finished)
        if not done[i, j]:
            raise SpecError(f"the run of width {width} and seed {seed} did not finish "
                            "(the study was interrupted)")
        return self.runs[i][int(done[i, :j].sum())]

    def widest_gap(self) -> float:
        """max over the evaluated outputs after step 0 of |seed mean − limit| / combined SE
        at the widest width, the combined SE √(sd²/S + SE_limit²) (S − 1 and the limit's
        degrees of freedom; ``keep_runs=True`` and a shared limit needed)."""
        if not self.runs or not self.runs[-1] or self.limit is None:
            raise SpecError("widest_gap needs the runs and one shared limit: call "
                            "tp.convergence(..., keep_runs=True) without conditioned=True")
        runs = np.array([r.f_eval for r in self.runs[-1]])       # (S, T+1, E, d_out)
        gap = runs.mean(axis=0)[1:] - self.limit.f_eval[1:]
        se = np.sqrt(runs.std(axis=0, ddof=1)[1:] ** 2 / len(runs)
                     + self.limit.f_eval_se[1:] ** 2)
        return float(np.nanmax(np.abs(gap) / se))

    def table(self) -> Table:
        rows = [(str(n), f"{r:.3e}", f"{rs:.1e}", f"{b:.3e}", f"{bs:.1e}")
                for n, r, rs, b, bs in zip(self.widths, self.rms, self.rms_se, self.bias,
                                           self.bias_se)]
        if self.interrupted:
            rows.append(("PARTIAL", f"{int(self.finished.sum())} of {self.finished.size} runs",
                         "finished", "(interrupted)", ""))
        rows.append(("exponent", f"{self.exponent:+.3f}", f"±{self.exponent_ci:.3f}", "", ""))
        rows.append(("limit MC error", f"{self.limit_error:.1e}", "", "", ""))
        return Table(("width", "rms over seeds", "se", "seed-mean deviation", "se"), tuple(rows))

    def plot(self, ax=None):
        """Log-log plot of both errors with error bars and the reference slope -1/2."""
        import matplotlib.pyplot as plt
        if ax is None:
            fig, ax = plt.subplots(figsize=(5.5, 4.2))
        else:
            fig = ax.figure
        n = np.array(self.widths, float)
        ax.errorbar(n, self.rms, yerr=_log_bars(self.rms, 2 * self.rms_se), marker="o",
                    capsize=3, label=f"RMS over seeds (slope {self.exponent:+.2f} "
                                     f"± {self.exponent_ci:.2f})")
        ax.errorbar(n, self.bias, yerr=_log_bars(self.bias, 2 * self.bias_se), marker="s",
                    capsize=3, label="seed-mean deviation")
        ref = self.rms[0] * (n / n[0]) ** -0.5
        ax.plot(n, ref, "k--", label="predicted slope -1/2")
        if self.limit_error > 0:
            ax.axhline(self.limit_error, color="gray", ls=":", label="limit Monte Carlo error")
        width_axis(ax, self.widths)
        ax.set_yscale("log")
        ax.set_ylabel("|f_n - f_limit| on eval inputs (bars: ±2 SE over seeds)")
        ax.set_title(f"convergence to the limit: {self.label}")
        ax.legend(fontsize=8)
        return fig


def _log_bars(y, half):
    """Error bars for a log axis: a lower bar reaching zero is cut at y/10."""
    return np.vstack([np.minimum(half, 0.9 * y), half])


DEFAULT_PARTICLES = 1_000_000


def convergence(net, routine, widths, seeds: int = 8, particles: int | None = None,
                steps=None, limit: Trajectory | None = None, executor=None,
                progress: bool = False, limit_kwargs=None, conditioned: bool | None = None,
                keep_runs: bool = False, **train_kwargs) -> ConvergenceStudy:
    """Train finite networks at ``widths`` x ``seeds`` and measure their distance to the limit.

    ``limit`` may be a precomputed limit Trajectory; otherwise
    ``simulate_limit(net, routine, particles=particles, **limit_kwargs)`` is
    run (``particles`` defaults to 10⁶ per replicate).  ``steps`` are the steps t compared (default 1..T).  ``executor``:
    None (process pool), 'serial', or a concurrent.futures.Executor.
    ``conditioned``: compare each network with the limit started from its own
    f_0 (default: exactly when the limit's f_0 is random).  ``keep_runs``:
    keep every finite Trajectory (with its statistics) in ``study.runs``.

    Ctrl-C stops the study within seconds and returns the runs that finished
    (``study.interrupted``, ``study.finished``), with a warning.
    """
    problem = Problem(net, routine)
    widths = check_widths(widths, "convergence")
    seeds = check_seeds(seeds, minimum=2)
    T = routine.steps
    steps = check_steps(steps, T, first=0)
    executor = check_executor(executor)
    if limit is not None and (limit_kwargs or particles is not None):
        raise SpecError("give either limit= (a computed limit) or particles=/limit_kwargs= "
                        "(to compute one), not both")
    if particles is not None and "particles" in (limit_kwargs or {}):
        raise SpecError("particles= and limit_kwargs['particles'] both given; give it once")
    check_options(LIMIT_OPTIONS, dict(limit_kwargs or {}), "simulate_limit (limit_kwargs)")
    check_train_kwargs(train_kwargs, "convergence")
    k = net.param.classify()
    if conditioned is None:
        conditioned = k.regime in ("kernel", "trivial") and k.f0_law == "gp"
    if conditioned and k.regime not in ("kernel", "trivial"):
        raise SpecError("conditioned=True applies to kernel-regime and trivial limits only")
    tasks = [(net, routine, w, s, train_kwargs, keep_runs) for w in widths for s in seeds]
    shape = (len(widths), len(seeds), len(steps), len(routine.eval_inputs), net.d_out)
    if not conditioned:
        if limit is None:
            kwargs = {"particles": DEFAULT_PARTICLES if particles is None else particles,
                      "progress": progress, "record": ()}
            kwargs.update(limit_kwargs or {})
            limit = simulate_limit(net, routine, **kwargs)
        check_limit(problem, limit, steps)
    fn, desc = ((_finite_and_conditioned_limit, "finite networks + conditioned limits")
                if conditioned else (_finite_run, "finite networks"))
    try:
        outs, interrupted = run_tasks(fn, tasks, executor=executor, progress=progress,
                                      desc=desc), False
    except Interrupted as exc:
        outs, interrupted = exc.results, True
    finished = np.array([o is not None for o in outs]).reshape(len(widths), len(seeds))
    if not finished.any():
        raise KeyboardInterrupt
    if interrupted:
        warnings.warn(f"convergence interrupted: {int(finished.sum())} of {finished.size} "
                      "runs finished; the study holds those", RuntimeWarning, stacklevel=2)
    nan = np.full(shape[2:], np.nan)
    if conditioned:
        finite = [o[0] if o is not None else None for o in outs]
        own_limits = [o[1] if o is not None else None for o in outs]
        ref = np.array([o[1][list(steps)] if o is not None else nan for o in outs]
                       ).reshape(shape)
        limit_error = 0.0
    else:
        finite, own_limits = outs, []
        ref = np.broadcast_to(limit.f_eval[list(steps)], shape)
        se = limit.f_eval_se
        limit_error = float(np.sqrt(np.mean(se[list(steps)] ** 2))) if se is not None else 0.0
    F = np.array([_f_eval(o)[list(steps)] if o is not None else nan for o in finite]
                 ).reshape(shape)
    stats = _errors(F - ref, widths, finished)

    def per_width(items):
        S = len(seeds)
        return tuple(tuple(x for x in items[i * S:(i + 1) * S] if x is not None)
                     for i in range(len(widths))) if keep_runs and items else ()
    return ConvergenceStudy(net.param.label, widths, seeds, steps, *stats, limit_error, limit,
                            conditioned, per_width(finite), per_width(own_limits), finished,
                            interrupted)


def check_limit(problem, limit, steps) -> None:
    """A given limit must be a complete Trajectory of the same problem, evaluated at ``steps``."""
    if not isinstance(limit, Trajectory):
        raise SpecError(f"limit must be a tp.Trajectory, got {type(limit).__name__}")
    if limit.meta.get("engine") == "finite":
        raise SpecError(f"limit is a finite network's Trajectory (width "
                        f"{limit.meta.get('width')}), not an infinite-width limit: give "
                        "tp.simulate_limit's result, or limit=None to simulate it here")
    other = problem_mismatch(problem, limit.meta)
    if other:
        raise SpecError("the given limit was computed for another problem: " + "; ".join(other))
    T = problem.T
    if limit.interrupted or limit.steps < T:
        raise SpecError(f"the limit covers {limit.steps} of the routine's {T} steps"
                        + (" (it was interrupted)" if limit.interrupted else ""))
    if not np.all(np.isfinite(limit.f_eval[list(steps)])):
        raise SpecError("the limit was not evaluated at every compared step "
                        "(simulate it with eval_every=1)")


def _errors(dev, widths, finished):
    """(rms, rms_se, bias, bias_se, errors, exponent, exponent_ci) from the deviations
    (widths, seeds, ...), NaN for runs that did not finish."""
    axes = tuple(range(2, dev.ndim))
    e = np.sqrt(np.mean(dev ** 2, axis=axes))                           # (W, S)
    n = finished.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)                  # empty / 1-seed widths
        rms = np.sqrt(np.nanmean(e ** 2, axis=1))
        rms_se = np.nanstd(e ** 2, axis=1, ddof=1) / np.sqrt(n) / (2 * rms)   # delta method
        mean_dev = np.nanmean(dev, axis=1)
        bias = np.sqrt(np.mean(mean_dev ** 2, axis=tuple(range(1, mean_dev.ndim))))
        dev_se = np.nanstd(dev, axis=1, ddof=1) / np.sqrt(n).reshape((-1,) + (1,) * (dev.ndim - 2))
        bias_se = np.sqrt(np.mean(dev_se ** 2, axis=tuple(range(1, dev_se.ndim))))
    whole = finished.all(axis=0)                   # seeds that finished at every width
    if whole.sum() >= 2 or (whole.sum() == 1 and len(widths) >= 3):
        exponent, ci = width_exponent(widths, e[:, whole])
    else:
        exponent, ci = math.nan, math.nan
    return rms, rms_se, bias, bias_se, e, exponent, ci
