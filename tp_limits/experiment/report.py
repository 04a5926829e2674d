"""Write an experiment's results: Trajectories, figures (PNG), summary (Markdown + JSON).

Layout of the output folder::

    summary.md  summary.json  config.json
    figures/outputs.png       f_t on each evaluation input: limit with its 95 % interval, finite widths
    figures/convergence.png   |f_n - f_limit| against n, log-log, reference slope -1/2
    figures/loss.png          training loss: limit and finite widths
    figures/overview.png      the first two side by side (the README picture)
    trajectories/limit.npz    trajectories/finite_n{width}_seed{seed}.npz

The folder is written beside its final place (``.NAME.incomplete``) and moved
into place when every file is written, so a failure never leaves a folder
that looks complete; an interrupted run's report says PARTIAL at the top.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from ..abc.table import Table
from ..engine.meta import model_meta
from ..spec.phases import phases_json
from .output import staged, write_json_file
from .runner import ExperimentResult

MAX_PANELS = 4

#: the widest 95 % interval of a fitted width exponent that still tests n^(−1/2): half
#: the prediction, so the interval cannot hold both −1/2 and 0 (or −1)
RESOLVED_CI = 0.25


def _width_colours(widths):
    import matplotlib.pyplot as plt
    cmap = plt.get_cmap("viridis")
    return [cmap(0.85 * i / max(1, len(widths) - 1)) for i in range(len(widths))]


def student_t(dof: int, level: float = 0.95) -> float:
    """The two-sided Student-t quantile: a 95 % interval is ± this many standard errors."""
    from scipy.stats import t
    return float(t.ppf(0.5 + level / 2, dof))


def _band_label(lim) -> str:
    dof = lim.se_dof
    return "limit, 95 % interval" + (f" (t, {dof} dof)" if dof else " (error estimate)")


def plot_outputs(res: ExperimentResult, j: int = 0, ax=None, output: int = 0):
    """f_t(ζ_j): the limit (black, its 95 % Student-t band) and the seed mean of each width
    (95 % t interval over seeds, docs/theory.md §8.1)."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4.2))
    lim = res.limit
    t = np.arange(lim.f_eval.shape[0])
    study = res.study
    if study is not None:
        for n, runs, col in zip(study.widths, study.runs, _width_colours(study.widths)):
            if len(runs) < 2:
                continue                   # an interrupted study: too few runs for a band
            f = np.array([r.f_eval[:, j, output] for r in runs])
            mean, se = f.mean(0), f.std(0, ddof=1) / math.sqrt(len(f))
            ax.errorbar(t, mean, yerr=student_t(len(f) - 1) * se, color=col, lw=1, capsize=2,
                        marker=".", label=f"n = {n} (mean of {len(f)} seeds)")
    mu = lim.f_eval[:, j, output]
    ax.plot(t, mu, "k-", lw=2, label="infinite-width limit")
    if lim.f_eval_se is not None:
        low, high = lim.f_eval_ci(0.95)
        ax.fill_between(t, low[:, j, output], high[:, j, output], color="k", alpha=0.2,
                        label=_band_label(lim))
    zeta = ", ".join(f"{x:.2f}" for x in res.experiment.routine.eval_inputs[j])
    ax.set_xlabel("SGD step t")
    ax.set_ylabel(f"f_t(ζ{j}), output {output}")
    ax.set_title(f"output on ζ{j} = ({zeta})")
    ax.legend(fontsize=7)
    return ax.figure


def plot_deviation(res: ExperimentResult, j: int = 0, ax=None, output: int = 0):
    """f^{(n)}_t(ζ_j) − f̊_t(ζ_j): per width, the band mean ± one std over seeds.

    The bands shrink towards the limit's own 95 % band as n grows (width
    ~ n^{-1/2} by docs/theory.md §7.2).  When the limit is random through
    f_0 each run is compared with the limit started from its own f_0.
    """
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4.2))
    lim = res.limit
    t = np.arange(lim.f_eval.shape[0])
    study = res.study
    own = study.run_limits or [[lim.f_eval] * len(r) for r in study.runs]
    for n, runs, refs, col in zip(study.widths, study.runs, own, _width_colours(study.widths)):
        if len(runs) < 2:
            continue
        dev = np.array([r.f_eval[:, j, output] - f[:, j, output] for r, f in zip(runs, refs)])
        mean, sd = dev.mean(0), dev.std(0, ddof=1)
        ax.fill_between(t, mean - sd, mean + sd, color=col, alpha=0.35,
                        label=f"n = {n}: mean ± sd over {len(dev)} seeds")
    if not study.conditioned and lim.f_eval_se is not None:
        low, high = lim.f_eval_ci(0.95)
        ax.fill_between(t, (low - lim.f_eval)[:, j, output], (high - lim.f_eval)[:, j, output],
                        color="k", alpha=0.6, label=_band_label(lim))
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("SGD step t")
    ax.set_ylabel(f"f_t(ζ{j}) − limit, output {output}")
    ax.set_title(f"finite minus limit on ζ{j}"
                 + (" (each from its own f_0)" if study.conditioned else ""))
    ax.legend(fontsize=7)
    return ax.figure


