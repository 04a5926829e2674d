"""The experiment-file schema (TOML) and its validation.

An experiment file has the sections below; every key is optional unless
marked required.  :func:`validate` checks a parsed file against the schema
and names the offending key in every error: unknown sections and keys
(with the closest valid spelling), wrong types, and values out of range.
The schema is data, so ``docs/cli.md`` and ``tp-limits run --schema`` print
the same table that the validator enforces.
"""
from __future__ import annotations

import difflib
import numbers
from dataclasses import dataclass

import numpy as np

from ..abc.presets import PRESETS
from ..abc.update_rules import UPDATE_RULES
from ..engine.options import FINITE_OPTIONS, LIMIT_OPTIONS
from ..errors import TPError
from ..losses import LOSSES
from ..spec.optimizers import OPTIMIZERS, hyperparameters
from ..spec.fields import FILE_KEYS
from ..spec.schedules import NAMED


class ExperimentError(TPError, ValueError):
    """An experiment file is malformed: the message names the section and key."""


@dataclass(frozen=True)
class Key:
    """One key of the schema: its type name, default and meaning."""

    kind: str           # see _CHECKS
    default: object
    doc: str
    required: bool = False
    choices: tuple = ()  # the allowed values of a string key (empty: any)


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_exponent(v) -> bool:
    return _is_number(v) or isinstance(v, str)


def _is_matrix(v) -> bool:
    return isinstance(v, list) and bool(v) and all(
        isinstance(r, list) and r and all(_is_number(x) for x in r) for r in v)


def _is_vector(v) -> bool:
    return isinstance(v, list) and bool(v) and all(_is_number(x) for x in v)


# kind -> (predicate, what the user is told a value must be)
_CHECKS = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "int": (_is_int, "an integer"),
    "int|str": (lambda v: _is_int(v) or isinstance(v, str), "an integer or a string"),
    "number": (_is_number, "a number"),
    "ints": (lambda v: isinstance(v, list) and bool(v) and all(_is_int(x) for x in v),
             "a non-empty list of integers"),
    "strs": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
             "a list of strings"),
    "numbers": (_is_vector, "a non-empty list of numbers"),
    "number|numbers": (lambda v: _is_number(v) or _is_vector(v),
                       "a number or a list of numbers (one per layer)"),
    "exponents": (lambda v: isinstance(v, list) and bool(v) and all(_is_exponent(x) for x in v),
                  'a list of exponents (numbers or strings like "-1/2", "oo")'),
    "exponent|exponents": (lambda v: _is_exponent(v) or (isinstance(v, list) and bool(v) and
                                                        all(_is_exponent(x) for x in v)),
                           "an exponent or a list of exponents (one per layer)"),
    "array": (lambda v: isinstance(v, str) or _is_matrix(v) or _is_vector(v),
              "an inline array (list of rows) or the path of a .npy file"),
}

def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return f"{value:_}" if _is_int(value) else str(value)


def table_keys(table, section: str) -> dict:
    """The keys of ``section`` declared in an engine's option table (engine/options.py):
    the same default, check vocabulary and doc as the keyword option."""
    def plain(v):
        return v.name if isinstance(v, np.dtype) else v
    return {o.toml.split(".", 1)[1]: Key(o.kind, plain(o.default), o.doc, choices=o.choices)
            for o in table if o.toml and o.toml.split(".", 1)[0] == section}


def optimizer_keys() -> dict:
    """The [routine] keys of every optimizer's declared hyperparameters (spec/optimizers/):
    default — (the optimizer's own default, given in the meaning), one key for a
    hyperparameter several optimizers share (weight decay)."""
    keys, owners = {}, {}
    for cls in OPTIMIZERS.values():
        for _, key, kind, default, doc in hyperparameters(cls):
            owners.setdefault(key, []).append(cls.name)
            keys.setdefault(key, (kind, doc, default))
    return {key: Key(kind, None, f"{doc} ({', '.join(owners[key])}; default {_toml(default)})")
            for key, (kind, doc, default) in keys.items()}


