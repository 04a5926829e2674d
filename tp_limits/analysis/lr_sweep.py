"""Learning-rate sweeps at every width and at infinity: where does the optimum go?

For each width n (and seed) and each learning rate η of a grid, a finite
network is trained and a metric of its trajectory recorded; the limit is
simulated at the same η (replicates in place of seeds).  Per width the
optimal learning rate minimizes the seed-mean metric (maximizes it for
accuracy).  The grid only brackets it: every local minimum of the grid is
searched on the metric itself (each seed keeps its random numbers at every η,
so the curves are smooth), and the interval holds the search's own error as
well as the seeds' (optimum.py, docs/theory.md §8.3).  A deterministic limit
(exact linear engines, kernel gradient descent from f_0 = 0) is minimized in η
directly, to 1e-8 relative.  Transfer means the finite optima settle on the
limit's as n grows.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..abc.table import Table
from ..engine.executors import (
    Interrupted,
    check_picklable,
    completed,
    executor_session,
    run_tasks,
)
from ..engine.options import (
    FINITE_OPTIONS,
    check_executor,
    check_seeds,
    check_time_budget,
    check_train_kwargs,
    check_widths,
    option_default,
)
from ..engine.budget import refuse_beyond_budget
from ..engine.progress import progress_bar
from ..errors import SpecError, TPError, UnstableParametrizationError, UnsupportedError
from ..finite.train import prepare_finite, train_finite
from ..limit import prepare_limit, simulate_limit
from ..spec import MLP, Problem, Routine
from ..spec.checks import (check_bool, check_int, check_sequence, check_width,
                           finite_positive)
from .optimum import (
    best_optimum,
    candidates,
    exact_optimum,
    grid_optimum,
    is_interior,
    search,
    seed_mean,
)
from .plotting import log_values_axis, width_axis
from .pooling import replicate_values
from .saving import saved

#: name -> (goal, needs eval targets)
METRICS = {"final_loss": ("min", False), "eval_loss": ("min", True),
           "eval_accuracy": ("max", True)}
LIMIT = "inf"


#: the most learning rates one sweep takes (each one is a run per width and seed)
MAX_LRS = 1000
#: the most points one search of an optimum may add (50 golden steps shrink a bracket 10^10-fold)
MAX_REFINE = 50


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


def _evaluations(net, routine, metric, train_kwargs) -> dict:
    """The ``eval_every`` of every run of the sweep, finite and limit alike: the caller's,
    else for a metric read off the last step alone (every built-in one) T, so the
    held-out inputs are evaluated at 0 and T only and a run skips the T − 1 evaluation
    passes in between (with 60 held-out images and batches of 8 they were half a finite
    run's time).  A function of the trajectory may read any step: it gets them all."""
    if "eval_every" in train_kwargs:
        return {"eval_every": train_kwargs["eval_every"]}
    return {} if callable(metric) else {"eval_every": max(1, Problem(net, routine).T)}


def _finite_task(net, routine, lr, width, seed, fn, goal, kwargs):
    tr = completed(train_finite(net, routine.with_lr(lr), width, seed=seed, record=(),
                                on_divergence="stop", **kwargs))
    return _value(tr, fn, goal)


def _cost(values, goal):
    """Values turned into costs to minimize (accuracy: its negative)."""
    return np.asarray(values, float) * (1 if goal == "min" else -1)


def optimum(lrs, values, goal) -> tuple:
    """(η*, low, high) of (lrs, seeds) values on the grid alone (no search): the parabola
    vertex of the seed-mean curve, with an interval that holds the best point's grid
    bracket (docs/theory.md §8.3)."""
    return grid_optimum(np.log(np.asarray(lrs, float)), _cost(values, goal)).triple


@saved
@dataclass(frozen=True)
class LRSweep:
    """Result of :func:`lr_sweep`.

    ``records``: tidy rows {width (int, or "inf" for the limit), lr, seed (the
    replicate for the limit), value, diverged}, learning rates of the searches
    included; a Monte Carlo limit's values have as their mean the metric of the
    replicates' pooled outputs and as their spread the jackknife's (pooling.py).  ``optimal_lr``: width or "inf" -> (η*, low, high);
    ``optima``: width or "inf" -> :class:`~tp_limits.analysis.optimum.Optimum`;
    ``no_limit``: why there is no "inf" row ("" when there is).
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
    optima: dict = field(default_factory=dict)

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

    def _by_lr(self, width) -> dict:
        """η -> the values of every seed (replicate) run at ``width`` and η, grid and
        searches alike, in η order."""
        by_lr = {}
        for r in sorted(self.records, key=lambda r: r["lr"]):
            if r["width"] == width:
                by_lr.setdefault(r["lr"], []).append(r["value"])
        return by_lr

    def searched(self, width) -> tuple:
        """(η, seed-mean metric) at the rates the searches ran beyond the grid at ``width``,
        sorted by η (empty arrays when there were none)."""
        beyond = {lr: v for lr, v in self._by_lr(width).items() if lr not in set(self.lrs)}
        return (np.array(list(beyond), float),
                np.array([np.mean(v) for v in beyond.values()], float))

    def best_value(self, width) -> float:
        """The best seed-mean metric of any learning rate run at ``width`` — the grid's and
        the searches' (which close in on the optimum, so this is the value beside η*,
        not the best grid point's); NaN when nothing was run."""
        costs = [float(np.mean(_cost(v, self.goal))) for v in self._by_lr(width).values()]
        return min(costs) * (1 if self.goal == "min" else -1) if costs else math.nan

    @property
    def keys(self) -> tuple:
        return tuple(self.widths) + ((LIMIT,) if LIMIT in self.optimal_lr else ())

    def table(self) -> Table:
        rows = []
        for w in self.keys:
            # an interrupted sweep has widths without every run, hence without an optimum
            lr, lo, hi = self.optimal_lr.get(w, (math.nan,) * 3)
            best = self.best_value(w)
            rows.append((str(w), f"{lr:.4g}", f"[{lo:.3g}, {hi:.3g}]", f"{best:.4g}",
                         str(int(np.sum([r["diverged"] for r in self.records
                                         if r["width"] == w])))))
        if self.no_limit:        # its first clause; the whole reason is in ``no_limit``
            rows.append((LIMIT, "-", "-", "-", self.no_limit.split(":")[0]))
        return Table(("width", "optimal lr", "95 % interval", f"best {self.metric}",
                      "diverged runs"), tuple(rows))

    def to_pandas(self):
        """The records as a pandas DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise TPError("to_pandas needs pandas (pip install pandas)") from None
        return pd.DataFrame(list(self.records))

    def plot(self, axes=None):
        """Left: metric against η per width, the limit in black with its band, optima
        marked.  Right: the optimal η against width, the limit's as a horizontal line.
        ``axes``: a pair of matplotlib axes to draw into (default: a new figure)."""
        import matplotlib.pyplot as plt
        if axes is None:
            fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
        else:
            (ax, bx), fig = axes, axes[0].figure
        lrs = np.array(self.lrs, float)
        colours = plt.cm.viridis(np.linspace(0.1, 0.85, max(len(self.widths), 1)))
        # an interrupted sweep lacks some runs and optima, a diverged one has NaN optima:
        # draw what exists (the figure of a PARTIAL report)
        found = {w: o for w, o in self.optimal_lr.items() if np.isfinite(o[0])}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # all-NaN rows: not drawn
            # the searches' points, unconnected: a dip between grid points shows there
            searched = [(w, col) for w, col in zip(self.widths, colours)] + [(LIMIT, "k")]
            first = True
            for w, col in searched:
                eta, mean = self.searched(w)
                keep = np.isfinite(mean)
                if keep.any():
                    ax.plot(eta[keep], mean[keep], "x", ms=5, color=col,
                            label="searched η" if first else None)
                    first = False
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
            log_values_axis(ax)
        ax.set_xlabel("learning rate η")
        ax.set_ylabel(self.metric + (" (diverged: not drawn)" if any(
            r["diverged"] for r in self.records) else ""))
        ax.set_title(f"{self.label}: {self.metric} against η")
        ax.legend(fontsize=7)
        shown = [w for w in self.widths if w in found]
        if self.widths:
            inner = [w for w in shown if np.isfinite(found[w][1:]).all() and found[w][1] > 0]
            if inner:
                n = np.array(inner, float)
                opt = np.array([found[w] for w in inner])
                bx.errorbar(n, opt[:, 0], yerr=[opt[:, 0] - opt[:, 1], opt[:, 2] - opt[:, 0]],
                            marker="o", capsize=3, label="finite widths (95 % interval)")
            for w in (w for w in shown if w not in inner):   # at the grid's edge: a bound
                low_edge = found[w][1] == 0
                bx.plot([w], [found[w][0]], "v" if low_edge else "^", color="C0", ms=7,
                        label=None)
            if len(inner) < len(shown):
                bx.plot([], [], "^", color="C0", label="at the grid's edge (▲ at or above, "
                        "▼ at or below)")
            if LIMIT in found:
                lr, lo, hi = found[LIMIT]
                bx.axhline(lr, color="k", lw=2, label="limit")
                if lo > 0 and np.isfinite(hi):        # an edge's bound has no band
                    bx.axhspan(lo, hi, color="k", alpha=0.15)
            if shown or LIMIT in found:
                width_axis(bx, self.widths)
                log_values_axis(bx)
            else:                               # no data: no log axes either
                bx.text(0.5, 0.5, "no optimum: every run diverged or did not finish",
                        ha="center", va="center", transform=bx.transAxes)
            bx.set_ylabel("optimal η")
            bx.set_title("where the optimum goes" + (
                f" ({self.no_limit.split(':')[0]})" if self.no_limit else ""), fontsize=9)
            if shown or LIMIT in found:
                bx.legend(fontsize=7)
        if axes is None:
            fig.tight_layout()
        return fig

    def drift(self) -> tuple:
        """How far the optimum moves across the finite widths: (n_min, n_max, ratio, low,
        high) with ratio = η*(n_max)/η*(n_min) and a conservative 95 % interval from the
        two optima's intervals (an edge optimum's open side makes it 0 or ∞); None with
        fewer than two widths that have an optimum.  About 1 when the rate transfers;
        (n_min/n_max)^α when it drifts like n^(−α)."""
        have = [w for w in self.widths if np.isfinite(self.optimal_lr.get(w, (np.nan,))[0])]
        if len(have) < 2:
            return None
        (a, alo, ahi), (b, blo, bhi) = self.optimal_lr[have[0]], self.optimal_lr[have[-1]]
        low = blo / ahi if np.isfinite(ahi) else 0.0        # an open side: 0 or ∞
        high = bhi / alo if alo > 0 else math.inf
        return have[0], have[-1], b / a, float(low), float(high)


def _limit_runner(net, routine, fn, goal, particles, evaluations):
    """(run(lr, replicates) -> [(value, diverged)] per replicate, deterministic, "") for
    the limit, or (None, False, why there is none).

    A Monte Carlo limit's value is not the metric of each replicate (biased by the
    replicate's own noise, as the metric is nonlinear in f) but the metric of the
    replicates' pooled outputs, with the jackknife's spread (pooling.py); a
    limit that is random through f_0 keeps the per-replicate metric, whose mean over
    f_0 draws is what it estimates."""
    try:
        plan = prepare_limit(net, routine, particles=particles, replicates=1, f0="zero",
                             **evaluations)
    except (UnstableParametrizationError, UnsupportedError) as exc:
        return None, False, str(exc)
    k = net.param.classify()
    random_f0 = k.f0_law == "gp"
    deterministic = plan.engine.method in ("exact", "kernel_gd") and not (
        k.regime in ("kernel", "trivial") and random_f0)

    def one(lr, seed):
        tr = simulate_limit(net, routine.with_lr(lr), particles=particles, replicates=1,
                            seed=seed, on_divergence="stop", record=(), **evaluations,
                            **({"f0": "sample", "samples": 1} if random_f0 else {"f0": "zero"}))
        if tr.interrupted:
            raise KeyboardInterrupt
        return tr

    def run(lr, reps, on_run=lambda: None):
        runs = []
        for r in reps:
            runs.append(one(lr, r))
            on_run()
        values = [_value(tr, fn, goal) for tr in runs]
        if deterministic or random_f0 or any(div for _, div in values):
            return values
        pv = replicate_values(Problem(net, routine.with_lr(lr)), runs,
                           lambda tr: _value(tr, fn, goal)[0])
        if not np.all(np.isfinite(pv)):             # a pooled metric that is not finite
            worst = math.inf if goal == "min" else -math.inf
            return [(worst, True) for _ in runs]
        return [(float(v), False) for v in pv]
    return run, deterministic, ""


class _Runs:
    """Runs a sweep's (width or "inf", η) points, every seed (replicate) of each, and keeps
    every finished run in ``records``, Ctrl-C or not."""

    def __init__(self, net, routine, fn, goal, seeds, reps, limit_run, executor, train_kwargs):
        self.net, self.routine, self.fn, self.goal = net, routine, fn, goal
        self.seeds, self.reps, self.limit_run = seeds, reps, limit_run
        self.executor, self.train_kwargs = executor, train_kwargs
        self.records = []

    def _keep(self, width, lr, seed, out):
        self.records.append({"width": width, "lr": float(lr), "seed": seed, "value": out[0],
                             "diverged": out[1]})

    def _keep_all(self, tasks, results):
        for (_, _, lr, w, s, _, _, _), r in zip(tasks, results):
            if r is not None:
                self._keep(w, lr, s, r)

    def __call__(self, points, progress=False) -> list:
        """Per-seed costs at each (width, η) of ``points``: the limit's here, one run
        after another (each uses every core), the finite widths' in one batch of runs."""
        out = {}
        lim = [p for p in points if p[0] == LIMIT]
        with progress_bar(progress and bool(lim), len(lim) * len(self.reps), "limit at each lr",
                          per_step=None) as step:
            for _, lr in lim:           # the same seeds at every η: smooth curves
                vals = self.limit_run(lr, self.reps, lambda: step(0))
                for r, v in zip(self.reps, vals):
                    self._keep(LIMIT, lr, r, v)
                out[(LIMIT, lr)] = _cost([v for v, _ in vals], self.goal)
        fin = [p for p in points if p[0] != LIMIT]
        tasks = [(self.net, self.routine, lr, w, s, self.fn, self.goal, self.train_kwargs)
                 for w, lr in fin for s in self.seeds]
        if tasks:
            try:
                res = run_tasks(_finite_task, tasks, executor=self.executor, progress=progress,
                                desc="learning-rate sweep")
            except Interrupted as exc:
                self._keep_all(tasks, exc.results)
                raise
            self._keep_all(tasks, res)
            S = len(self.seeds)
            for j, p in enumerate(fin):
                out[p] = _cost([v for v, _ in res[j * S:(j + 1) * S]], self.goal)
        return [out[p] for p in points]


