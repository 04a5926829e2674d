"""Learning-rate sweeps at every width and at infinity: where does the optimum go?

For each width n (and seed) and each learning rate η of a grid, a finite
network is trained and a metric of its trajectory recorded; the limit is
simulated at the same η (replicates in place of seeds).  Per width the
optimal learning rate is the minimizer of the seed-mean metric (maximizer
for accuracy), refined by a parabola through the best grid point and its
neighbours in log η; its interval comes from the spread of the per-seed
optima (Student t).  A deterministic limit (exact linear engines, kernel
gradient descent from f_0 = 0) is minimized in η directly, to 10⁻⁸ relative.
Transfer means the finite optima settle on the limit's as n grows
(docs/theory.md §8.3).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..abc.table import Table
from ..engine.executors import Interrupted, check_picklable, completed, run_tasks
from ..engine.options import (
    MAX_WIDTH,
    check_executor,
    check_seeds,
    check_train_kwargs,
    check_widths,
)
from ..engine.progress import progress_bar
from ..errors import SpecError, TPError, UnstableParametrizationError, UnsupportedError
from ..finite.train import prepare_finite, train_finite
from ..limit import prepare_limit, simulate_limit
from ..spec import MLP, Problem, Routine
from ..spec.checks import check_int, finite_positive
from .plotting import width_axis

#: name -> (goal, needs eval targets)
METRICS = {"final_loss": ("min", False), "eval_loss": ("min", True),
           "eval_accuracy": ("max", True)}
LIMIT = "inf"


#: the most learning rates one sweep takes (each one is a run per width and seed)
MAX_LRS = 1000


def _metric_spec(metric, routine: Routine):
    """(name, goal, metric) for a metric name or callable, checked against the routine."""
    if callable(metric):
        return getattr(metric, "__name__", "metric"), "min", metric
    if metric not in METRICS:
        raise SpecError(f"metric = {metric!r}; use one of {tuple(METRICS)} or a function "
                        "Trajectory -> float (smaller is better)")
    goal, needs = METRICS[metric]
    if needs and routine.eval_targets is None:
        raise SpecError(f"metric {metric!r} needs held-out targets: give the Routine "
                        "eval_targets= (e.g. tp.datasets.digits().routine(...))")
    if metric == "eval_accuracy" and routine.loss != "xent":
        raise SpecError("metric 'eval_accuracy' is for classification (loss='xent')")
    return metric, goal, metric


def _measure(traj, metric) -> float:
    if callable(metric):
        return float(metric(traj))
    if metric == "final_loss":
        return float(traj.loss[-1])
    return float(traj.stats[metric][-1])


def _value(traj, metric, goal) -> tuple:
    """(metric value, diverged): a diverged run counts as the worst value."""
    if traj.diverged or traj.steps == 0:
        return (math.inf if goal == "min" else -math.inf), True
    try:
        v = _measure(traj, metric)
    except Exception as exc:
        if not callable(metric):
            raise
        raise SpecError(f"the metric {getattr(metric, '__name__', 'metric')} raised "
                        f"{type(exc).__name__}: {exc} (on the first run it was given; the "
                        "sweep stopped there)") from exc
    if not math.isfinite(v):
        if callable(metric):
            raise SpecError(f"the metric {getattr(metric, '__name__', 'metric')} returned {v} "
                            "for a run that did not diverge; a metric must return a finite "
                            "number (the sweep marks diverged runs itself)")
        return (math.inf if goal == "min" else -math.inf), True
    return v, False


def _finite_task(net, routine, lr, width, seed, fn, goal, kwargs):
    tr = completed(train_finite(net, routine.with_lr(lr), width, seed=seed, record=(),
                                on_divergence="stop", **kwargs))
    return _value(tr, fn, goal)


def _cost(values, goal):
    """Values turned into costs to minimize (accuracy: its negative)."""
    return np.asarray(values, float) * (1 if goal == "min" else -1)


def _parabola(logs, costs, i) -> float:
    """Vertex in log η of the parabola through grid points i-1, i, i+1 (clipped to them).

    A positive cost (a loss) is fitted in log scale, where a loss that climbs
    steeply on one side of its minimum is closer to a parabola.
    """
    x, y = logs[i - 1:i + 2], costs[i - 1:i + 2]
    if np.all(y > 0):
        y = np.log(y)
    den = (x[0] - x[1]) * (x[0] - x[2]) * (x[1] - x[2])
    a = (x[2] * (y[1] - y[0]) + x[1] * (y[0] - y[2]) + x[0] * (y[2] - y[1])) / den
    b = (x[2] ** 2 * (y[0] - y[1]) + x[1] ** 2 * (y[2] - y[0]) + x[0] ** 2 * (y[1] - y[2])) / den
    if not a > 0:
        return float(x[1])
    return float(np.clip(-b / (2 * a), x[0], x[2]))


def _grid_optimum(logs, costs) -> float:
    """log η of the refined minimum of one cost curve (NaN if every value is infinite)."""
    if not np.any(np.isfinite(costs)):
        return math.nan
    i = int(np.nanargmin(np.where(np.isfinite(costs), costs, np.inf)))
    if 0 < i < len(logs) - 1 and np.all(np.isfinite(costs[i - 1:i + 2])):
        return _parabola(logs, costs, i)
    return float(logs[i])


def optimum(lrs, values, goal) -> tuple:
    """(η*, low, high) from (lrs, seeds) values: the seed-mean curve's refined optimum and
    a 95 % interval from the per-seed optima (t with seeds − 1 degrees of freedom)."""
    from scipy.stats import t as student
    logs = np.log(np.asarray(lrs, float))
    costs = _cost(values, goal)
    mean = np.mean(costs, axis=1)                      # an infinite seed makes the mean infinite
    best = _grid_optimum(logs, mean)
    if math.isnan(best):
        return math.nan, math.nan, math.nan
    per = np.array([_grid_optimum(logs, costs[:, s]) for s in range(costs.shape[1])])
    per = per[np.isfinite(per)]
    if len(per) >= 2 and np.std(per) > 0:
        half = student.ppf(0.975, len(per) - 1) * np.std(per, ddof=1) / math.sqrt(len(per))
        centre = float(np.mean(per))
        return math.exp(best), math.exp(centre - half), math.exp(centre + half)
    i = int(np.argmin(np.abs(logs - best)))
    return math.exp(best), float(lrs[max(i - 1, 0)]), float(lrs[min(i + 1, len(lrs) - 1)])


@dataclass(frozen=True)
class LRSweep:
    """Result of :func:`lr_sweep`.

    ``records``: tidy rows {width (int, or "inf" for the limit), lr, seed (the
    replicate for the limit), value, diverged}; ``optimal_lr``: width or "inf"
    -> (η*, low, high); ``no_limit``: why there is no "inf" row ("" when there is).
    """

    label: str
    metric: str
    goal: str
    lrs: tuple
    widths: tuple
    records: tuple
    optimal_lr: dict
    no_limit: str = ""
    interrupted: bool = False

    def values(self, width) -> np.ndarray:
        """(lrs, seeds) array of the metric at ``width`` (or "inf"); NaN where not run."""
        rows = [r for r in self.records if r["width"] == width]
        seeds = sorted({r["seed"] for r in rows})
        out = np.full((len(self.lrs), len(seeds)), np.nan)
        index = {lr: i for i, lr in enumerate(self.lrs)}
        for r in rows:
            if r["lr"] in index:
                out[index[r["lr"]], seeds.index(r["seed"])] = r["value"]
        return out

    @property
    def keys(self) -> tuple:
        return tuple(self.widths) + ((LIMIT,) if LIMIT in self.optimal_lr else ())

    def table(self) -> Table:
        rows = []
        for w in self.keys:
            # an interrupted sweep has widths without every run, hence without an optimum
            lr, lo, hi = self.optimal_lr.get(w, (math.nan,) * 3)
            vals = self.values(w)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)      # rows without runs
                best = (np.nanmin(np.nanmean(_cost(vals, self.goal), axis=1))
                        if vals.size and not np.all(np.isnan(vals)) else math.nan)
            rows.append((str(w), f"{lr:.4g}", f"[{lo:.3g}, {hi:.3g}]",
                         f"{best * (1 if self.goal == 'min' else -1):.4g}",
                         str(int(np.sum([r["diverged"] for r in self.records
                                         if r["width"] == w])))))
        if self.no_limit:
            rows.append((LIMIT, "-", "-", "-", self.no_limit))
        return Table(("width", "optimal lr", "95 % interval", f"best {self.metric}",
                      "diverged runs"), tuple(rows))

    def to_pandas(self):
        """The records as a pandas DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise TPError("to_pandas needs pandas (pip install pandas)") from None
        return pd.DataFrame(list(self.records))

    def plot(self):
        """Left: metric against η per width, the limit in black with its band, optima
        marked.  Right: the optimal η against width, the limit's as a horizontal line."""
        import matplotlib.pyplot as plt
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
        lrs = np.array(self.lrs, float)
        colours = plt.cm.viridis(np.linspace(0.1, 0.85, max(len(self.widths), 1)))
        # an interrupted sweep lacks some runs and optima, a diverged one has NaN optima:
        # draw what exists (the figure of a PARTIAL report)
        found = {w: o for w, o in self.optimal_lr.items() if np.all(np.isfinite(o))}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # all-NaN rows: not drawn
            for w, col in zip(self.widths, colours):
                v = np.where(np.isfinite(self.values(w)), self.values(w), np.nan)
                ax.plot(lrs, np.nanmean(v, axis=1), "o-", ms=3, color=col, label=f"n = {w}")
                if w in found:
                    ax.axvline(found[w][0], color=col, ls=":", lw=1)
            if LIMIT in self.optimal_lr:
                v = np.where(np.isfinite(self.values(LIMIT)), self.values(LIMIT), np.nan)
                mean = np.nanmean(v, axis=1)
                ax.plot(lrs, mean, "k-", lw=2, label="limit (n = ∞)")
                if v.shape[1] > 1:
                    se = np.nanstd(v, axis=1, ddof=1) / np.sqrt(v.shape[1])
                    ax.fill_between(lrs, mean - 2 * se, mean + 2 * se, color="k", alpha=0.2)
                if LIMIT in found:
                    ax.axvline(found[LIMIT][0], color="k", ls="--", lw=1)
        ax.set_xlim(lrs.min() / 1.2, lrs.max() * 1.2)     # set even when nothing is drawn
        ax.set_xscale("log")
        finite = np.array([r["value"] for r in self.records if np.isfinite(r["value"])])
        if finite.size and np.all(finite > 0):
            ax.set_yscale("log")
        ax.set_xlabel("learning rate η")
        ax.set_ylabel(self.metric + (" (diverged: not drawn)" if any(
            r["diverged"] for r in self.records) else ""))
        ax.set_title(f"{self.label}: {self.metric} against η")
        ax.legend(fontsize=7)
        shown = [w for w in self.widths if w in found]
        if self.widths:
            if shown:
                n = np.array(shown, float)
                opt = np.array([found[w] for w in shown])
                bx.errorbar(n, opt[:, 0], yerr=[opt[:, 0] - opt[:, 1], opt[:, 2] - opt[:, 0]],
                            marker="o", capsize=3, label="finite widths (95 % interval)")
            if LIMIT in found:
                lr, lo, hi = found[LIMIT]
                bx.axhline(lr, color="k", lw=2, label="limit")
                bx.axhspan(lo, hi, color="k", alpha=0.15)
            if shown or LIMIT in found:
                width_axis(bx, self.widths)
                bx.set_yscale("log")
            else:                               # no data: no log axes either
                bx.text(0.5, 0.5, "no optimum: every run diverged or did not finish",
                        ha="center", va="center", transform=bx.transAxes)
            bx.set_ylabel("optimal η")
            bx.set_title("where the optimum goes" + (f" (no limit: {self.no_limit})"
                                                      if self.no_limit else ""), fontsize=9)
            if shown or LIMIT in found:
                bx.legend(fontsize=7)
        fig.tight_layout()
        return fig


