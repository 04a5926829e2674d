"""The learning rates of A and B swept together, at every width and at infinity: the
LoRA+ ratio η_B*/η_A* measured, and predicted by the limit (docs/theory.md §16.5).

The grid is width-free: (η̄_A, η̄_B), run at width n as (η̄_A n^{−c_A}, η̄_B n^{−c_B})
with the maximal stable exponents of :func:`~.exponents.maximal_rates` (Adam: (1, 0)),
and at ∞ as the limit's rates.  With powers of two for the widths and the grid's ratio
a power of two too, this is a window of one absolute grid moved with n, so the finite
optima are measured, not assumed: a width whose optimum has not settled shows up as a
moving index.  Per width the optimum pair is the grid point with the least seed-mean final
loss; each coordinate is refined by the parabola through its neighbours, with the seeds'
spread of that vertex as its error (analysis/optimum.py).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..analysis.optimum import grid_optimum
from ..analysis.saving import saved
from ..engine.progress import progress_bar
from ..spec.checks import check_choice, check_int, check_sequence, finite_positive
from .engine import DEFAULT_PARTICLES, fine_tune, pretrained_bases
from .pretrained import PretrainedLoRA
from .toy import SineTask, input_kernel, require_toy


#: how a run is scored: its final test or training loss, or its training loss averaged over
#: the steps ("train_mean": how fast it trains, a smoother function of the rates)
METRICS = ("test", "train", "train_mean")


@saved
@dataclass(frozen=True)
class RateSweep:
    """Final losses over the (η̄_A, η̄_B) grid: ``costs[w]`` (len(eta_A), len(eta_B), seeds)
    for each width of ``widths`` (math.inf last when the limit ran); diverged runs are inf.
    ``exponents`` (c_A, c_B) map the width-free grid to the rates at width n;
    ``interrupted``: Ctrl-C stopped the sweep, which holds the widths that had finished;
    ``curves[w]`` (2, len(eta_A), len(eta_B), seeds, steps + 1): the training and test
    losses at every step, from which :meth:`with_metric` recomputes the costs."""

    def with_metric(self, metric: str) -> "RateSweep":
        """The same runs scored by another :data:`METRICS` entry."""
        import dataclasses
        if not self.curves:
            raise ValueError("this sweep kept no loss curves to rescore")
        check_choice(metric, "metric", METRICS)
        return dataclasses.replace(self, metric=metric,
                                   costs=tuple(_score(c, metric) for c in self.curves))

    widths: tuple
    eta_A: tuple
    eta_B: tuple
    exponents: tuple
    costs: tuple
    metric: str
    steps: int
    interrupted: bool = False
    curves: tuple = ()

    def mean(self, k: int) -> np.ndarray:
        """The seed-mean cost grid of width index ``k`` (inf where any seed diverged)."""
        return np.mean(self.costs[k], axis=-1)

    def _row(self, at_eta_A):
        """The grid row of η̄_A = ``at_eta_A`` (None: none)."""
        if at_eta_A is None:
            return None
        for i, a in enumerate(self.eta_A):
            if math.isclose(a, at_eta_A, rel_tol=1e-12):
                return i
        raise ValueError(f"at_eta_A = {at_eta_A!r} is not on the grid {self.eta_A}")

    def best_index(self, k: int, at_eta_A=None) -> tuple:
        """(i, j): the grid point of least seed-mean cost at width index ``k`` (in the row
        η̄_A = ``at_eta_A`` when given: the best η̄_B at that η̄_A)."""
        m = np.where(np.isfinite(self.mean(k)), self.mean(k), np.inf)
        i = self._row(at_eta_A)
        if i is not None:
            return i, int(np.argmin(m[i]))
        return tuple(int(x) for x in np.unravel_index(np.argmin(m), m.shape))

    def optimum(self, k: int, at_eta_A=None) -> tuple:
        """((η̄_A*, se, dof), (η̄_B*, se, dof)) in the grid's width-free units: each
        coordinate's parabola-refined optimum along its axis through the best point, with
        the standard error of log η̄* over the seeds and its degrees of freedom; with
        ``at_eta_A`` η̄_A is held there (se 0) and only η̄_B is optimized."""
        i, j = self.best_index(k, at_eta_A)
        c = np.asarray(self.costs[k])
        out = []
        for logs, costs in ((np.log(self.eta_A), c[:, j, :]), (np.log(self.eta_B), c[i, :, :])):
            opt = grid_optimum(logs, costs)
            out.append((opt.lr, opt.se, opt.dof))
        if at_eta_A is not None:
            out[0] = (self.eta_A[i], 0.0, 0)
        return tuple(out)

    def ratio(self, k: int, at_eta_A=None) -> float:
        """η_B*/η_A* at width index ``k`` in the rates actually used (at ∞: width-free)."""
        (a, _, _), (b, _, _) = self.optimum(k, at_eta_A)
        n = self.widths[k]
        if n == math.inf:
            return b / a
        c_A, c_B = self.exponents
        return (b * n ** -c_B) / (a * n ** -c_A)

    def ratio_exponent(self, at_eta_A=None) -> tuple:
        """(slope, se, dof) of log(η_B*/η_A*) against log n over the finite widths: LoRA+'s
        Θ(n) is slope 1 (least squares; se from its residuals, dof = widths − 2)."""
        ns = [n for n in self.widths if n != math.inf]
        x = np.log(ns)
        y = np.log([self.ratio(k, at_eta_A) for k, n in enumerate(self.widths)
                    if n != math.inf])
        A = np.vstack([x, np.ones_like(x)]).T
        coef, res, *_ = np.linalg.lstsq(A, y, rcond=None)
        dof = len(ns) - 2
        if dof <= 0:
            return float(coef[0]), math.nan, dof
        s2 = float(np.sum((y - A @ coef) ** 2)) / dof
        se = math.sqrt(s2 / float(np.sum((x - x.mean()) ** 2)))
        return float(coef[0]), se, dof

    def grid_steps_from_limit(self, k: int, at_eta_A=None) -> tuple:
        """How many grid steps the best point of width index ``k`` lies from the limit's,
        along η̄_A and η̄_B (needs the limit in ``widths``)."""
        if self.widths[-1] != math.inf:
            raise ValueError("the sweep has no limit to compare with (include_limit=False)")
        (i, j), (i0, j0) = (self.best_index(k, at_eta_A),
                            self.best_index(len(self.widths) - 1, at_eta_A))
        return i - i0, j - j0

    def predicted_ratio(self, n, at_eta_A=None) -> float:
        """The limit's best pair mapped to width n: (η̄_B*/η̄_A*)_∞ n^{c_A − c_B}."""
        c_A, c_B = self.exponents
        return self.ratio(len(self.widths) - 1, at_eta_A) * n ** (c_A - c_B)

    def table(self, at_eta_A=None):
        """Per width: the best pair in width-free units, the refined ratio η_B*/η_A* in the
        rates used, the limit's prediction of it, and the distance of the best grid point
        from the limit's in grid steps (the ∞ row's ratio is width-free); ``at_eta_A``
        holds η̄_A at that grid value."""
        from ..abc.table import Table
        has_limit = self.widths[-1] == math.inf
        rows = []
        for k, n in enumerate(self.widths):
            (a, _, _), (b, sb, dof) = self.optimum(k, at_eta_A)
            finite = n != math.inf
            steps = (self.grid_steps_from_limit(k, at_eta_A) if has_limit and finite
                     else ("", ""))
            pred = f"{self.predicted_ratio(n, at_eta_A):.3g}" if has_limit and finite else ""
            rows.append(("∞" if not finite else str(n), f"{a:.3g}", f"{b:.3g}",
                         f"{sb:.2f} ({dof})", f"{self.ratio(k, at_eta_A):.3g}", pred,
                         f"{steps[0]}", f"{steps[1]}"))
        return Table(("width", "η̄_A*", "η̄_B*", "se of log η̄_B* (dof)", "η_B*/η_A*",
                      "∞ predicts", "Δi_A vs ∞", "Δi_B vs ∞"), tuple(rows))

    def plot(self, ax=None, at_eta_A=None):
        """log(η_B*/η_A*) against the width, with the fitted slope; the limit's ratio
        times n^{c_A − c_B} as the prediction."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.5))
        ns = [n for n in self.widths if n != math.inf]
        ratios = [self.ratio(k, at_eta_A) for k, n in enumerate(self.widths) if n != math.inf]
        ax.loglog(ns, ratios, "o-", label="finite optimum")
        if self.widths[-1] == math.inf:
            c_A, c_B = self.exponents
            ax.loglog(ns, [self.predicted_ratio(n, at_eta_A) for n in ns], "k--",
                      label=f"limit's optimum × n^{c_A - c_B:g}")
        slope, se, _ = self.ratio_exponent(at_eta_A)
        ax.set_xlabel("width n")
        ax.set_ylabel("η_B* / η_A*")
        where = "" if at_eta_A is None else f" at η̄_A = {at_eta_A:g}"
        ax.set_title(f"optimal ratio{where}: slope {slope:.2f} ± {se:.2f}")
        ax.legend()
        return ax


def rate_sweep(toy, task: SineTask, widths, eta_A, eta_B, steps: int = 100,
               seeds: int = 4, seed: int = 0, metric: str = "test",
               include_limit: bool = True, particles: int = DEFAULT_PARTICLES,
               progress: bool = True) -> RateSweep:
    """Fine-tune at every width of ``widths`` and every pair of the width-free grids
    ``eta_A`` × ``eta_B`` (module docstring), ``seeds`` networks each (replicates of the
    limit on ``particles`` particles), and score each by ``metric`` (:data:`METRICS`).
    ``toy`` a LoRAToy, or a PretrainedLoRA, whose networks (particle sets) are pretrained
    once per width and seed and shared by every rate pair."""
    widths = tuple(check_int(n, "widths") for n in check_sequence(widths, "widths",
                                                                  "positive integers"))
    eta_A = tuple(finite_positive(e, "eta_A") for e in check_sequence(eta_A, "eta_A",
                                                                      "positive numbers"))
    eta_B = tuple(finite_positive(e, "eta_B") for e in check_sequence(eta_B, "eta_B",
                                                                      "positive numbers"))
    check_choice(metric, "metric", METRICS)
    all_widths = widths + ((math.inf,) if include_limit else ())
    pretrained = isinstance(toy, PretrainedLoRA)
    kernel = (input_kernel(require_toy(toy, "rate_sweep"), task.x)
              if include_limit and not pretrained and toy.init != "zero_A" else None)
    curves = []
    with progress_bar(progress, len(all_widths) * len(eta_A) * len(eta_B),
                      "LoRA rate sweep", rate_unit="runs/s") as tick:
        try:
            for n in all_widths:
                frozen = (pretrained_bases(toy, task, n, seeds, seed, particles)
                          if pretrained else kernel)
                curves.append(_grid(toy, task, n, eta_A, eta_B, steps, seeds, seed,
                                    particles, frozen, tick))
        except KeyboardInterrupt:
            if not curves:
                raise
            warnings.warn(f"interrupted: the sweep holds the {len(curves)} widths that had "
                          f"finished of {len(all_widths)} (RateSweep.interrupted)",
                          stacklevel=2)
    return RateSweep(all_widths[:len(curves)], eta_A, eta_B,
                     tuple(float(c) for c in toy.exponents),
                     tuple(_score(c, metric) for c in curves), metric, steps,
                     len(curves) < len(all_widths), tuple(curves))


def _score(curves, metric: str) -> np.ndarray:
    """(len(eta_A), len(eta_B), seeds) costs of a width's loss curves (see METRICS)."""
    train, test = curves
    if metric == "test":
        return test[..., -1]
    if metric == "train":
        return train[..., -1]
    return np.mean(train, axis=-1)                    # inf when the run diverged


def _grid(toy, task, n, eta_A, eta_B, steps, seeds, seed, particles, frozen, tick):
    """The (train/test, η̄_A, η̄_B, seed, step) losses at one width (or ∞)."""
    grid = np.empty((2, len(eta_A), len(eta_B), seeds, steps + 1))
    for i, a in enumerate(eta_A):
        for j, b in enumerate(eta_B):
            rates = (a, b) if n == math.inf else toy.rates(n, a, b)
            with warnings.catch_warnings(record=True):   # the sweep reports the interruption
                run = fine_tune(toy, task, n, *rates, steps=steps, seeds=seeds, seed=seed,
                                particles=particles, frozen=frozen)
            if run.interrupted:                           # a partial run is not a grid point
                raise KeyboardInterrupt
            grid[0, i, j], grid[1, i, j] = run.train_loss, run.test_loss
            tick(0)
    return grid