def _refine(logs, curves: dict, runs: _Runs, budget: int, progress: bool) -> dict:
    """Search every interior grid minimum of every curve (key -> (lrs, seeds) costs on the
    grid ``logs`` = log η) at once, a round of runs per step of all the searches; key ->
    [(grid index, result of optimum.search)]."""
    searches = {(key, i): search(logs, costs, i, budget)
                for key, costs in curves.items()
                for i in candidates(seed_mean(costs)) if is_interior(i, len(logs))}
    found = {key: [] for key in curves}
    pending = {k: next(g) for k, g in searches.items()}
    with progress_bar(progress and bool(pending), len(pending) * (budget + 2),
                      "refining the optima", per_step=None) as step:
        while pending:
            keys = list(pending)
            outs = runs([(k[0], math.exp(pending[k])) for k in keys])
            for k, out in zip(keys, outs):
                step(0)
                try:
                    pending[k] = searches[k].send(out)
                except StopIteration as stop:
                    found[k[0]].append((k[1], stop.value))
                    del pending[k]
    return found


def lr_sweep(net: MLP, routine: Routine, lrs, widths=(), seeds=8, limit: bool = True,
             metric="final_loss", particles: int = 20_000, replicates: int = 8,
             refine: int = 12, executor=None, progress: bool = True,
             **train_kwargs) -> LRSweep:
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
        worst value and are marked.  A built-in metric reads the last step alone, so
        its runs evaluate the held-out inputs at 0 and T only (``eval_every = T``;
        an ``eval_every`` given here applies to the limit's runs too); a function gets
        every step.
    particles, replicates : of each limit simulation (replicates play the role
        of seeds for the interval of the limit's optimum).
    refine : the most learning rates run beyond the grid per local minimum of a
        curve (each at every seed): a golden-section search of the seed-mean
        curve between the minimum's grid neighbours, to 1 % in η, plus two points
        for its standard error (docs/theory.md §8.3).  0: the grid alone, whose
        intervals then hold the best point's grid bracket.
    executor : None (local process pool), 'serial', a concurrent.futures
        Executor, or a Dask ``distributed.Client``: the finite runs are spread
        over it, with results identical to a serial run.
    train_kwargs : passed to :func:`~tp_limits.train_finite`; its ``time_budget``
        (default an hour) is the whole sweep's: the grid and one search per curve, at
        every seed and replicate, priced by the engines' cost models, are refused
        before any work when they add up to more (None: no limit).

    ``optimal_lr[w]`` is (η*, low, high); ``optima[w]`` the whole
    :class:`~tp_limits.analysis.optimum.Optimum` (standard error and its degrees
    of freedom, the search's error bound, rival minima).  Ctrl-C stops the sweep
    and returns what finished (``interrupted``), with the grid's optima.
    """
    lrs, widths, seeds, (name, goal, fn), executor, _ = check_sweep(
        net, routine, lrs, widths, seeds, limit, metric, particles, replicates, executor,
        refine, **train_kwargs)
    evaluations = _evaluations(net, routine, fn, train_kwargs)
    train_kwargs = {**train_kwargs, **evaluations}
    run, deterministic, reason = (_limit_runner(net, routine, fn, goal, particles, evaluations)
                                  if limit else (None, False, "limit=False"))
    reps = [] if run is None else [0] if deterministic else list(range(replicates))
    logs = np.log(np.asarray(lrs, float))
    curves, found, optima, interrupted = {}, {}, {}, False
    runs = _Runs(net, routine, fn, goal, seeds, reps, run, executor, train_kwargs)
    try:
        with executor_session(executor, "the learning-rate sweep") as runs.executor:
            if run is not None:          # the limit first: it is what the widths approach
                curves[LIMIT] = np.array(runs([(LIMIT, lr) for lr in lrs], progress))
            if deterministic:
                optima[LIMIT] = exact_optimum(
                    lambda x: _cost([run(math.exp(x), [0])[0][0]], goal)[0], logs, curves.pop(LIMIT))
            if widths:
                costs = runs([(w, lr) for w in widths for lr in lrs], progress)
                for j, w in enumerate(widths):
                    curves[w] = np.array(costs[j * len(lrs):(j + 1) * len(lrs)])
            if refine:
                found = _refine(logs, curves, runs, refine, progress)
    except KeyboardInterrupt:
        interrupted, found = True, {}
        warnings.warn("lr_sweep interrupted: the result holds the runs that finished, and "
                      "the grid's optima of the curves that were complete", RuntimeWarning,
                      stacklevel=2)
        partial = LRSweep(net.param.label, name, goal, lrs, widths, tuple(runs.records), {})
        keys = ([LIMIT] if run is not None else []) + list(widths)
        curves = {k: _cost(partial.values(k), goal) for k in keys if k not in optima}
        curves = {k: c for k, c in curves.items() if c.size and not np.any(np.isnan(c))}
    for key, costs in curves.items():
        optima[key] = best_optimum(logs, costs, found.get(key, []))
    optima = {k: optima[k] for k in [LIMIT, *widths] if k in optima}
    sweep = LRSweep(net.param.label, name, goal, lrs, widths, tuple(runs.records),
                    {k: o.triple for k, o in optima.items()}, reason, interrupted, optima)
    _warn_at_the_edge(sweep)
    _warn_rivals(optima)
    return sweep


def _warn_rivals(optima: dict) -> None:
    """One warning naming the curves with two minima as good as each other within the noise."""
    both = [f"{k}: η = {o.lr:.4g} and {', '.join(f'{r:.4g}' for r in o.rivals)}"
            for k, o in optima.items() if o.rivals]
    if both:
        warnings.warn(f"lr_sweep: minima equally good within the noise ({'; '.join(both)}); "
                      "optimal_lr gives the lower one, optima[w].rivals the others",
                      RuntimeWarning, stacklevel=3)


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
                executor=None, refine: int = 12, **train_kwargs):
    """Every check :func:`lr_sweep` makes before any work; returns the cleaned
    (lrs, widths, seeds, (metric name, goal, metric), executor, estimate): the last the
    sweep's price in seconds on two cores, grid and searches at every seed and replicate."""
    Problem(net, routine)                            # the network fits the data
    lrs = tuple(sorted(finite_positive(lr, "lr")
                       for lr in check_sequence(lrs, "lrs", "a list of learning rates",
                                                     unordered=True)))
    if len(lrs) < 3 or len(set(lrs)) != len(lrs):
        raise SpecError(f"lrs needs at least three distinct learning rates, got {lrs}")
    if len(lrs) > MAX_LRS:
        raise SpecError(f"lrs has {len(lrs)} learning rates; at most {MAX_LRS} (a grid of "
                        "2^(1/8) steps spans 2^125 with that many): sweep a coarse grid, then "
                        "a finer one around its optimum")
    widths = tuple(check_sequence(widths, "widths", "a list of widths (may be empty)"))
    widths = check_widths(widths, "lr_sweep") if len(widths) >= 2 else tuple(
        check_width(w) for w in widths)
    seeds = check_seeds(seeds)
    limit = check_bool(limit, "limit")
    if not widths and not limit:
        raise SpecError("nothing to sweep: give widths, or limit=True")
    spec = _metric_spec(metric, routine)
    check_int(particles, "particles", 2)
    check_int(replicates, "replicates", 2 if limit else 1, 10 ** 5)
    check_int(refine, "refine", 0, MAX_REFINE)
    executor = check_executor(executor)
    if widths and callable(metric):                  # the finite runs carry the metric
        check_picklable(executor, metric=metric)
    check_train_kwargs(train_kwargs, "lr_sweep", ("seed", "record", "on_divergence"))
    budget = check_time_budget(train_kwargs.get(
        "time_budget", option_default(FINITE_OPTIONS, "time_budget")))
    # the sweep's price: every grid point and one minimum's search per curve, each at
    # every seed (replicate), at the engines' measured costs (docs/performance.md)
    points, total = len(lrs) + refine, 0.0
    evaluations = _evaluations(net, routine, metric, train_kwargs)   # as lr_sweep runs them
    for w in widths:                                 # the finite engine's own checks
        plan = prepare_finite(net, routine, w, **{**train_kwargs, **evaluations, "record": (),
                                                  "on_divergence": "stop", "time_budget": None})
        total += points * len(seeds) * plan.time_estimate
    if limit:
        try:                                         # memory and options of the limit
            plan = prepare_limit(net, routine, particles=particles, replicates=1, f0="zero",
                                 time_budget=None, **evaluations)
            total += points * replicates * plan.engine.info.get("time_estimate_s", 0.0)
        except (UnstableParametrizationError, UnsupportedError):
            pass                                     # no limit: the sweep says why
    refuse_beyond_budget(
        total, budget, f"this sweep ({len(lrs)} learning rates and up to {refine} more per "
        f"curve, at {len(widths)} widths × {len(seeds)} seeds"
        + (f" and the limit × {replicates} replicates" if limit else "") + ")",
        "fewer widths, seeds, replicates, learning rates or a smaller refine")
    return lrs, widths, seeds, spec, executor, total
