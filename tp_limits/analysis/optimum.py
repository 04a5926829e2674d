"""Where a learning-rate curve is lowest, and how well that is known (docs/theory.md §8.3).

A curve is a cost to minimize (a loss; an accuracy's negative) for S seeds
(finite widths) or replicates (a Monte Carlo limit) as a function of
x = log η.  A seed keeps its random numbers at every η, so each seed's cost
f_s(x) is a smooth function of x and so is the seed mean F = mean_s f_s; the
optimum is x* = argmin F.

* **Candidates.** Every local minimum of F on the grid (an edge point too,
  flagged: the optimum may lie beyond the grid).
* **Search.** An interior candidate i is searched by golden-section steps inside
  its bracket (x_{i-1}, x_{i+1}), evaluating F itself: the grid only brackets.
  The search stops when the bracket is narrower than ``tol`` in log η or after
  ``budget`` new points.  Two more points, x̂ ± h, give the standard error.
* **Interval.** x̂ ± (t_{S-1}(0.975) se + r) in log η: r, the distance from x̂
  to the far end of the final bracket, bounds the search's error (F is
  unimodal in the bracket); se is the sandwich standard error of the minimizer
  of a mean of S curves, sd_s(f_s'(x̂)) / (√S F''(x̂)), with central differences
  for the derivatives, on S - 1 degrees of freedom.
* **Without a search** (budget 0) x̂ is the vertex of the parabola through the
  best grid point and its neighbours, and the interval is the bracket
  (x_{i-1}, x_{i+1}) joined with the t interval of the per-seed vertices: the
  parabola's error is unknown, and the bracket is what the grid knows.
* **Rivals.** The best searched candidate is compared, seed by seed, with every
  other one: when the mean paired difference of their costs is within
  t_{S-1}(0.975) of its standard error, the two are equally good within the
  noise, and both are reported.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .saving import saved

#: (3 - √5)/2: the golden-section step into the larger part of the bracket
GOLDEN = (3 - math.sqrt(5)) / 2
#: width in log η at which a search stops (1 % in η)
SEARCH_TOL = 0.01
#: half-step in log η of the central differences behind the standard error
STEP = 0.05


@saved
@dataclass(frozen=True)
class Optimum:
    """The optimum of one curve.

    ``lr``, ``low``, ``high``: η* and its 95 % interval; ``se``: standard error of
    log η* (NaN where none could be formed) on ``dof`` degrees of freedom;
    ``reach``: the bound in log η on the search's (or the grid's) own error, which
    the interval includes; ``method``: 'search', 'grid' (no search: the bracket is
    the interval), 'edge' (best at the grid's edge) or 'exact' (a deterministic
    curve minimized to 1e-8); ``evaluations``: learning rates run beyond the grid;
    ``rivals``: η of other local minima as good as η* within the noise.
    """

    lr: float
    low: float
    high: float
    se: float = math.nan
    dof: int = 0
    reach: float = 0.0
    method: str = "grid"
    evaluations: int = 0
    rivals: tuple = ()

    @property
    def triple(self) -> tuple:
        return (self.lr, self.low, self.high)


NO_OPTIMUM = Optimum(math.nan, math.nan, math.nan, method="none")


def seed_mean(costs) -> np.ndarray:
    """F on each row of a (points, seeds) cost array (an infinite seed makes it infinite)."""
    return np.mean(np.asarray(costs, float), axis=-1)


def candidates(mean) -> list:
    """Indices of the grid's local minima of ``mean`` (finite values only; an edge point
    counts when it is below its one neighbour), best first."""
    c = np.where(np.isfinite(mean), mean, np.inf)
    out = []
    for i in range(len(c)):
        left = c[i - 1] if i > 0 else np.inf
        right = c[i + 1] if i < len(c) - 1 else np.inf
        if np.isfinite(c[i]) and c[i] < left and c[i] <= right:
            out.append(i)
    return sorted(out, key=lambda i: c[i])


def is_interior(i: int, n: int) -> bool:
    return 0 < i < n - 1


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


def _vertex(logs, curve) -> float:
    """log η of the parabola-refined minimum of one curve (NaN if no value is finite)."""
    cands = candidates(curve)
    if not cands:
        return math.nan
    i = cands[0]
    if is_interior(i, len(logs)) and np.all(np.isfinite(curve[i - 1:i + 2])):
        return _parabola(logs, curve, i)
    return float(logs[i])


def _t(dof: int) -> float:
    from scipy.stats import t as student
    return float(student.ppf(0.975, dof))


def grid_optimum(logs, costs) -> Optimum:
    """The optimum without a search: the parabola vertex of F, and an interval that joins
    the best point's grid bracket with the per-seed vertices' t interval."""
    logs = np.asarray(logs, float)
    mean = seed_mean(costs)
    cands = candidates(mean)
    if not cands:
        return NO_OPTIMUM
    i, n = cands[0], len(logs)
    if not is_interior(i, n):
        # best at the grid's edge: the optimum lies there or beyond it, a bound open on one
        # side — (0, η_2] or [η_{n-1}, ∞) — not an interval the seeds could narrow
        lo, hi = (-math.inf, logs[min(1, n - 1)]) if i == 0 else (logs[max(n - 2, 0)], math.inf)
        return Optimum(math.exp(logs[i]), math.exp(lo), math.exp(hi), reach=math.inf,
                       method="edge")
    best = _vertex(logs, mean)
    lo, hi = logs[i - 1], logs[i + 1]
    per = np.array([_vertex(logs, costs[:, s]) for s in range(costs.shape[1])])
    per = per[np.isfinite(per)]
    se, dof = math.nan, 0
    if len(per) >= 2 and np.std(per) > 0:
        dof = len(per) - 1
        se = float(np.std(per, ddof=1) / math.sqrt(len(per)))
        half = _t(dof) * se
        lo, hi = min(lo, np.mean(per) - half), max(hi, np.mean(per) + half)
    return Optimum(math.exp(best), math.exp(lo), math.exp(hi), se, dof,
                   reach=float(max(best - lo, hi - best)), method="grid")


def search(logs, costs, i: int, budget: int, tol: float = SEARCH_TOL, step: float = STEP):
    """Golden-section search of F in the grid bracket of candidate ``i``: a generator that
    yields log η and is sent the per-seed costs there (an array of S); it returns
    (x̂, costs at x̂, (a, b) the final bracket, costs at x̂ - step, at x̂ + step, points run)."""
    a, x, b = float(logs[i - 1]), float(logs[i]), float(logs[i + 1])
    vx = np.asarray(costs[i], float)
    fx, n = float(np.mean(vx)), 0
    while b - a > tol and n < budget:
        u = x + GOLDEN * (b - x) if b - x >= x - a else x - GOLDEN * (x - a)
        vu = np.asarray((yield u), float)
        fu, n = float(np.mean(vu)), n + 1
        if fu < fx:
            a, b = (x, b) if u > x else (a, x)
            x, vx, fx = u, vu, fu
        elif u > x:
            b = u
        else:
            a = u
    minus = np.asarray((yield x - step), float)
    plus = np.asarray((yield x + step), float)
    return x, vx, (a, b), minus, plus, n + 2


def sandwich_se(minus, centre, plus, step: float = STEP) -> float:
    """Standard error of x̂ = argmin mean_s f_s: sd_s(f_s') / (√S F''), from the costs at
    x̂ - step, x̂, x̂ + step (NaN with fewer than two seeds, a non-finite cost, or a
    curvature that is not positive)."""
    vals = np.stack([minus, centre, plus])
    if vals.shape[1] < 2 or not np.all(np.isfinite(vals)):
        return math.nan
    slopes = (plus - minus) / (2 * step)
    curvature = (np.mean(plus) - 2 * np.mean(centre) + np.mean(minus)) / step ** 2
    if not curvature > 0:
        return math.nan
    return float(np.std(slopes, ddof=1) / math.sqrt(len(slopes)) / curvature)


def searched_optimum(logs, found: list) -> Optimum:
    """The optimum from the searched candidates ``found`` (each the return of
    :func:`search` with the grid index it started from): the best F, its interval and
    its rivals."""
    def f(c):
        return float(np.mean(c[1][1]))
    found = sorted(found, key=f)
    i, (x, vx, (a, b), minus, plus, _) = found[0]
    S = len(vx)
    se = sandwich_se(minus, vx, plus)
    runs = sum(c[1][5] for c in found)
    rivals = tuple(math.exp(c[1][0]) for c in found[1:] if _within_noise(c[1][1], vx))
    reach = max(x - a, b - x)
    if math.isfinite(se):
        half = _t(S - 1) * se + reach
        lo, hi = x - half, x + half
    else:                           # no noise estimate: the grid bracket, which holds x*
        lo, hi = float(logs[i - 1]), float(logs[i + 1])
    return Optimum(math.exp(x), math.exp(lo), math.exp(hi), se, S - 1 if math.isfinite(se)
                   else 0, float(reach), "search", runs, rivals)


def best_optimum(logs, costs, found: list) -> Optimum:
    """The optimum of a curve whose interior candidates were searched (``found``, as for
    :func:`searched_optimum`): the grid's rule where none was, or where an edge point of
    the grid is better than every searched one."""
    mean = seed_mean(costs)
    edges = [i for i in candidates(mean) if not is_interior(i, len(mean))]
    if not found or (edges and mean[edges[0]] < min(np.mean(c[1][1]) for c in found)):
        return grid_optimum(logs, costs)
    return searched_optimum(logs, found)


def _within_noise(other, best) -> bool:
    """Whether the seed-paired mean difference other - best is within t_{S-1}(0.975) of
    its standard error."""
    d = np.asarray(other, float) - np.asarray(best, float)
    if len(d) < 2 or not np.all(np.isfinite(d)):
        return False
    sd = np.std(d, ddof=1)
    return bool(np.mean(d) <= _t(len(d) - 1) * sd / math.sqrt(len(d)))


def exact_optimum(f, logs, costs) -> Optimum:
    """A deterministic curve (one column of ``costs``): every grid minimum is minimized
    by a bounded search in log η to 1e-9 between its grid neighbours (an edge point: its
    one neighbour); the best is η*, with no interval beyond it."""
    from scipy.optimize import minimize_scalar
    logs = np.asarray(logs, float)
    curve = seed_mean(costs)
    cands = candidates(curve)
    if not cands:
        return NO_OPTIMUM
    best = (float(curve[cands[0]]), float(logs[cands[0]]))
    for i in cands:
        bounds = (logs[max(i - 1, 0)], logs[min(i + 1, len(logs) - 1)])
        res = minimize_scalar(f, bounds=bounds, method="bounded",
                              options={"xatol": 1e-9})
        best = min(best, (float(res.fun), float(res.x)))
    lr = math.exp(best[1])
    return Optimum(lr, lr, lr, method="exact")
