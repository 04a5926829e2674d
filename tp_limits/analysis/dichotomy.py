"""TP4's dynamical dichotomy, side by side (docs/theory.md §1.2, §5).

One routine, several parametrizations (default: SP with LR 1/n, NTP, μP, and
MFP when L = 1).  For each, the infinite-width limit (kernel gradient descent
in the kernel regime, the feature-learning limit otherwise) is put beside
finite networks of growing width, and the change of the last-layer feature
kernel ⟨x^L_t(ξ), x^L_t(ζ)⟩ - ⟨x^L_0(ξ), x^L_0(ζ)⟩ is measured: it vanishes
with width in the kernel regime (features freeze) and stays Θ(1) under
feature learning.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..abc.presets import mfp, mup, ntp, sp
from ..abc.table import Table
from ..engine.executors import completed, run_tasks
from ..engine.options import check_executor, check_seeds, check_widths
from ..finite.train import train_finite
from ..limit import prepare_limit, simulate_limit
from ..spec import MLP
from .fits import width_exponent
from .plotting import width_axis


def _run_finite(net, routine, width, seed):
    return completed(train_finite(net, routine, width, seed=seed, record=("stats",)))


@dataclass(frozen=True)
class DichotomyStudy:
    """Result of :func:`dichotomy`.

    ``limits[label]``: the limit Trajectory; ``finite[label][width]``: one
    Trajectory per seed; ``kernel_change[label]``: (widths, seeds) feature-
    kernel change at the last step, with its fitted width exponent in
    ``kernel_change_exponent[label]``.
    """

    labels: tuple
    regimes: dict
    widths: tuple
    limits: dict
    finite: dict
    kernel_change: dict
    kernel_change_exponent: dict
    interrupted: bool = False       # Ctrl-C: the study holds the parametrizations finished

    def table(self) -> Table:
        rows = []
        for lab in self.labels:
            lim = self.limits[lab]
            big = np.mean([tr.f_eval[-1] for tr in self.finite[lab][self.widths[-1]]], axis=0)
            fkc = self.kernel_change[lab].mean(axis=1)
            rows.append((lab, self.regimes[lab], f"{lim.f_eval[-1].ravel()[0]:+.4f}",
                         f"{big.ravel()[0]:+.4f}",
                         ", ".join(f"{v:.2e}" for v in fkc),
                         f"{self.kernel_change_exponent[lab]:+.2f}"))
        widths = ", ".join(map(str, self.widths))
        return Table(("parametrization", "regime", "limit f_T(ξ_1)",
                      f"finite f_T(ξ_1), n={self.widths[-1]}",
                      f"feature-kernel change at n = {widths}", "its width exponent"),
                     tuple(rows))

    def plot(self):
        """Top: f_t on the first eval input, limit vs widths.  Bottom: feature-kernel change."""
        import matplotlib.pyplot as plt
        P = len(self.labels)
        fig, axes = plt.subplots(2, P, figsize=(4.2 * P, 7), squeeze=False)
        colors = plt.cm.viridis(np.linspace(0.15, 0.85, len(self.widths)))
        for j, lab in enumerate(self.labels):
            ax = axes[0, j]
            lim = self.limits[lab]
            t = np.arange(lim.f_eval.shape[0])
            for c, n in zip(colors, self.widths):
                for k, tr in enumerate(self.finite[lab][n]):
                    ax.plot(t, tr.f_eval[:, 0, 0], color=c, alpha=0.6, lw=1,
                            label=f"width {n}" if k == 0 else None)
            y = lim.f_eval[:, 0, 0]
            low, high = lim.f_eval_ci(0.95)
            kernel = self.regimes[lab] in ("kernel", "trivial")
            ax.plot(t, y, "k-", lw=2, label="limit (mean path over f_0)" if kernel else "limit")
            ax.fill_between(t, low[:, 0, 0], high[:, 0, 0], color="k", alpha=0.15)
            ax.set_title(f"{lab} ({self.regimes[lab].replace('_', ' ')})", fontsize=10)
            ax.set_xlabel("step t")
            ax.set_ylabel("f_t(ξ_1)")
            ax.legend(fontsize=7)
            ax = axes[1, j]
            n = np.array(self.widths, float)
            v = self.kernel_change[lab]
            ax.errorbar(n, v.mean(axis=1), yerr=v.std(axis=1), marker="o", capsize=3,
                        label=f"finite (slope {self.kernel_change_exponent[lab]:+.2f})")
            fk = lim.stats.get("feature_kernel_change")
            if fk is not None and np.isfinite(fk[-1]) and fk[-1] > 0:
                ax.axhline(fk[-1], color="k", ls="--", label="limit")
            else:
                ax.plot(n, v.mean(axis=1)[0] * (n / n[0]) ** -1.0, "k:",
                        label="slope -1 (limit: 0, features frozen)")
            width_axis(ax, self.widths)
            ax.set_yscale("log")
            ax.set_ylabel("feature-kernel change at t = T")
            ax.legend(fontsize=7)
        fig.suptitle("dynamical dichotomy: kernel regime vs feature learning", fontsize=11)
        fig.tight_layout()
        return fig


def dichotomy(routine, d_in: int, d_out: int = 1, L: int = 2, phi: str = "tanh", params=None,
              widths=(256, 1024, 4096), seeds: int = 2, particles: int = 25_000,
              replicates: int = 8, executor="serial", progress: bool = False) -> DichotomyStudy:
    """Run ``routine`` under each parametrization: limit and finite networks side by side.

    Ctrl-C stops it within seconds and returns the parametrizations finished so
    far (``study.interrupted``), with a warning.
    """
    if params is None:
        params = [sp(L, c=1), ntp(L), mup(L)] + ([mfp()] if L == 1 else [])
    widths = check_widths(widths, "dichotomy")
    seeds = check_seeds(seeds)
    executor = check_executor(executor)
    nets = [MLP(p, d_in, d_out, phi=phi) for p in params]
    for net in nets:                       # every problem checked before any work
        prepare_limit(net, routine, particles=particles, replicates=replicates, f0="zero")
    labels, regimes, limits, finite, change, expo = [], {}, {}, {}, {}, {}
    interrupted = False
    for p, net in zip(params, nets):
        lab = p.label
        k = p.classify()
        lim = simulate_limit(net, routine, particles=particles, replicates=replicates,
                             f0="zero", progress=progress)
        tasks = [(net, routine, w, s) for w in widths for s in seeds]
        try:
            if lim.interrupted:
                raise KeyboardInterrupt
            outs = run_tasks(_run_finite, tasks, executor=executor, progress=progress,
                             desc=f"finite networks ({lab})")
        except KeyboardInterrupt:
            interrupted = True
            break
        regimes[lab], limits[lab] = k.regime, lim
        finite[lab] = {w: [o for (_, _, ww, _), o in zip(tasks, outs) if ww == w]
                       for w in widths}
        v = np.array([[tr.stats["feature_kernel_change"][-1] for tr in finite[lab][w]]
                      for w in widths])
        change[lab] = v
        expo[lab] = width_exponent(widths, v)[0] if np.all(v > 0) else math.nan
        labels.append(lab)
    if interrupted:
        if not labels:
            raise KeyboardInterrupt
        warnings.warn(f"dichotomy interrupted: {len(labels)} of {len(params)} "
                      "parametrizations finished", RuntimeWarning, stacklevel=2)
    return DichotomyStudy(tuple(labels), regimes, widths, limits, finite, change, expo,
                          interrupted)
