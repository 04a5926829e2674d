"""Learning-rate sweeps across depth: where the optimum goes as a residual network gets
more blocks, at infinite width and at finite widths (docs/theory.md §12.4).

:func:`depth_sweep` runs :func:`~tp_limits.analysis.lr_sweep.lr_sweep` on the network
rebuilt with each number of blocks K (``MLP.with_blocks``: the same parametrization,
constants and depth exponents), so a rule that transfers in depth shows a flat
η*(K) and one that does not shows η* drifting like a power of K.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..abc.table import Table
from ..errors import SpecError, TPError
from ..spec import MLP
from .depth_check import block_counts
from .lr_sweep import LIMIT, LRSweep, check_sweep, lr_sweep
from .optimum import NO_OPTIMUM
from .plotting import log_values_axis
from .saving import saved


@saved
@dataclass(frozen=True)
class DepthSweep:
    """Result of :func:`depth_sweep`: ``sweeps[K]`` is the :class:`LRSweep` of the network
    with K blocks; ``optimal_lr[K]`` its optima (width or "inf" -> (η*, low, high))."""

    label: str
    depths: tuple
    sweeps: dict
    #: Ctrl-C stopped the study: ``depths`` holds the depths whose sweep ran (the last
    #: one partial, see its ``interrupted``); ``skipped`` the ones never started
    interrupted: bool = False
    skipped: tuple = ()

    @property
    def optimal_lr(self) -> dict:
        return {K: sw.optimal_lr for K, sw in self.sweeps.items()}

    @property
    def keys(self) -> tuple:
        """The widths (and "inf") with an optimum at some depth, in order."""
        seen = []
        for sw in self.sweeps.values():
            for k in sw.keys:
                if k not in seen:
                    seen.append(k)
        return tuple(seen)

    def slope(self, key=LIMIT) -> float:
        """The least-squares slope of log η* against log K at ``key`` (a width or "inf"):
        0 where the optimum transfers across depth (NaN with fewer than two optima).  An
        optimum at the edge of its grid is a bound, not a value, and is left out: a slope
        through edge points would only measure the grid."""
        if key not in self.keys:
            raise SpecError(f"slope({key!r}): this study has no optimum at {key!r}; its "
                            f"widths are {self.keys}")
        pts = [(K, self.sweeps[K].optimal_lr[key][0]) for K in self.depths
               if key in self.sweeps[K].optimal_lr
               and np.isfinite(self.sweeps[K].optimal_lr[key][0])
               and self.sweeps[K].optima.get(key, NO_OPTIMUM).method != "edge"]
        if len(pts) < 2:
            return math.nan
        K, lr = np.log(np.array(pts, float)).T
        return float(np.polyfit(K, lr, 1)[0])

    def table(self) -> Table:
        rows = []
        for K in self.depths:
            sw = self.sweeps[K]
            for key in sw.keys:
                lr, lo, hi = sw.optimal_lr.get(key, (math.nan,) * 3)
                rows.append((str(K), str(key), f"{lr:.4g}", f"[{lo:.3g}, {hi:.3g}]"))
            if sw.no_limit:
                rows.append((str(K), LIMIT, "-", sw.no_limit))
        return Table(("blocks K", "width", "optimal lr", "95 % interval"), tuple(rows))

    def plot(self):
        """The optimal η against K (log-log) per width and for the limit, with intervals."""
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5.5, 4.2))
        keys = self.keys
        colours = plt.cm.viridis(np.linspace(0.1, 0.85, max(len(keys), 1)))
        for key, col in zip(keys, colours):
            pts = [(K, *self.sweeps[K].optimal_lr[key]) for K in self.depths
                   if key in self.sweeps[K].optimal_lr
                   and np.all(np.isfinite(self.sweeps[K].optimal_lr[key]))]
            if not pts:
                continue
            K, lr, lo, hi = np.array(pts, float).T
            style = dict(color="k", lw=2) if key == LIMIT else dict(color=col)
            ax.errorbar(K, lr, yerr=[lr - lo, hi - lr], marker="o", capsize=3,
                        label=("limit (n = ∞)" if key == LIMIT else f"n = {key}")
                        + f", slope {self.slope(key):+.2f}", **style)
        ax.set_xscale("log", base=2)
        log_values_axis(ax)
        ax.set_xlabel("residual blocks K")
        ax.set_ylabel("optimal η")
        ax.set_title(f"{self.label}: the optimum across depth", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        return fig


def depth_sweep(net: MLP, routine, lrs, depths, **sweep_kwargs) -> DepthSweep:
    """:func:`lr_sweep` of ``net`` rebuilt with each number of residual blocks in
    ``depths`` (at least two distinct K >= 1); ``sweep_kwargs`` go to every sweep
    (widths, seeds, limit, metric, particles, replicates, refine, executor, progress, and
    train_finite's options).  Every depth is checked before any runs."""
    if not isinstance(net, MLP) or net.residual is None:
        raise SpecError("depth_sweep needs a residual network: tp.MLP(..., residual="
                        "tp.Residual(...)), whose depth exponents say how the blocks scale")
    Ks = block_counts(depths)
    if len(Ks) < 2:
        raise SpecError(f"depths = {depths!r}: give at least two distinct block counts")
    nets = {K: net.with_blocks(K) for K in Ks}            # every depth built first
    checks = {k: v for k, v in sweep_kwargs.items() if k != "progress"}
    for K in Ks:              # and every sweep's arguments, memory and options checked
        try:
            check_sweep(nets[K], routine, lrs, **checks)
        except TPError as exc:
            try:
                named = type(exc)(f"at K = {K} blocks: {exc}")
            except TypeError:            # an error class with its own arguments
                raise exc from None
            raise named from None
    sweeps: dict[int, LRSweep] = {}
    for K in Ks:
        sweeps[K] = lr_sweep(nets[K], routine, lrs, **sweep_kwargs)
        if sweeps[K].interrupted:
            break
    skipped = tuple(K for K in Ks if K not in sweeps)
    interrupted = bool(sweeps) and sweeps[max(sweeps)].interrupted
    if interrupted:
        warnings.warn(f"depth_sweep interrupted at K = {max(sweeps)}: the result holds the "
                      f"depths that ran ({tuple(sweeps)}); not started: {skipped or 'none'}",
                      RuntimeWarning, stacklevel=2)
    r = net.residual
    label = f"α = {r.alpha:g}, γ = {r.gamma:g}, blocks of {r.block_depth}"
    return DepthSweep(label, tuple(sweeps), sweeps, interrupted, skipped)