def _limit_rows(net, routine, lrs, fn, goal, particles, replicates, progress):
    """Records of the limit at every η, its optimum, and why not when there is no limit."""
    try:
        plan = prepare_limit(net, routine.with_lr(lrs[0]), particles=particles,
                             replicates=1, f0="zero")
    except (UnstableParametrizationError, UnsupportedError) as exc:
        return [], None, str(exc)
    k = net.param.classify()
    deterministic = plan.engine.method in ("exact", "kernel_gd") and not (
        k.regime in ("kernel", "trivial") and k.f0_law == "gp")

    def run(lr, seed, record=True):
        tr = simulate_limit(net, routine.with_lr(lr), particles=particles, replicates=1,
                            seed=seed, f0="sample" if k.f0_law == "gp" else "zero",
                            samples=1, on_divergence="stop", record=())
        if tr.interrupted:
            raise KeyboardInterrupt
        return _value(tr, fn, goal)

    reps = [0] if deterministic else list(range(replicates))
    records = []
    with progress_bar(progress, len(lrs) * len(reps), "limit at each lr", per_step=None) as step:
        for lr in lrs:
            for r in reps:                 # the same seeds at every η: smoother curves
                v, div = run(lr, r)
                records.append({"width": LIMIT, "lr": float(lr), "seed": r, "value": v,
                                "diverged": div})
                step(0)
    values = np.array([rec["value"] for rec in records]).reshape(len(lrs), len(reps))
    if not deterministic:
        return records, optimum(lrs, values, goal), ""
    best = _exact_optimum(lambda lr: run(lr, 0)[0], lrs, values[:, 0], goal)
    return records, (best, best, best), ""


