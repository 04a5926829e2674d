"""Coordinate checks across depth: how a residual network's first update scales with the
number of blocks K, against the exponents of its depth rule (docs/theory.md §12.5).

With branch multiplier K^{−α}, block rates times K^{−γ} and an update rule that carries
the multiplier p times (SGD p = 2, Adam and Muon p = 1; spec/residual.py), one step moves

* each block's product by c ΔW x = Θ(K^{−(pα + γ)})  ("block update"),
* the top features by the blocks' updates summed coherently, Θ(K^{1 − pα − γ}), and by
  the input layer's update, Θ(1): Δh^L = Θ(K^{max(0, 1 − pα − γ)})  ("feature change"),
* the output by the same power  ("output change"),

as long as the forward pass at initialization is stable in depth, α ≥ ½ (below it the
pre-activations grow like exp(K^{1−2α}), no power of K).  :func:`depth_check` trains the
network rebuilt with each K (``MLP.with_blocks``) at one width and several seeds, fits
each quantity's exponent in K over the largest depths (the predictions are asymptotic: the
input layer and the readout add a Θ(1) part that a power of K overtakes only at large K),
and compares it with the prediction.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..abc.table import Table
from ..engine.executors import Interrupted, completed, run_tasks
from ..engine.options import (check_executor, check_progress, check_seeds,
                              check_train_kwargs)
from ..errors import SpecError
from ..finite.train import prepare_finite, train_finite
from ..spec import MLP, Problem, Routine
from ..spec.checks import check_int, check_sequence, check_width, finite_positive
from .fits import width_exponent
from .saving import saved

QUANTITIES = ("block update", "feature change", "output change")


def depth_exponents(net: MLP) -> dict:
    """The predicted exponents in K of the QUANTITIES after one step (None for each when
    α < ½: the forward pass at initialization is not a power of K)."""
    res = net.residual
    if res is None:
        raise SpecError("a depth check needs a residual network (MLP(..., residual=...))")
    k = res.classify(net.param.optimizer)
    if k.verdict == "unstable at init":
        return dict.fromkeys(QUANTITIES)
    grow = float(max(0, k.summed_update))
    return {"block update": float(k.block_update), "feature change": grow,
            "output change": grow}


def _measure(traj, net: MLP) -> dict:
    """The QUANTITIES at t = 1 of one run (rms over the evaluation inputs)."""
    s, L = traj.stats, net.L
    blocks = [l for l, k in enumerate(net.skips) if k >= 0]
    c = net.branch[blocks[0]]
    df = traj.f_eval[1] - traj.f_eval[0]
    return {"block update": c * float(np.sqrt(np.mean(s["dWx_rms"][1, blocks] ** 2))),
            "feature change": float(s["dh_rms"][1, L - 1]),
            "output change": float(np.sqrt(np.mean(df ** 2)))}


def _run_one(net, routine, width, seed, kwargs):
    return _measure(completed(train_finite(net, routine, width, seed=seed, **kwargs)), net)


@saved
@dataclass(frozen=True)
class DepthCheck:
    """Result of :func:`depth_check`: ``values[q]`` (len(depths), seeds) per quantity,
    ``slopes[q]`` = (exponent in K fitted over the ``fitted`` largest depths, its 95 %
    half-width over the seeds),
    ``predicted[q]`` (None: no power-law prediction)."""

    label: str
    depths: tuple
    width: int
    seeds: tuple
    values: dict
    slopes: dict
    predicted: dict
    tolerance: float
    fitted: int = 3

    @property
    def mismatches(self) -> list:
        """Quantities whose exponent misses its prediction by more than the tolerance and
        by more than its own interval."""
        out = []
        for q in QUANTITIES:
            pred = self.predicted[q]
            slope, ci = self.slopes[q]
            if pred is not None and abs(slope - pred) > max(self.tolerance, ci):
                out.append(f"{q}: K^{slope:+.2f} ± {ci:.2f}, predicted K^{pred:+.2f}")
        return out

    def table(self) -> Table:
        """Per quantity: the fitted exponent in K, the predicted one, the rms value per K."""
        rows = tuple((q, f"{self.slopes[q][0]:+.3f} ± {self.slopes[q][1]:.3f}",
                      "—" if self.predicted[q] is None else f"{self.predicted[q]:+.3f}",
                      *(f"{math.sqrt(np.mean(v ** 2)):.4g}" for v in self.values[q]))
                     for q in QUANTITIES)
        return Table(("quantity", "exponent in K", "predicted",
                      *(f"K = {K}" for K in self.depths)), rows)

    def plot(self):
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(QUANTITIES), figsize=(4.2 * len(QUANTITIES), 3.4))
        K = np.array(self.depths, float)
        for ax, q in zip(axes, QUANTITIES):
            v = self.values[q]
            mean = np.sqrt(np.mean(v ** 2, axis=1))
            ax.errorbar(K, mean, yerr=np.std(v, axis=1), marker="o", ms=4, capsize=2,
                        label=f"fitted K^{self.slopes[q][0]:+.2f}")
            pred = self.predicted[q]
            if pred is not None:
                anchor = math.exp(np.mean(np.log(mean)))
                ax.plot(K, anchor * (K / math.exp(np.mean(np.log(K)))) ** pred, "--",
                        label=f"predicted K^{pred:+.2f}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("blocks K")
            ax.set_title(f"{q} after one step", fontsize=10)
            ax.legend(fontsize=8)
        fig.suptitle(f"depth check: {self.label}", fontsize=11)
        fig.tight_layout()
        return fig


def block_counts(depths) -> tuple:
    """The distinct block counts K >= 1 of ``depths`` (a list, or a set: they are
    sorted), in increasing order."""
    return tuple(sorted({check_int(K, f"depths[{i}]") for i, K in enumerate(
        check_sequence(depths, "depths", "a list of block counts", unordered=True))}))


def depth_check(net: MLP, routine: Routine, depths, width: int = 1024, seeds=4,
                executor=None, tolerance: float = 0.15, fitted: int | None = None,
                progress: bool = False, **train_kwargs) -> DepthCheck:
    """Train ``net`` rebuilt with each number of blocks in ``depths`` (at least two) at
    ``width`` for each seed; fit the exponents in K of the first step's block update,
    feature change and output change over the ``fitted`` largest depths (default: the
    three largest, or all where fewer; at most all of them), and compare them
    with the depth rule's (docs/theory.md §12.5).  ``train_kwargs`` go to
    :func:`train_finite`."""
    predicted = depth_exponents(net)
    depths = block_counts(depths)
    if len(depths) < 2:
        raise SpecError(f"depths = {depths!r}: a fit in K needs at least two depths")
    width = check_width(width)
    seeds = check_seeds(seeds)
    executor = check_executor(executor)
    tolerance = finite_positive(tolerance, "tolerance")
    fitted = (min(3, len(depths)) if fitted is None
              else check_int(fitted, "fitted", 2, len(depths)))
    progress = check_progress(progress)
    check_train_kwargs(train_kwargs, "depth_check", ("seed", "record", "progress"))
    train_kwargs.update(record=("stats",), progress=False)
    nets = [net.with_blocks(K) for K in depths]
    for n in nets:
        Problem(n, routine)
    prepare_finite(nets[-1], routine, width, **train_kwargs)      # memory: the deepest, first
    tasks = [(n, routine, width, s, train_kwargs) for n in nets for s in seeds]
    try:
        results = run_tasks(_run_one, tasks, executor=executor, progress=progress,
                            desc="depth check")
    except Interrupted as exc:
        if all(r is None for r in exc.results):
            raise KeyboardInterrupt from None
        warnings.warn("depth_check interrupted: the fits use the depths whose seeds all "
                      "finished", RuntimeWarning, stacklevel=2)
        results = exc.results
    S = len(seeds)
    rows = [results[i * S:(i + 1) * S] for i in range(len(depths))]
    keep = [i for i, r in enumerate(rows) if all(x is not None for x in r)]
    depths = tuple(depths[i] for i in keep)
    values = {q: np.array([[x[q] for x in rows[i]] for i in keep]) for q in QUANTITIES}
    slopes = {q: width_exponent(depths[-fitted:], values[q][-fitted:]) for q in QUANTITIES}
    return DepthCheck(net.param.label, depths, width, tuple(seeds), values, slopes, predicted,
                      tolerance, fitted)