def plot_loss(res: ExperimentResult, ax=None):
    """Mean training loss per step: the limit and the seed mean of each width."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4.2))
    t = np.arange(res.limit.steps)
    if res.study is not None:
        for n, runs, col in zip(res.study.widths, res.study.runs,
                                _width_colours(res.study.widths)):
            if not runs:
                continue
            ax.plot(t, np.mean([r.loss for r in runs], axis=0), color=col, marker=".",
                    lw=1, label=f"n = {n}")
    ax.plot(t, res.limit.loss, "k-", lw=2, label="infinite-width limit")
    ax.set_yscale("log")
    ax.set_xlabel("SGD step t")
    ax.set_ylabel(f"training loss ({res.experiment.routine.loss}) on the step's batch")
    ax.set_title("training loss")
    ax.legend(fontsize=7)
    return ax.figure


def _figures(res: ExperimentResult, folder: Path) -> list:
    import matplotlib.pyplot as plt
    folder.mkdir(parents=True, exist_ok=True)
    written = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
        written.append(f"figures/{name}")

    E = min(MAX_PANELS, res.limit.f_eval.shape[1])
    fig, axes = plt.subplots(1, E, figsize=(4.6 * E, 4.0), squeeze=False)
    for j in range(E):
        plot_outputs(res, j, axes[0, j])
    save(fig, "outputs.png")
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    save(plot_loss(res, ax), "loss.png")
    if res.study is not None:
        save(res.study.plot(), "convergence.png")
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
        plot_outputs(res, 0, axes[0])
        plot_deviation(res, 0, axes[1])
        res.study.plot(axes[2])
        fig.suptitle(res.experiment.name)
        save(fig, "overview.png")
    return written


def _trajectories(res: ExperimentResult, folder: Path) -> list:
    folder.mkdir(parents=True, exist_ok=True)
    res.limit.save(folder / "limit.npz")
    written = ["trajectories/limit.npz"]
    if res.study is not None:
        for n, runs in zip(res.study.widths, res.study.runs):
            for tr in runs:
                name = f"finite_n{n}_seed{tr.meta['seed']}.npz"
                tr.save(folder / name)
                written.append(f"trajectories/{name}")
    return written


def held_out(res: ExperimentResult) -> dict:
    """The held-out metrics at the last step, when the routine has eval targets: metric ->
    {"limit": value, "limit_se": its standard error or None, "widths": {n: (seed mean,
    standard error over the seeds, seeds)}}; {} without eval targets."""
    lim = res.limit
    out = {}
    for key in ("eval_loss", "eval_accuracy"):
        if key not in lim.stats:
            continue
        se = lim.stats.get(key + "_se")
        row = {"limit": float(lim.stats[key][-1]),
               "limit_se": None if se is None else float(se[-1]), "widths": {}}
        if res.study is not None:
            for n, runs in zip(res.study.widths, res.study.runs):
                v = np.array([tr.stats[key][-1] for tr in runs if key in tr.stats], float)
                if v.size:
                    err = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else None
                    row["widths"][int(n)] = (float(v.mean()), err, int(v.size))
        out[key] = row
    return out


def _held_out_table(metrics: dict) -> str:
    """Rows: the limit, then each width (seed mean ± its standard error, seeds − 1
    degrees of freedom); a column per held-out metric."""
    keys = list(metrics)
    num = lambda v, e: f"{v:.4g}" + (f" ± {e:.1e}" if e is not None else "")   # noqa: E731
    rows = [("∞ (limit)", *(num(metrics[k]["limit"], metrics[k]["limit_se"]) for k in keys))]
    for n in metrics[keys[0]]["widths"]:
        rows.append((str(n), *(num(*metrics[k]["widths"][n][:2]) if n in metrics[k]["widths"]
                               else "-" for k in keys)))
    return Table(("width", *(f"{k} (seed mean ± SE)" for k in keys)), tuple(rows)).markdown()


def summary(res: ExperimentResult) -> dict:
    """The machine-readable summary (what summary.json holds)."""
    exp, k, study = res.experiment, res.classification, res.study
    T = res.limit.steps
    out = {
        "name": exp.name, "description": exp.description, "source": exp.source,
        "complete": res.complete, "interrupted": res.interrupted or None,
        "classification": k.to_dict(),
        "model": model_meta(exp.net),
        "routine": {"steps": T, "batch_size": exp.routine.batch_size, "lr": exp.routine.lr,
                    "schedule": exp.config.get("routine", {}).get("schedule", "constant"),
                    "lr_factors": (None if exp.routine.lr_factors is None
                                   else exp.routine.lr_factors.tolist()),
                    "loss": exp.routine.loss, "eval_inputs": exp.routine.eval_inputs.tolist(),
                    "phases": phases_json(exp.routine.phase_spans)},
        "limit": {"engine": res.limit.meta.get("engine"), "method": res.limit.meta.get("method"),
                  "se_method": res.limit.meta.get("se_method"),
                  "f_final": res.limit.f_eval[T].tolist(),
                  "f_final_se": None if res.limit.f_eval_se is None
                  else res.limit.f_eval_se[T].tolist(),
                  **{key: exp.limit[key] for key in ("particles", "replicates", "seed")}},
        "wall_time_s": res.wall_time_s,
    }
    if study is not None:
        out["convergence"] = {
            "widths": list(study.widths), "seeds": len(study.seeds),
            "rms": study.rms.tolist(), "rms_se": study.rms_se.tolist(),
            "bias": study.bias.tolist(), "bias_se": study.bias_se.tolist(),
            "exponent": study.exponent, "exponent_ci95": study.exponent_ci,
            "predicted_exponent": -0.5, "limit_error": study.limit_error,
            "conditioned_on_f0": study.conditioned,
            "exponent_resolved": _consistent(study.exponent, study.exponent_ci) is not None,
            "consistent_with_prediction": _consistent(study.exponent, study.exponent_ci),
        }
    metrics = held_out(res)
    if metrics:
        out["held_out"] = metrics
    return out


def _phases_sentence(routine) -> str:
    """" In phases: steps 0–15 train every parameter; …" (docs/theory.md §10.10), or ""."""
    if len(routine.phase_spans) == 1 and routine.phase_spans[0].train is None:
        return ""
    rates = routine.lr * routine.rates
    parts = [f"steps {p.start}–{p.stop - 1} train "
             f"{'every parameter' if p.train is None else ', '.join(p.train)} at "
             f"η = {rates[p.start]:g}" + (" (scheduled)" if np.ptp(rates[p.start:p.stop]) else "")
             for p in routine.phase_spans]
    return " In phases: " + "; ".join(parts) + " (evaluated on the last phase's task)."


def _markdown(res: ExperimentResult, s: dict, files: list) -> str:
    exp, k = res.experiment, res.classification
    lines = [f"# {exp.name}", ""]
    if not res.complete:
        lines += [f"**PARTIAL RESULT: the run was interrupted {res.interrupted}.** Everything "
                  "below describes only what had finished.", ""]
    if exp.description:
        lines += [exp.description, ""]
    lines += [
        f"Parametrization **{k.parametrization.label}** (L = {k.L}): regime "
        f"**{k.regime}**, r = {k.r}; layers updated maximally: "
        f"{', '.join(str(l + 1) for l, m in enumerate(k.updated_maximally) if m) or 'none'}.",
        f"Network: φ = {exp.net.phi}, d_in = {exp.net.d_in}, d_out = {exp.net.d_out}. "
        f"Routine: {s['routine']['steps']} SGD steps, batch {exp.routine.batch_size}, "
        f"η = {exp.routine.lr}"
        + (f" (the peak of a {s['routine']['schedule']} schedule)"
           if exp.routine.lr_factors is not None and len(exp.routine.phase_spans) == 1
           else "")
        + f", loss {exp.routine.loss}."
        + _phases_sentence(exp.routine),
        f"Limit: {s['limit']['engine']} ({s['limit']['method']}), "
        f"{exp.limit['particles']:,} particles × {exp.limit['replicates']} replicates; "
        f"error bars: {s['limit']['se_method']}.", ""]
    T = s["routine"]["steps"]
    rows = []
    for j, zeta in enumerate(exp.routine.eval_inputs):
        f = res.limit.f_eval[T, j]
        se = res.limit.f_eval_se[T, j] if res.limit.f_eval_se is not None else 0 * f
        rows.append((f"ζ{j} = ({', '.join(f'{x:.3g}' for x in zeta)})",
                     ", ".join(f"{a:+.5f} ± {b:.1e}" for a, b in zip(f, se))))
    lines += [f"## Limit after {T} steps", "", Table(("input", "f_T ± SE"), tuple(rows)).markdown(),
              ""]
    if s.get("held_out"):
        lines += [f"## Held-out metrics after {T} steps", "", _held_out_table(s["held_out"]),
                  ""]
    if res.study is not None:
        c = s["convergence"]
        lines += ["## Finite networks against the limit", "",
                  res.study.table().markdown(), "",
                  f"Fitted width exponent of the RMS error: **{c['exponent']:+.3f} ± "
                  f"{c['exponent_ci95']:.3f}** (95 %): "
                  f"{exponent_verdict(c['exponent'], c['exponent_ci95'])}.", ""]
    lines += ["## Wall time", "", ", ".join(f"{k_}: {v:.1f} s"
                                             for k_, v in res.wall_time_s.items()), "",
              "## Files", ""] + [f"- `{f}`" for f in files if "/finite_" not in f]
    finite = [f for f in files if "/finite_" in f]
    if finite:
        lines.append(f"- `trajectories/finite_n{{width}}_seed{{seed}}.npz` ({len(finite)} files)")
    lines.append("")
    return "\n".join(lines)


def write_report(res: ExperimentResult, out, force: bool = False) -> list:
    """Write every output into folder ``out``; returns the relative paths written.

    Files go to a staging folder beside ``out`` first; only when all are
    written does it replace ``out`` (an existing non-empty ``out`` needs
    ``force``).  On failure the staging folder is left, named as incomplete.
    """
    def write(stage):
        # the data first: when the disk fills or a figure fails, the trajectories are kept
        # in the staging folder the error names
        trajectories = _trajectories(res, stage / "trajectories")
        files = _figures(res, stage / "figures") + trajectories
        files += ["summary.md", "summary.json", "config.json"]
        s = summary(res)
        write_json_file(stage / "config.json", res.experiment.config)
        write_json_file(stage / "summary.json", s)
        (stage / "summary.md").write_text(_markdown(res, s, files), encoding="utf-8")
        return files
    return staged(out, force, write)


def write_sweep_report(res, out, force: bool = False) -> list:
    """The learning-rate sweeps' records (CSV), optima (JSON), figure and summary: one
    table and one row of the figure per parametrization (the file's own, then
    ``sweep.compare``'s), and how far each one's optimum drifts across the widths."""
    exp = res.experiment
    sweeps = res.sweeps

    def write(stage):
        import matplotlib.pyplot as plt
        (stage / "figures").mkdir()
        lines = ["parametrization,width,lr,seed,value,diverged"] + [
            f"{sw.label},{r['width']},{r['lr']!r},{r['seed']},{r['value']!r},"
            f"{str(r['diverged']).lower()}" for sw in sweeps for r in sw.records]
        (stage / "records.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        write_json_file(stage / "sweep.json", {
            "name": exp.name, "complete": res.complete, **_sweepwrite_json_file(sweeps[0]),
            "compare": [_sweepwrite_json_file(sw) for sw in sweeps[1:]],
            "wall_time_s": res.wall_time_s})
        write_json_file(stage / "config.json", exp.config)
        fig, axes = plt.subplots(len(sweeps), 2, figsize=(11, 4.2 * len(sweeps)),
                                 squeeze=False)
        for sw, pair in zip(sweeps, axes):
            sw.plot(axes=pair)
        fig.tight_layout()
        fig.savefig(stage / "figures" / "sweep.png", dpi=110)
        plt.close(fig)
        sw = sweeps[0]
        head = [f"# {exp.name}: learning-rate sweep", ""]
        if not res.complete:
            never = [n.param.label for n in exp.compared[len(sweeps) - 1:]]
            head += ["**PARTIAL RESULT: the sweep was interrupted.** The tables hold the runs "
                     "that had finished" + (f"; not swept: {', '.join(never)}" if never else "")
                     + ".", ""]
        text = head + [
            f"φ = {exp.net.phi}, L = {exp.net.L}; metric **{sw.metric}** "
            f"({'lower' if sw.goal == 'min' else 'higher'} is better); {len(sw.lrs)} "
            f"learning rates from {min(sw.lrs):g} to {max(sw.lrs):g}.", ""]
        for one in sweeps:
            text += [f"## {one.label}", "", one.table().markdown(), ""]
        drifts = [_drift_line(one) for one in sweeps]
        if any(drifts):
            text += ["How far the optimum moves from the narrowest width to the widest "
                     "(about 1: it transfers; a conservative 95 % interval from the two "
                     "optima's):", ""] + [f"- {d}" for d in drifts if d] + [""]
        text += [
            "Optimal learning rate per width with its 95 % interval: each grid minimum is "
            "searched on the metric itself, and the interval holds the seeds' spread (the "
            "limit's replicates) and the search's own error; exact for deterministic limits "
            "(docs/theory.md §8.3; `sweep.json` has the standard errors and their degrees of "
            "freedom).", "",
            f"Wall time: {res.wall_time_s:.1f} s.", "",
            "Files: `records.csv`, `sweep.json`, `config.json`, `figures/sweep.png`.", ""]
        (stage / "summary.md").write_text("\n".join(text), encoding="utf-8")
        return ["records.csv", "sweep.json", "config.json", "figures/sweep.png", "summary.md"]
    return staged(out, force, write)


def _sweepwrite_json_file(sw) -> dict:
    drift = sw.drift()
    return {"parametrization": sw.label, "metric": sw.metric, "goal": sw.goal,
            "lrs": list(sw.lrs), "widths": list(sw.widths),
            "optimal_lr": {str(k): list(v) for k, v in sw.optimal_lr.items()},
            "optima": {str(k): dataclasses.asdict(o) for k, o in sw.optima.items()},
            "drift": None if drift is None else dict(zip(
                ("narrowest", "widest", "ratio", "low", "high"), drift)),
            "no_limit": sw.no_limit or None}


def _drift_line(sw) -> str:
    """'μP: η*(n = 1024)/η*(n = 64) = 1.02 [0.8, 1.3]', or '' without two optima."""
    d = sw.drift()
    if d is None:
        return ""
    n0, n1, ratio, low, high = d
    return (f"{sw.label}: η*(n = {n1})/η*(n = {n0}) = {ratio:.3g} "
            f"[{low:.3g}, {high:.3g}]")


def console_table(res: ExperimentResult) -> str:
    """The short table printed at the end of a run."""
    if res.study is None:
        s = summary(res)["limit"]
        return f"limit f_T = {s['f_final']} ± {s['f_final_se']}"
    c = res.study
    return (f"{c.table().text()}\n"
            f"width exponent {c.exponent:+.3f} ± {c.exponent_ci:.3f} (95 %): "
            f"{exponent_verdict(c.exponent, c.exponent_ci)}")


def _consistent(exponent: float, ci: float) -> bool | None:
    """Whether a fitted width exponent agrees with the predicted −1/2 within its 95 %
    interval ``ci``; None when the interval is wider than ±``RESOLVED_CI`` (half the
    prediction): an interval as wide as ±0.54 holds 0 and −1 too, and tests nothing."""
    if not ci <= RESOLVED_CI:
        return None
    return bool(abs(exponent + 0.5) <= ci)


def exponent_verdict(exponent: float, ci: float) -> str:
    """What a fitted width exponent says about the predicted n^(−1/2) (:func:`_consistent`),
    in words."""
    agrees = _consistent(exponent, ci)
    if agrees is None:
        return (f"too uncertain to test the predicted −1/2 (the interval is wider than "
                f"±{RESOLVED_CI}: more seeds or a wider range of widths)")
    return ("consistent with" if agrees else "differs from") + " the predicted −1/2"