def _exact_optimum(f, lrs, values, goal) -> float:
    """η* of a deterministic metric: bounded 1-D minimization in log η between the grid
    neighbours of the best grid point, to 10⁻⁸ relative."""
    from scipy.optimize import minimize_scalar
    logs = np.log(np.asarray(lrs, float))
    costs = _cost(values, goal)
    if not np.any(np.isfinite(costs)):
        return math.nan
    i = int(np.argmin(np.where(np.isfinite(costs), costs, np.inf)))
    lo, hi = logs[max(i - 1, 0)], logs[min(i + 1, len(logs) - 1)]
    sign = 1 if goal == "min" else -1
    res = minimize_scalar(lambda x: sign * f(math.exp(x)), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-9})
    return float(math.exp(res.x))


def lr_sweep(net: MLP, routine: Routine, lrs, widths=(), seeds=8, limit: bool = True,
             metric="final_loss", particles: int = 20_000, replicates: int = 8,
             executor=None, progress: bool = True, **train_kwargs) -> LRSweep:
    """Sweep the learning rate at each finite width and in the limit; find the optima.

    Parameters
    ----------
    lrs : at least three positive learning rates (sorted for you).
    widths : finite widths (may be empty: the limit alone).
    seeds : a count or list of seeds per (width, η).
    limit : also simulate the infinite-width limit at every η.  A
        parametrization without one (unstable, or Adam in the kernel regime) sweeps
        its finite widths only, and ``no_limit`` says why.
    metric : 'final_loss' (training loss at the last step), 'eval_loss',
        'eval_accuracy' (held-out, need the Routine's eval_targets), or a
        function Trajectory -> float to minimize.  Diverged runs count as the
        worst value and are marked.
    particles, replicates : of each limit simulation (replicates play the role
        of seeds for the interval of the limit's optimum).
    executor : None (local process pool), 'serial', a concurrent.futures
        Executor, or a Dask ``distributed.Client``: the finite runs are spread
        over it, with results identical to a serial run.
    train_kwargs : passed to :func:`~tp_limits.train_finite`.

    Ctrl-C stops the sweep and returns what finished (``interrupted``).
    """
    lrs, widths, seeds, (name, goal, fn), executor = check_sweep(
        net, routine, lrs, widths, seeds, limit, metric, particles, replicates, executor,
        **train_kwargs)
    records, optimal, reason, interrupted = [], {}, "", False
    if limit:
        try:
            recs, opt, reason = _limit_rows(net, routine, lrs, fn, goal, particles, replicates,
                                            progress)
            records += recs
            if opt is not None:
                optimal[LIMIT] = opt
        except KeyboardInterrupt:
            interrupted = True
    else:
        reason = "limit=False"
    tasks = [(net, routine, lr, w, s, fn, goal, train_kwargs)
             for w in widths for lr in lrs for s in seeds]
    if tasks and not interrupted:
        try:
            outs = run_tasks(_finite_task, tasks, executor=executor, progress=progress,
                             desc="learning-rate sweep")
        except Interrupted as exc:
            outs, interrupted = exc.results, True
        for (_, _, lr, w, s, _, _, _), out in zip(tasks, outs):
            if out is not None:
                records.append({"width": w, "lr": lr, "seed": s, "value": out[0],
                                "diverged": out[1]})
    if interrupted:
        warnings.warn("lr_sweep interrupted: the result holds the runs that finished",
                      RuntimeWarning, stacklevel=2)
    sweep = LRSweep(net.param.label, name, goal, lrs, widths, tuple(records), optimal, reason,
                    interrupted)
    for w in widths:
        vals = sweep.values(w)
        if vals.size and not np.any(np.isnan(vals)):
            optimal[w] = optimum(lrs, vals, goal)
    _warn_at_the_edge(sweep)
    return sweep


