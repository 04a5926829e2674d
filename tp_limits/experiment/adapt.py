"""The [adapter] experiment: pretrain the file's network on its routine, then fine-tune a
low-rank adapter on LoRA+'s task, at every finite width and in the limit
(``tp-limits adapt``; docs/theory.md §16.6).

The file's [parametrization], [model], [data] and [routine] are phase one (the same
network and routine ``tp-limits run`` uses); [adapter] is phase two, and [finite]'s
widths and seeds the networks.  Every network pretrains from its own seed, every limit
replicate on its own particles.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ..adapters import PretrainedLoRA, fine_tune, sine_task
from ..errors import TPError
from ..spec.fields import renamed
from .output import staged, write_json_file
from .schema import ExperimentError

#: [adapter] keys that are PretrainedLoRA's arguments of the same name
_ADAPTER_ARGS = ("layer", "rank", "alpha", "init", "optimizer", "sigma_A", "sigma_B", "betas",
                 "eps")


def build_adapter(a: dict, net, routine, source: str) -> dict:
    """The checked phase two of an experiment file with an [adapter] section: the
    :class:`~tp_limits.adapters.PretrainedLoRA`, its task, and the run's numbers."""
    names = {k: f"adapter.{k}" for k in (*_ADAPTER_ARGS, "d", "n_train", "n_test")}
    # every value given is checked by its key first, then the network, then what is missing
    for key in ("eta_A", "eta_B"):
        if a[key] is not None and not (math.isfinite(a[key]) and a[key] > 0):
            raise ExperimentError(f"adapter.{key} = {a[key]!r} must be a positive number")
    for key in ("steps", "particles", "replicates"):
        if a[key] < 1:
            raise ExperimentError(f"adapter.{key} = {a[key]!r} must be a positive integer")
    if a["replicates"] < 2:
        raise ExperimentError(f"adapter.replicates = {a['replicates']}: give at least two, "
                              "so the limit's mean has a standard error")
    try:
        pre = PretrainedLoRA(net=net, routine=routine,
                             **{k: (tuple(a[k]) if k == "betas" else a[k])
                                for k in _ADAPTER_ARGS})
        task = sine_task(d=net.d_in, n_train=a["n_train"], n_test=a["n_test"],
                         seed=a["task_seed"])
    except TPError as exc:
        raise ExperimentError(f"{source}: {renamed(str(exc), names)}") from None
    for key in ("eta_A", "eta_B"):
        if a[key] is None:
            raise ExperimentError(f"missing required key adapter.{key} (the width-free rate "
                                  "of the factor; e.g. eta_A = 4.0, eta_B = 0.05 for Adam)")
    return {"pre": pre, "task": task, "eta_A": float(a["eta_A"]), "eta_B": float(a["eta_B"]),
            "steps": a["steps"], "particles": a["particles"], "replicates": a["replicates"]}


@dataclass(frozen=True)
class AdaptResult:
    """The fine-tuning runs of an [adapter] experiment: ``runs`` maps each width (and
    math.inf, the limit, first) to its :class:`~tp_limits.adapters.LoRARun`."""

    experiment: object
    runs: dict
    wall_time_s: float
    interrupted: str = ""

    @property
    def complete(self) -> bool:
        return not self.interrupted

    @property
    def limit(self):
        return self.runs.get(math.inf)

    def table(self) -> str:
        """One Markdown row per width: the seeds' mean final test and train loss with their
        standard errors, and the test loss's distance from the limit's mean in combined
        standard errors."""
        lim = self.limit
        rows = ["| width | runs | final test loss | final train loss | gap to ∞ / SE | "
                "diverged |", "|---|---|---|---|---|---|"]
        for width, run in self.runs.items():
            m, se, dof = run.mean_se("test")
            mt, st, _ = run.mean_se("train")
            z = ""
            if lim is not None and width != math.inf:
                m0, se0, _ = lim.mean_se("test")
                z = f"{(m - m0) / math.hypot(se, se0):+.2f}"
            rows.append(f"| {'∞' if width == math.inf else width} | {run.seeds} | "
                        f"{m:.5f} ± {se:.5f} ({dof} dof) | {mt:.5f} ± {st:.5f} | {z} | "
                        f"{int(np.sum(run.diverged >= 0))} |")
        return "\n".join(rows)


