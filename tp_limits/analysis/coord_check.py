"""Coordinate checks: measured width exponents beside the predicted ones (docs/theory.md §7.2).

For every width n and seed, a finite network is trained and the coordinate
statistics of finite/stats.py are read off at each step t.  Per
(quantity, layer, t) the RMS over seeds is fitted against n on log-log axes;
the slope estimates the exponent k of "quantity ~ n^k" and is compared with
``param.predicted_exponents(t)``.  The 95 % interval comes from the spread
of per-seed slopes (Student t with seeds-1 degrees of freedom).

Verdicts: ``ok`` (|slope - predicted| <= tolerance), ``too large`` /
``too small`` (a miss larger than both the tolerance and the 95 % interval),
``inconclusive`` (a miss within the interval: more seeds or widths needed).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..abc.table import Table
from ..engine.executors import Interrupted, completed, run_tasks
from ..engine.options import (
    check_executor,
    check_seeds,
    check_steps,
    check_train_kwargs,
    check_widths,
)
from ..errors import SpecError
from ..finite.train import prepare_finite, train_finite
from ..spec import MLP, Problem, Routine
from ..spec.checks import finite_positive
from .fits import width_exponent
from .plotting import width_axis
from .saving import saved

#: quantity -> (stats key, layers "hidden" | "all" | "output")
QUANTITIES = {
    "h": ("h_rms", "hidden"), "x": ("x_rms", "hidden"),
    "delta_h": ("dh_rms", "hidden"), "delta_x": ("dx_rms", "hidden"),
    "delta_W_x": ("dWx_rms", "all"), "spectral_ratio": ("spectral_ratio", "all"),
    "frobenius_ratio": ("frobenius_ratio", "all"),
    "feature_kernel_change": ("feature_kernel_change", "output"),
    "f0": (None, "output"), "delta_f": (None, "output"),
}
DEFAULT_PLOT = ("h", "delta_h", "delta_x", "delta_W_x", "spectral_ratio", "delta_f")


def measurements(traj, L: int) -> dict:
    """(quantity, layer, t) -> value for one trajectory (output quantities use layer L+1)."""
    out = {}
    T = traj.steps
    rms = lambda a: float(np.sqrt(np.mean(np.square(a))))  # noqa: E731
    out[("f0", L + 1, 0)] = rms(traj.f_eval[0])
    for t in range(1, T + 1):
        out[("delta_f", L + 1, t)] = rms(traj.f_eval[t] - traj.f_eval[0])
    for q, (key, kind) in QUANTITIES.items():
        if key is None or key not in traj.stats:
            continue
        arr = traj.stats[key]
        if kind == "output":
            for t in range(T + 1):
                out[(q, L + 1, t)] = float(arr[t])
            continue
        for t in range(T + 1):
            for l in range(arr.shape[1]):
                out[(q, l + 1, t)] = float(arr[t, l])
    return out


def _run_one(net, routine, width, seed, kwargs):
    traj = completed(train_finite(net, routine, width, seed=seed, **kwargs))
    return measurements(traj, net.L), traj.divergence


@saved
@dataclass(frozen=True)
class Fit:
    """Fitted width exponent of one (quantity, layer, t)."""

    quantity: str
    layer: int
    t: int
    slope: float
    ci: float
    predicted: float | None
    verdict: str


def _verdict(slope, ci, predicted, tol) -> str:
    if predicted is None:
        return "no prediction"
    if abs(slope - predicted) <= tol:
        return "ok"
    if abs(slope - predicted) <= ci:
        return "inconclusive"              # misses by more than tol, but within the noise
    return "too large" if slope > predicted else "too small"


@saved
@dataclass(frozen=True)
class CoordCheck:
    """Result of :func:`coord_check`.

    ``records``: tidy rows (width, seed, quantity, layer, t, value);
    ``fits``: one :class:`Fit` per (quantity, layer, t).
    """

    label: str
    widths: tuple
    seeds: tuple
    steps: tuple
    tolerance: float
    records: tuple
    fits: tuple
    interrupted: bool = False      # Ctrl-C stopped it: fits use the seeds finished everywhere

    def _step(self, t):
        if t is None:
            return self.steps[-1]
        if t not in self.steps:
            raise SpecError(f"t = {t!r} was not checked; choose one of {self.steps}")
        return t

    def fit(self, quantity: str, layer: int, t: int) -> Fit:
        for f in self.fits:
            if (f.quantity, f.layer, f.t) == (quantity, layer, t):
                return f
        raise KeyError(f"no fit for quantity={quantity!r}, layer={layer}, t={t}")

    def failures(self) -> list:
        """Fits whose slope misses the prediction by more than the tolerance."""
        return [f for f in self.fits if f.verdict in ("too large", "too small")]

    def values(self, quantity: str, layer: int, t: int) -> np.ndarray:
        """(widths, seeds) array of measured values."""
        idx = {w: i for i, w in enumerate(self.widths)}
        sdx = {s: j for j, s in enumerate(self.seeds)}
        out = np.full((len(self.widths), len(self.seeds)), np.nan)
        for r in self.records:
            if (r["quantity"], r["layer"], r["t"]) == (quantity, layer, t):
                out[idx[r["width"]], sdx[r["seed"]]] = r["value"]
        return out

    def table(self, t: int | None = None, quantities=None) -> Table:
        """Measured vs predicted exponents (default: the last step and every quantity)."""
        t = self._step(t)
        rows = []
        for f in self.fits:
            if (f.t != t and not (f.quantity == "f0" and f.t == 0)) or \
                    (quantities and f.quantity not in quantities):
                continue
            pred = "-" if f.predicted is None else f"{f.predicted:+.2f}"
            rows.append((f.quantity, str(f.layer), str(f.t), f"{f.slope:+.3f}",
                         "-" if math.isnan(f.ci) else f"{f.ci:.3f}", pred, f.verdict))
        return Table(("quantity", "layer", "t", "slope", "±95%", "predicted", "verdict"),
                     tuple(rows))

    def plot(self, t: int | None = None, quantities=DEFAULT_PLOT):
        """Log-log panels per quantity: data (mean ± sd over seeds), fit, predicted slope."""
        import matplotlib.pyplot as plt
        t = self._step(t)
        quantities = [q for q in quantities
                      if any(f.quantity == q and f.t in (t, 0 if q == "f0" else t) for f in self.fits)]
        cols = min(3, len(quantities))
        rows = math.ceil(len(quantities) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
        n = np.array(self.widths, float)
        for ax, q in zip(axes.flat, quantities):
            tq = 0 if q == "f0" else t
            for f in [f for f in self.fits if f.quantity == q and f.t == tq]:
                v = self.values(q, f.layer, tq)
                if not np.all(np.isfinite(v)) or np.any(v <= 0):
                    continue
                mean = np.sqrt(np.mean(v ** 2, axis=1))
                line = ax.errorbar(n, mean, yerr=np.std(v, axis=1), marker="o", ms=4, capsize=2,
                                   label=f"layer {f.layer}: {f.slope:+.2f}"
                                   + ("" if f.predicted is None else f" (pred {f.predicted:+.2f})"))
                if f.predicted is not None:
                    anchor = math.exp(np.mean(np.log(mean)))
                    ng = math.exp(np.mean(np.log(n)))
                    ax.plot(n, anchor * (n / ng) ** f.predicted, "--",
                            color=line[0].get_color(), alpha=0.7)
            width_axis(ax, self.widths)
            ax.set_yscale("log")
            ax.set_ylabel(q)
            ax.set_title(f"{q} at t = {tq}", fontsize=10)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(quantities):]:
            ax.set_visible(False)
        fig.suptitle(f"coordinate check: {self.label} (dashed: predicted slope)", fontsize=11)
        fig.tight_layout()
        return fig


def coord_check(net: MLP, routine: Routine, widths, seeds=4, steps=None, executor=None,
                tolerance: float = 0.1, progress: bool = False, **train_kwargs) -> CoordCheck:
    """Train ``net`` at each width and seed; fit and judge the width exponents.

    Parameters
    ----------
    widths : at least two widths.
    seeds : a count (seeds 0..k-1) or an explicit list.
    steps : the steps t whose exponents are fitted (default 1..T; t = 0 is
        always used for f0).
    executor : None (local process pool), 'serial', or any
        concurrent.futures.Executor (e.g. a Dask client's executor).
    tolerance : |slope - predicted| above this is reported as a mismatch.
    train_kwargs : passed to :func:`train_finite` (backend, dtype, backprop, record, ...).
    """
    Problem(net, routine)
    widths = check_widths(widths, "coord_check")
    seeds = check_seeds(seeds)
    steps = check_steps(steps, routine.steps)
    executor = check_executor(executor)
    tolerance = finite_positive(tolerance, "tolerance")
    check_train_kwargs(train_kwargs, "coord_check")
    train_kwargs.setdefault("record", ("stats", "spectral"))
    train_kwargs.setdefault("on_divergence", "stop")
    prepare_finite(net, routine, max(widths), **train_kwargs)   # memory: the widest, first

    tasks = [(net, routine, w, s, train_kwargs) for w in widths for s in seeds]
    try:
        results, interrupted = run_tasks(_run_one, tasks, executor=executor, progress=progress,
                                         desc="coord check"), False
    except Interrupted as exc:
        results, interrupted = exc.results, True
    if all(r is None for r in results):
        raise KeyboardInterrupt
    if interrupted:
        warnings.warn(f"coord_check interrupted: {sum(r is not None for r in results)} of "
                      f"{len(results)} runs finished; the fits use the seeds that finished at "
                      "every width", RuntimeWarning, stacklevel=2)
    records = []
    for (_, _, w, s, _), res in zip(tasks, results):
        if res is None:
            continue
        meas = res[0]
        records += [{"width": w, "seed": s, "quantity": q, "layer": l, "t": t, "value": v}
                    for (q, l, t), v in meas.items() if t in steps or (q == "f0" and t == 0)]

    preds = {t: net.param.predicted_exponents(t) for t in steps}
    keys = sorted({(r["quantity"], r["layer"], r["t"]) for r in records},
                  key=lambda k: (list(QUANTITIES).index(k[0]), k[1], k[2]))
    table = {(r["quantity"], r["layer"], r["t"], r["width"], r["seed"]): r["value"]
             for r in records}
    done = {(r["width"], r["seed"]) for r in records}
    whole = [s for s in seeds if all((w, s) in done for w in widths)]
    fits = []
    for q, l, t in keys:
        v = np.array([[table.get((q, l, t, w, s), np.nan) for s in whole] for w in widths])
        kind = QUANTITIES[q][1]
        pred_t = preds[t if t >= 1 else steps[0]]
        p = pred_t[q][0] if kind == "output" else pred_t[q][l - 1]
        predicted = float(p) if p.is_finite else None
        if not whole:
            fits.append(Fit(q, l, t, float("nan"), float("nan"), predicted, "interrupted"))
            continue
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            verdict = "exactly zero" if np.all(v == 0) else "not finite"
            if verdict == "exactly zero" and p == -np.inf:
                verdict = "ok"
            fits.append(Fit(q, l, t, float("nan"), float("nan"), predicted, verdict))
            continue
        slope, ci = width_exponent(widths, v)
        fits.append(Fit(q, l, t, slope, ci, predicted, _verdict(slope, ci, predicted, tolerance)))
    return CoordCheck(net.param.label, widths, seeds, steps, tolerance, tuple(records),
                      tuple(fits), interrupted)