def _warn_at_the_edge(sweep) -> None:
    """One warning naming the widths whose seed-mean curve is best at the first or last
    grid point: the optimum may lie beyond the grid, and its interval says nothing."""
    edge = []
    for w in sweep.optimal_lr:
        vals = sweep.values(w)
        if not vals.size or np.all(np.isnan(vals)):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(_cost(vals, sweep.goal), axis=1)
        if np.all(~np.isfinite(mean)):
            continue
        i = int(np.argmin(np.where(np.isfinite(mean), mean, np.inf)))
        if i in (0, len(sweep.lrs) - 1):
            edge.append(f"{w}: η = {sweep.lrs[i]:g}")
    if edge:
        warnings.warn(f"lr_sweep: the best learning rate lies on the edge of the grid ("
                      f"{'; '.join(edge)}): the optimum may lie beyond it; extend lrs",
                      RuntimeWarning, stacklevel=3)


def check_sweep(net: MLP, routine: Routine, lrs, widths=(), seeds=8, limit: bool = True,
                metric="final_loss", particles: int = 20_000, replicates: int = 8,
                executor=None, **train_kwargs):
    """Every check :func:`lr_sweep` makes before any work; returns the cleaned
    (lrs, widths, seeds, (metric name, goal, metric), executor)."""
    Problem(net, routine)                            # the network fits the data
    if isinstance(lrs, (str, bytes)) or not hasattr(lrs, "__iter__"):
        raise SpecError(f"lrs = {lrs!r} must be a list of learning rates")
    lrs = tuple(sorted(finite_positive(lr, "lr") for lr in lrs))
    if len(lrs) < 3 or len(set(lrs)) != len(lrs):
        raise SpecError(f"lrs needs at least three distinct learning rates, got {lrs}")
    if len(lrs) > MAX_LRS:
        raise SpecError(f"lrs has {len(lrs)} learning rates; at most {MAX_LRS} (a grid of "
                        "2^(1/8) steps spans 2^125 with that many): sweep a coarse grid, then "
                        "a finer one around its optimum")
    widths = tuple(widths)
    widths = check_widths(widths, "lr_sweep") if len(widths) >= 2 else tuple(
        check_int(w, "width", 1, MAX_WIDTH) for w in widths)
    seeds = check_seeds(seeds)
    if not widths and not limit:
        raise SpecError("nothing to sweep: give widths, or limit=True")
    spec = _metric_spec(metric, routine)
    check_int(particles, "particles", 2)
    check_int(replicates, "replicates", 2 if limit else 1, 10 ** 5)
    executor = check_executor(executor)
    if widths and callable(metric):                  # the finite runs carry the metric
        check_picklable(executor, metric=metric)
    check_train_kwargs(train_kwargs, "lr_sweep", ("seed", "record", "on_divergence"))
    if widths:                                       # the finite engine's own checks
        prepare_finite(net, routine, max(widths), **{**train_kwargs, "record": (),
                                                     "on_divergence": "stop"})
    if limit:
        try:                                         # memory and options of the limit
            prepare_limit(net, routine, particles=particles, replicates=1, f0="zero")
        except (UnstableParametrizationError, UnsupportedError):
            pass                                     # no limit: the sweep says why
    return lrs, widths, seeds, spec, executor