SCHEMA: dict = {
    "experiment": {
        "name": Key("str", "experiment", "a label used in titles and the summary"),
        "description": Key("str", "", "free text copied into the summary"),
    },
    "parametrization": {
        "preset": Key("str", None, "sp, ntp, mfp or mup (or give a, b, c instead)",
                      choices=tuple(sorted(PRESETS))),
        "L": Key("int", None, "number of hidden layers (required with a preset)"),
        "a": Key("exponents", None, "a_1..a_{L+1} (custom parametrization)"),
        "b": Key("exponents", None, "b_1..b_{L+1}; 'oo' allowed last (zero readout)"),
        "c": Key("exponent|exponents", None,
                 "learning-rate exponent, one value or one per layer (sp/ntp: default 0)"),
        "form": Key("str", "tp4", "mup only: 'tp4' or 'a0'", choices=("tp4", "a0")),
        "optimizer": Key("str", "sgd",
                         " or ".join(map(repr, UPDATE_RULES)) + ": sets the exponents "
                         "(hyperparameters: [routine])", choices=tuple(UPDATE_RULES)),
        "name": Key("str", "", "label of a custom parametrization"),
    },
    "model": {k.key: Key(k.kind, k.default, k.doc, choices=k.choices) for k in FILE_KEYS},
    "data": {
        "generator": Key("str", None,
                         "built-in data: 'teacher' (regression on the unit sphere; "
                         "noise-free held-out targets), 'blobs' (classes for xent; the "
                         "centres held out), 'd1' (data D1 of docs/theory.md §9) or "
                         "'digits' (scikit-learn's 8x8 digits, d_out classes, test-split "
                         "targets; the extra 'data')",
                         choices=("teacher", "blobs", "d1", "digits")),
        "X": Key("array", None, "training inputs, rows in training order"),
        "Y": Key("array", None, "training targets (rows), or integer labels for xent"),
        "eval_inputs": Key("array", None, "evaluation inputs (default: distinct training inputs)"),
        "eval_targets": Key("array", None, "targets of the evaluation inputs (held-out loss "
                                           "and accuracy)"),
        "file": Key("str", None, ".npz file with arrays X, Y and optionally eval_inputs"),
        "d_in": Key("int", 2, "generators: input dimension"),
        "d_out": Key("int", 1, "generators: outputs (teacher) or classes (blobs)"),
        "n_eval": Key("int", 4, "generators: number of evaluation inputs"),
        "noise": Key("number", 0.0, "generators: label noise (teacher) or blob spread"),
        "seed": Key("int", 0, "generators: random seed of the data"),
    },
    "routine": {
        "lr": Key("number", None, "base learning rate η (the peak of a schedule)",
                  required=True),
        "schedule": Key("str", "constant", "learning-rate schedule (docs/theory.md §10.9): "
                        + ", ".join(("constant", *NAMED)), choices=("constant", *NAMED)),
        "warmup": Key("int", None, "schedule: steps of linear warm-up to the peak"),
        "final_fraction": Key("number", None, "warmup_cosine: the rate at the end, as a "
                                              "fraction of the peak (default 0)"),
        "decay_every": Key("int", None, "step_decay: steps between decays"),
        "decay_factor": Key("number", None, "step_decay: factor of each decay (default 0.1)"),
        "loss": Key("str", "mse", "'mse', 'xent' or 'sgns'", choices=tuple(sorted(LOSSES))),
        "batch_size": Key("int", 1, "examples per SGD step"),
        "steps": Key("int", None, "SGD steps (generators: default 16; arrays: len(X) / batch)"),
        **optimizer_keys(),
        "spectral_transform": Key("str", None, "with parametrization.optimizer = \"muon\" or "
                                  "\"muon_adam\": a spectral update (docs/theory.md §11.7) — "
                                  "'sn', 'svc' or 'msign' of the base's direction (absent: "
                                  "Muon)", choices=("msign", "sn", "svc")),
        "spectral_clip": Key("number", None, "spectral_transform = 'svc': the threshold λ >= 1 "
                                             "(singular values above σ_max/λ set to one)"),
        "spectral_base": Key("str", None, "the spectral update's base: 'sgd' (its keys "
                                          "momentum, nesterov; default) or 'adam' (adam_betas, "
                                          "adam_eps; a limit with one hidden layer only)",
                             choices=("sgd", "adam")),
    },
    "limit": table_keys(LIMIT_OPTIONS, "limit"),
    "sweep": {
        "lrs": Key("numbers", None, "learning rates to sweep (tp-limits sweep; at least three)"),
        "widths": Key("ints", None, "finite widths of the sweep (default: finite.widths)"),
        "seeds": Key("int", 4, "seeds per (width, learning rate)"),
        "metric": Key("str", "final_loss", "what is optimized: final_loss, eval_loss or "
                                           "eval_accuracy", choices=("final_loss", "eval_loss",
                                                                     "eval_accuracy")),
        "limit": Key("bool", True, "also sweep the infinite-width limit"),
        "refine": Key("int", 12, "learning rates searched beyond the grid per local minimum "
                                 "(0: the grid alone)"),
        "compare": Key("strs", [], "presets swept beside the file's parametrization, with its "
                                   "L, form and optimizer (e.g. [\"sp\"]: does SP's optimum "
                                   "drift where μP's transfers?); one without a limit sweeps "
                                   "its finite widths only", choices=tuple(sorted(PRESETS))),
    },
    "finetune": {
        "train": Key("strs", None, "a second phase after [routine] (docs/theory.md §10.10): "
                                   "the parameters it trains, e.g. [\"W2\", \"W3\"] "
                                   "(W1 … W{L+1}, b1 …); the others stay frozen"),
        "lr": Key("number", None, "the second phase's learning rate (default: routine.lr)"),
        "steps": Key("int", None, "the second phase's steps (default: as routine.steps)"),
        "data_seed": Key("int", None, "generators: the seed of the second task's data "
                                      "(default: data.seed + 1, a new task of the same kind)"),
        "X": Key("array", None, "inline or file data: the second task's training inputs"),
        "Y": Key("array", None, "... its training targets"),
        "eval_inputs": Key("array", None, "... its evaluation inputs (the run evaluates "
                                          "on the second task's)"),
        "eval_targets": Key("array", None, "... their targets"),
        "swept": Key("bool", False, "a [sweep] varies the fine-tuning rate alone, the "
                                    "pretraining's held (false: both phases' rates together)"),
    },
    "adapter": {
        "layer": Key("str", "hidden", "where the adapter goes: 'hidden' (W^L), 'readout' "
                                      "(W^{L+1}), 'input' (W^1) or any 'W<l>' of the "
                                      "pretrained network (tp-limits adapt; "
                                      "docs/theory.md §16.6)"),
        "rank": Key("int", 4, "the adapter's rank r"),
        "alpha": Key("number", None, "the multiplier α of (α/r) B A (default: r)"),
        "init": Key("str", "zero_B", "which factor starts at zero: 'zero_B', 'zero_A', or "
                                     "'gaussian' (neither)",
                    choices=("zero_B", "zero_A", "gaussian")),
        "optimizer": Key("str", "adam", "the fine-tuning optimizer", choices=("adam", "sgd")),
        "eta_A": Key("number", None, "A's width-free rate η̄_A (required in [adapter]; at "
                                     "width n: η̄_A n^(−c_A))"),
        "eta_B": Key("number", None, "B's width-free rate η̄_B (required in [adapter]; at "
                                     "width n: η̄_B n^(−c_B))"),
        "steps": Key("int", 100, "full-batch fine-tuning steps"),
        "sigma_A": Key("number", 1.0, "A₀'s entries N(0, σ_A²/n)"),
        "sigma_B": Key("number", 1.0, "B₀'s entries N(0, σ_B²) (init 'zero_A', 'gaussian')"),
        "betas": Key("numbers", [0.9, 0.999], "Adam's (β₁, β₂)"),
        "eps": Key("number", 1e-8, "Adam's ε, width-free"),
        "n_train": Key("int", 64, "fine-tuning task y = sin(mean ξ): training inputs"),
        "n_test": Key("int", 64, "... and test inputs"),
        "task_seed": Key("int", 0, "... their random seed"),
        "particles": Key("int", 16384, "the limit's particles per replicate (each pretrains "
                                       "its own)"),
        "replicates": Key("int", 8, "the limit's replicates (at least two: the standard "
                                    "error's degrees of freedom are replicates − 1)"),
    },
    "finite": {
        "enabled": Key("bool", True, "train finite networks"),
        "widths": Key("ints", [256, 512, 1024, 2048, 4096], "widths n (at least two)"),
        "seeds": Key("int", 8, "seeds per width (at least two)"),
        **table_keys(FINITE_OPTIONS, "finite"),
        "parallel": Key("bool", True, "train in a process pool (one worker per core)"),
        "spectral": Key("bool", False, "also record spectral-norm ratios (slower)"),
    },
}