def run_adapt(exp, progress: bool = True) -> AdaptResult:
    """The limit (``adapter.replicates`` replicates of ``adapter.particles`` particles),
    then every width of [finite] (``finite.seeds`` networks each): pretrained, then
    fine-tuned.  Ctrl-C keeps the widths (and the seeds of the width it stopped) that had
    finished."""
    a = exp.adapter
    if not a:
        raise ExperimentError(f"{exp.source} has no [adapter] section (give adapter.eta_A "
                              "and adapter.eta_B)")
    pre, task = a["pre"], a["task"]
    runs, interrupted, started = {}, "", time.perf_counter()
    plan = [(math.inf, a["replicates"])] + [(n, exp.finite["seeds"])
                                            for n in exp.finite.get("widths", ())]
    for width, seeds in plan:
        rates = ((a["eta_A"], a["eta_B"]) if width == math.inf
                 else pre.rates(width, a["eta_A"], a["eta_B"]))
        where = "the limit" if width == math.inf else f"width {width}"
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="interrupted:")
                run = fine_tune(pre, task, width, *rates, steps=a["steps"], seeds=seeds,
                                particles=a["particles"], progress=progress)
        except KeyboardInterrupt:
            interrupted = f"during {where}, before any of its runs had finished"
            break
        runs[width] = run
        if run.interrupted:
            interrupted = f"during {where}, after {run.seeds} of {seeds} runs"
            break
    return AdaptResult(exp, runs, time.perf_counter() - started, interrupted)


def write_adapt_report(res: AdaptResult, out, force: bool = False) -> list:
    """``summary.md`` (the table, PARTIAL when interrupted), ``runs.json`` (every run's
    loss curves, final test outputs and Z_A⁰), ``config.json`` and
    ``figures/adapt.png`` (the mean test loss per step at each width and in the limit),
    written through a staging folder as every report is."""
    exp, a = res.experiment, res.experiment.adapter

    def write(stage):
        import matplotlib.pyplot as plt
        write_json_file(stage / "runs.json", {
            "name": exp.name, "complete": res.complete, "interrupted": res.interrupted,
            "eta_A": a["eta_A"], "eta_B": a["eta_B"],
            "exponents": [str(c) for c in a["pre"].exponents],
            "runs": {("inf" if w == math.inf else str(w)): {
                "train_loss": r.train_loss.tolist(), "test_loss": r.test_loss.tolist(),
                "f_test": r.f_test.tolist(), "z_a0": r.z_a0.tolist(),
                "diverged": r.diverged.tolist(), "divergence": list(r.divergence)}
                for w, r in res.runs.items()},
            "wall_time_s": res.wall_time_s})
        write_json_file(stage / "config.json", exp.config)
        (stage / "figures").mkdir()
        fig, ax = plt.subplots(figsize=(6, 4))
        for w, r in res.runs.items():
            loss = np.where(np.isfinite(r.test_loss), r.test_loss, np.nan)
            m = np.nanmean(loss, axis=0)
            se = np.nanstd(loss, axis=0, ddof=1) / math.sqrt(r.seeds)
            t = np.arange(len(m))
            if w == math.inf:
                ax.fill_between(t, m - 2 * se, m + 2 * se, color="k", alpha=0.2)
                ax.plot(t, m, "k-", label="∞ (± 2 SE)")
            else:
                ax.plot(t, m, label=f"n = {w}")
        ax.set_yscale("log")
        ax.set_xlabel("fine-tuning step")
        ax.set_ylabel("test loss (mean over runs)")
        ax.set_title(f"LoRA on the {a['pre'].layer} layer after pretraining")
        ax.legend()
        fig.tight_layout()
        fig.savefig(stage / "figures" / "adapt.png", dpi=110)
        plt.close(fig)
        pre = a["pre"]
        c_A, c_B = pre.exponents
        head = [f"# {exp.name}: a low-rank adapter after pretraining", ""]
        if not res.complete:
            head += [f"**PARTIAL RESULT: interrupted {res.interrupted}.** The table holds "
                     "the runs that had finished.", ""]
        text = head + [
            f"Pretrained: {exp.net.param.label}, L = {exp.net.L}, φ = {exp.net.phi}, "
            f"{exp.routine.steps} steps. Adapter on the {pre.layer} layer: rank {pre.rank}, "
            f"α = {pre.alpha:g}, init {pre.init}, {pre.optimizer}, "
            f"(η̄_A, η̄_B) = ({a['eta_A']:g}, {a['eta_B']:g}) at width n as "
            f"(η̄_A n^-{c_A}, η̄_B n^-{c_B}), {a['steps']} full-batch steps on "
            f"y = sin(mean ξ) ({a['task'].n_train} training, "
            f"{len(a['task'].y) - a['task'].n_train} test inputs).", "",
            res.table(), "",
            "Standard errors over the runs (each network pretrained from its own seed; each "
            "limit replicate on its own particles, with its own Z_A⁰), with runs − 1 degrees "
            "of freedom (docs/theory.md §16.6).", "",
            f"Wall time: {res.wall_time_s:.1f} s.", "",
            "Files: `runs.json`, `config.json`, `figures/adapt.png`.", ""]
        (stage / "summary.md").write_text("\n".join(text), encoding="utf-8")
        return ["runs.json", "config.json", "figures/adapt.png", "summary.md"]
    return staged(out, force, write)

