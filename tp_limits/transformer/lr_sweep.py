"""Learning-rate sweeps of finite transformers: the optimal rate at each width, and how it
moves with the width (docs/theory.md §17.5).

At each width every rate η of the grid trains ``seeds`` networks (a seed keeps its
initialization at every η, so each seed's cost is a smooth function of log η); the cost is
the training loss after the last step (+∞ where a run diverged).  The optimum is the
parabola vertex of the seed mean at its best grid point, with the interval of
:func:`~tp_limits.analysis.optimum.grid_optimum` (seeds − 1 degrees of freedom).  Under
μP the optimum should not move with the width; :meth:`TransformerSweep.drift` fits the
exponent k of η* ∝ n^k.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..analysis.optimum import grid_optimum
from ..engine.options import check_seed
from ..engine.progress import progress_bar
from ..errors import UnsupportedError
from ..spec.checks import check_bool, check_int, check_sequence, finite_positive
from ..spec.optimizers.sgd import SGD
from .limit import limit_refusal, simulate_transformer_limit
from .model import Transformer
from .tasks import TokenTask
from .train import check_optimizer, train_transformer


@dataclass(frozen=True)
class TransformerSweep:
    """``costs`` (widths, rates, seeds): final training loss (the limit's row, width
    ``math.inf``, over its replicates); ``optima``: width -> Optimum; ``interrupted``:
    Ctrl-C stopped the sweep, which holds the widths that had finished."""

    widths: tuple
    lrs: tuple
    costs: np.ndarray
    optima: dict
    interrupted: bool = False

    def drift(self) -> tuple:
        """(k, half-width of its 95 % interval) of log η* = k log n + const over the widths
        whose optimum is interior (an ordinary least-squares fit; NaN below 3 widths)."""
        from scipy.stats import t as student
        pts = [(n, o.lr) for n, o in self.optima.items()
               if o.method == "grid" and n != math.inf]
        if len(pts) < 2:
            return math.nan, math.nan
        x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
        k, c = np.polyfit(x, y, 1)
        if len(pts) < 3:
            return float(k), math.nan
        resid = y - (k * x + c)
        se = math.sqrt(np.sum(resid ** 2) / (len(x) - 2) / np.sum((x - x.mean()) ** 2))
        return float(k), float(student.ppf(0.975, len(x) - 2) * se)


def transformer_lr_sweep(model: Transformer, task: TokenTask, widths, lrs, optimizer=None,
                         steps: int = 10, seeds: int = 3, seed: int = 0, limit: bool = False,
                         particles: int = 4096, progress: bool = True) -> TransformerSweep:
    """Train ``model`` on ``task`` at every width × rate × seed; see the module docstring.
    With ``limit=True`` the infinite-width limit joins as the last width, ``math.inf``
    (:func:`~.limit.simulate_transformer_limit` with ``seeds`` replicates of ``particles``:
    μP under SGD only, refused otherwise before any work)."""
    optimizer = SGD() if optimizer is None else optimizer
    check_optimizer(optimizer, model)
    widths = tuple(check_int(n, "widths") for n in check_sequence(widths, "widths",
                                                                  "positive integers"))
    for n in widths:
        model.head_width(n)
    lrs = tuple(finite_positive(x, "lrs") for x in check_sequence(lrs, "lrs", "rates"))
    steps, seeds = check_int(steps, "steps"), check_int(seeds, "seeds")
    seed, particles = check_seed(seed), check_int(particles, "particles", 2)
    if check_bool(limit, "limit"):
        why = limit_refusal(model, optimizer)
        if why:
            raise UnsupportedError(f"limit=True: {why}")
        check_int(seeds, "seeds", 2)
        widths = widths + (math.inf,)
    costs = np.full((len(widths), len(lrs), seeds), np.nan)
    done, interrupted = 0, False
    try:
        with progress_bar(progress, len(widths) * len(lrs) * seeds,
                          "transformer lr sweep") as on_step:
            for i, n in enumerate(widths):
                for j, lr in enumerate(lrs):
                    costs[i, j] = _costs(model, task, n, lr, optimizer, steps, seeds, seed,
                                         particles)
                    for s in range(seeds):
                        on_step(s)
                done = i + 1
    except KeyboardInterrupt:
        interrupted = True
        warnings.warn(f"transformer_lr_sweep interrupted: it holds the {done} widths that had "
                      f"finished of {len(widths)}", stacklevel=2)
    logs = np.log(lrs)
    optima = {n: grid_optimum(logs, costs[i]) for i, n in enumerate(widths[:done])}
    return TransformerSweep(widths[:done], lrs, costs[:done], optima, interrupted)


def _costs(model, task, n, lr, optimizer, steps, seeds, seed, particles):
    """The final training loss of each seed (or limit replicate) at width ``n`` and rate
    ``lr``; +∞ where a run diverged."""
    if n == math.inf:
        run = simulate_transformer_limit(model, task, lr, optimizer, steps, particles, seeds,
                                         seed, on_divergence="stop")
        if run.interrupted:
            raise KeyboardInterrupt
        if not run.status.complete:
            return np.inf
        return run.stats["loss_replicates"][:, -1]
    out = np.empty(seeds)
    for s in range(seeds):
        run = train_transformer(model, task, n, lr, optimizer, steps, seed + s,
                                on_divergence="stop")
        if run.interrupted:
            raise KeyboardInterrupt
        out[s] = run.loss[-1] if run.status.complete else np.inf
    return out