REQUIRED_SECTIONS = ("parametrization", "data", "routine")


def _suggest(word: str, options) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def validate(config: dict) -> dict:
    """Check ``config`` against :data:`SCHEMA`; return it with every default filled in.

    Raises :class:`ExperimentError` naming the section or key at fault.
    """
    if not isinstance(config, dict):
        raise ExperimentError("an experiment file must be a TOML table of sections")
    for section in config:
        if section not in SCHEMA:
            raise ExperimentError(f"unknown section [{section}]{_suggest(section, SCHEMA)}; "
                                  f"valid sections: {', '.join(SCHEMA)}")
    for section in REQUIRED_SECTIONS:
        if section not in config:
            raise ExperimentError(f"missing section [{section}]")
    out = {}
    for section, keys in SCHEMA.items():
        given = config.get(section, {})
        if not isinstance(given, dict):
            raise ExperimentError(f"[{section}] must be a table of keys, got {given!r}")
        for key in given:
            if key not in keys:
                raise ExperimentError(f"unknown key {section}.{key}{_suggest(key, keys)}; "
                                      f"valid keys of [{section}]: {', '.join(keys)}")
        resolved = {}
        for key, spec in keys.items():
            if key not in given:
                if spec.required:
                    raise ExperimentError(f"missing required key {section}.{key} ({spec.doc})")
                resolved[key] = spec.default
                continue
            ok, what = _CHECKS[spec.kind]
            if not ok(given[key]):
                raise ExperimentError(f"{section}.{key} must be {what}, got {given[key]!r}")
            # a list key with choices checks each of its items
            for value in given[key] if isinstance(given[key], list) else [given[key]]:
                if spec.choices and value not in spec.choices:
                    raise ExperimentError(
                        f"{section}.{key} {'holds' if isinstance(given[key], list) else '='} "
                        f"{value!r}{_suggest(value, spec.choices)}; "
                        f"choose one of {', '.join(spec.choices)}")
            resolved[key] = given[key]
        out[section] = resolved
    _check_combinations(out)
    return out


def _check_combinations(cfg: dict) -> None:
    """Rules that involve more than one key."""
    p = cfg["parametrization"]
    if p["preset"] is not None:
        if p["a"] is not None or p["b"] is not None:
            raise ExperimentError("parametrization: give either preset (with L) or a and b, "
                                  "not both")
        if p["L"] is None:
            raise ExperimentError("parametrization.L is required with a preset")
    elif p["a"] is None or p["b"] is None:
        raise ExperimentError("parametrization: give a preset (sp, ntp, mfp, mup) with L, "
                              "or both a and b")
    d = cfg["data"]
    sources = [k for k in ("generator", "file", "X") if d[k] is not None]
    if len(sources) != 1:
        raise ExperimentError("data: give exactly one of generator, file, or X (with Y); "
                              f"got {sources or 'none'}")
    if d["X"] is not None and d["Y"] is None:
        raise ExperimentError("data.Y is required with data.X")
    given = ", ".join(f"data.{k}" for k in ("d_in", "d_out", "n_eval", "noise", "seed")
                      if d[k] != SCHEMA["data"][k].default)
    if d["generator"] is None and given:
        raise ExperimentError(f"{given}: data.d_in, d_out, n_eval, noise and seed apply to a "
                              "generator only")
    if d["generator"] == "d1" and given:
        raise ExperimentError(f"{given}: data 'd1' is fixed (d_in = 2, d_out = 1, three "
                              "evaluation inputs, no noise): leave out d_in, d_out, n_eval, "
                              "noise and seed")
    if d["generator"] == "digits" and (d["d_in"] != SCHEMA["data"]["d_in"].default or d["noise"]):
        raise ExperimentError("data 'digits' has d_in = 64 and no noise: leave out d_in and "
                              "noise (d_out is the number of classes, 2..10)")
    if d["eval_targets"] is not None and d["X"] is None:
        raise ExperimentError("data.eval_targets go with inline data (X, Y, eval_inputs)")
    for key in ("d_in", "d_out", "n_eval"):
        if d[key] < 1:
            raise ExperimentError(f"data.{key} must be >= 1, got {d[key]}")
    if d["noise"] < 0:
        raise ExperimentError(f"data.noise must be >= 0, got {d['noise']}")
    if cfg["sweep"]["compare"] and cfg["sweep"]["lrs"] is None:
        raise ExperimentError("sweep.compare needs sweep.lrs (the learning rates to sweep)")
    ft = cfg["finetune"]
    # every value given is checked by its key first, then what is missing
    if ft["lr"] is not None and not (np.isfinite(ft["lr"]) and ft["lr"] > 0):
        raise ExperimentError(f"finetune.lr = {ft['lr']!r} must be a positive number")
    if ft["steps"] is not None and ft["steps"] < 1:
        raise ExperimentError(f"finetune.steps must be >= 1, got {ft['steps']}")
    if ft["data_seed"] is not None and ft["data_seed"] < 0:
        raise ExperimentError(f"finetune.data_seed must be >= 0, got {ft['data_seed']}")
    if ft["train"] is None and any(v not in (None, False) for v in ft.values()):
        raise ExperimentError("finetune.train is required in [finetune]: the parameters the "
                              "second phase trains, e.g. train = [\"W2\", \"W3\"]")
    if ft["train"] is not None:
        inline = ft["X"] is not None
        if d["generator"] is None and not inline:
            raise ExperimentError("finetune.X and finetune.Y are required with inline or file "
                                  "data (a generator draws the second task from data_seed)")
        if d["generator"] is not None and inline:
            raise ExperimentError("finetune.X: with data.generator the second task is drawn "
                                  "by the generator from finetune.data_seed; leave out X, Y, "
                                  "eval_inputs and eval_targets")
        if ft["data_seed"] is not None and d["generator"] in (None, "d1"):
            raise ExperimentError("finetune.data_seed applies to a data.generator that draws "
                                  "with a seed (teacher, blobs, digits)")
        if inline and ft["Y"] is None:
            raise ExperimentError("finetune.Y is required with finetune.X")
    r = cfg["routine"]
    if r["steps"] is not None and r["steps"] < 1:
        raise ExperimentError(f"routine.steps must be >= 1, got {r['steps']}")
    f = cfg["finite"]
    if f["enabled"]:
        if len(set(f["widths"])) < 2 or min(f["widths"]) < 1:
            raise ExperimentError(f"finite.widths must hold at least two distinct positive "
                                  f"widths, got {f['widths']}")
        if f["seeds"] < 2:
            raise ExperimentError("finite.seeds must be >= 2 (the error bars need two)")


def schema_markdown() -> str:
    """The schema as a Markdown table (docs/cli.md and ``tp-limits run --schema``)."""
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for section, keys in SCHEMA.items():
        for key, spec in keys.items():
            default = "required" if spec.required else (
                "—" if spec.default is None else f"`{_toml(spec.default)}`")
            kind = spec.kind.replace("|", " or ")          # a bare | would split the cell
            lines.append(f"| `{section}.{key}` | {kind} | {default} | {spec.doc} |")
    return "\n".join(lines)
