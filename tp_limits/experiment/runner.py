"""Experiment files: parse, build the shared problem description, run both engines.

The data flow is the library's own: the [parametrization] and [model]
sections make one :class:`~tp_limits.MLP`, [data] and [routine] one
:class:`~tp_limits.Routine`; that single description feeds
:func:`~tp_limits.simulate_limit` and, through
:func:`~tp_limits.convergence`, :func:`~tp_limits.train_finite` at every
width and seed.  Everything is checked — schema, arrays, stability — before
any simulation starts.
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:      # Python 3.10
    import tomli as tomllib

from ..abc.presets import from_options
from ..analysis.convergence import ConvergenceStudy, convergence
from ..analysis.lr_sweep import LRSweep, check_sweep, lr_sweep
from ..engine.options import FINITE_OPTIONS, LIMIT_OPTIONS
from ..engine.trajectory import Trajectory
from ..errors import TPError, UnsupportedError
from ..finite.train import prepare_finite
from ..limit import prepare_limit, simulate_limit
from ..spec import MLP, SGD, Problem, Routine, SpectralUpdate
from ..spec.fields import mlp_from_file, renamed
from ..spec.optimizers import OPTIMIZERS, default_optimizer, hyperparameters
from ..spec.schedules import named
from .adapt import build_adapter
from .data import load_data, load_finetune_data
from .schema import ExperimentError, validate

DEMO_FILE = "demo.toml"


@dataclass(frozen=True)
class Experiment:
    """A validated experiment: the shared problem description and engine settings."""

    name: str
    description: str
    net: MLP
    routine: Routine
    limit: dict                  # simulate_limit keyword arguments
    finite: dict                 # widths, seeds, backend, parallel; {} when disabled
    source: str                  # where the configuration came from
    config: dict = field(repr=False, default_factory=dict)   # the resolved configuration
    sweep: dict = field(default_factory=dict)   # lr_sweep settings; {} without [sweep]
    compared: tuple = ()         # the networks of sweep.compare, swept beside ``net``
    estimate: dict = field(default_factory=dict)  # seconds on two cores: limit, finite, sweep
    no_limit: str = ""           # why no engine computes the limit (a [sweep] of finite
                                 # widths alone builds anyway; run refuses)
    adapter: dict = field(default_factory=dict)   # phase two (adapt.py); {} without [adapter]


@dataclass(frozen=True)
class ExperimentResult:
    experiment: Experiment
    classification: object
    limit: Trajectory | None
    study: ConvergenceStudy | None
    wall_time_s: dict
    interrupted: str = ""       # "" when complete, else where Ctrl-C stopped it

    @property
    def complete(self) -> bool:
        return not self.interrupted


def read_toml(path) -> dict:
    """Parse a TOML file; syntax errors become an ExperimentError with the position."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ExperimentError(f"no experiment file at {path}") from None
    except IsADirectoryError:
        raise ExperimentError(f"{path} is a folder, not an experiment file") from None
    except OSError as exc:
        raise ExperimentError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ExperimentError(f"{path} is not UTF-8 text (byte {exc.start}): TOML files "
                              "must be UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{path} is not valid TOML: {exc}") from None


def demo_config() -> dict:
    """The built-in demo experiment (μP, L = 2, tanh regression) as a parsed TOML dict."""
    text = resources.files(__package__).joinpath(DEMO_FILE).read_text(encoding="utf-8")
    return tomllib.loads(text)


def _d_out(data: dict, Y: np.ndarray) -> int:
    Y = np.asarray(Y)
    if Y.ndim == 1 and np.issubdtype(Y.dtype, np.integer):      # class labels
        return data["d_out"] if data["generator"] is not None else int(Y.max(initial=0)) + 1
    return 1 if Y.ndim == 1 else Y.shape[1]


def _optimizer(kind: str, r: dict):
    """The routine's optimizer from the [routine] keys of its declared hyperparameters,
    for the parametrization's exponents; a key of another optimizer is refused.  With
    routine.spectral_transform, a SpectralUpdate (:func:`_spectral_optimizer`)."""
    if r["spectral_transform"] is not None:
        return _spectral_optimizer(kind, r)
    extra = next((k for k in SPECTRAL_KEYS.values() if r[k] is not None), None)
    if extra:
        raise ExperimentError(f"routine.{extra} needs routine.spectral_transform (\"sn\", "
                              "\"svc\" or \"msign\"): it configures a spectral update")
    default = default_optimizer(kind)
    cls = type(default)
    found = _foreign(r, {key for _, key, *_ in hyperparameters(cls)})
    if found:
        other, key = found
        raise ExperimentError(
            f"routine.{key} is a hyperparameter of {other.name}, not of {cls.name} "
            f"(parametrization.optimizer = {kind!r}): leave it out, or set "
            f"parametrization.optimizer = {other.exponents!r}")
    return dataclasses.replace(default, **_arguments(cls, r))


def _foreign(r: dict, allowed) -> tuple | None:
    """(optimizer class, key) of the first hyperparameter key of a registered optimizer that
    ``r`` gives and ``allowed`` does not hold, or None."""
    return next(((other, key) for other in OPTIMIZERS.values()
                 for _, key, *_ in hyperparameters(other)
                 if key not in allowed and r[key] is not None), None)


def _arguments(cls, r: dict, keys=None) -> dict:
    """``cls``'s declared hyperparameters that ``r`` gives (lists as tuples), by argument
    name; only those whose key is in ``keys`` when it is given."""
    return {name: (tuple(r[key]) if isinstance(r[key], list) else r[key])
            for name, key, *_ in hyperparameters(cls)
            if r[key] is not None and (keys is None or key in keys)}


#: SpectralUpdate's arguments that are not hyperparameters of a registered optimizer, by
#: their [routine] keys
SPECTRAL_KEYS = {"transform": "spectral_transform", "clip": "spectral_clip",
                 "base": "spectral_base"}


def _spectral_optimizer(kind: str, r: dict):
    """SpectralUpdate(base, transform, clip) from routine.spectral_*: the base (SGD or
    Adam) from its own keys (momentum, nesterov; adam_betas, adam_eps), ns_steps and
    weight_decay from the keys Muon shares, Adam on the vector layers under 'muon_adam'
    (docs/theory.md §11.7)."""
    if kind not in ("muon", "muon_adam"):
        raise ExperimentError(
            f"routine.spectral_transform = {r['spectral_transform']!r} follows the spectral "
            "update rule: set parametrization.optimizer = \"muon\" (or \"muon_adam\"), "
            f"not {kind!r}")
    base_cls = OPTIMIZERS[r["spectral_base"] or "sgd"]
    adam_vectors = kind == "muon_adam"
    base_keys = {key for _, key, *_ in hyperparameters(base_cls)} - {"weight_decay"}
    own_keys = {"ns_steps", "weight_decay"} | ({"adam_betas", "adam_eps"} if adam_vectors
                                               else set())
    allowed = base_keys | own_keys
    found = _foreign(r, allowed)
    if found:
        raise ExperimentError(
            f"routine.{found[1]} does not apply to a spectral update over {base_cls.name}: "
            "its keys are routine.spectral_*, "
            + ", ".join(f"routine.{k}" for k in sorted(allowed)))
    kw = _arguments(SpectralUpdate, r, own_keys)
    if adam_vectors:
        kw["vector_layers"] = "adam"
    return SpectralUpdate(base_cls(**_arguments(base_cls, r, base_keys)),
                          r["spectral_transform"], clip=r["spectral_clip"], **kw)


def _rates(r: dict, X, steps) -> float | np.ndarray:
    """routine.lr, or the rates of routine.schedule with lr as its peak (docs/theory.md
    §10.9); the schedule's keys are refused under a constant rate."""
    if r["schedule"] == "constant":
        extra = [k for k in ("warmup", "final_fraction", "decay_every", "decay_factor")
                 if r[k] is not None]
        if extra:
            raise ExperimentError(f"routine.{extra[0]} needs routine.schedule (e.g. "
                                  "schedule = \"warmup_cosine\"); the rate is constant")
        return r["lr"]
    T = steps if steps is not None else len(X) // r["batch_size"]
    try:
        return named(r["schedule"], r["lr"], T, r)
    except TPError as exc:
        raise ExperimentError(f"routine: {exc}") from None


def _option_keys(table) -> dict:
    """An engine option's Python name -> its file key ("time_budget" -> "limit.time_budget")."""
    return {o.name: o.toml for o in table if o.toml}


def _routine_keys(kind: str, r: dict) -> dict:
    """The [routine] keys that feed Routine and the optimizer of the parametrization's
    ``kind``, by the argument they become (Muon's momentum is routine.muon_momentum; a
    spectral update's base's momentum is routine.momentum)."""
    classes = [type(default_optimizer(kind))]
    if r["spectral_transform"] is not None:
        classes = [SpectralUpdate, OPTIMIZERS.get(r["spectral_base"] or "sgd", SGD)]
    keys = {"lr": "routine.lr", "batch_size": "routine.batch_size",
            **{name: f"routine.{key}" for name, key in SPECTRAL_KEYS.items()}}
    for cls in classes:
        keys.update({name: f"routine.{key}" for name, key, *_ in hyperparameters(cls)
                     if name not in keys})
    return keys


def _with_finetune(cfg: dict, routine: Routine, net: MLP, base: Path) -> Routine:
    """The routine followed by the [finetune] phase (docs/theory.md §10.10): its task, rate,
    steps and trained parameters, under the same loss, batch size and optimizer; errors
    name the finetune key."""
    ft = cfg["finetune"]
    X, Y, E, Ye, steps = load_finetune_data(cfg, base)
    keys = {"lr": "finetune.lr", "train": "finetune.train", "X": "finetune.X",
            "Y": "finetune.Y", "eval_inputs": "finetune.eval_inputs",
            "eval_targets": "finetune.eval_targets", "steps": "finetune.steps"}
    try:
        second = Routine(X, Y, lr=routine.lr if ft["lr"] is None else ft["lr"],
                         loss=routine.loss, batch_size=routine.batch_size, steps=steps,
                         eval_inputs=E, eval_targets=Ye, optimizer=routine.optimizer,
                         train=tuple(ft["train"]))
        joined = Routine.phases(routine, second, swept=2 if ft["swept"] else None)
        Problem(net, joined)
    except TPError as exc:
        message = renamed(str(exc), keys)
        if "phase 2's train" in message:
            message = "finetune.train: " + message
        raise ExperimentError(message) from None
    return joined


def build(config: dict, base=".", source: str = "<dict>") -> Experiment:
    """Validate ``config`` and build the experiment (no simulation yet).

    Stops with an :class:`ExperimentError` naming the key at fault, or with a
    message naming an unstable parametrization — before any work starts.
    """
    cfg = validate(config)
    p, m, r = cfg["parametrization"], cfg["model"], cfg["routine"]
    try:
        param = from_options(**p)
        X, Y, E, Ye, steps = load_data(cfg["data"], r, Path(base))
        net = mlp_from_file(param, np.shape(X)[1] if np.ndim(X) == 2 else 1,
                            _d_out(cfg["data"], Y), m)
        try:
            routine = Routine(X, Y, lr=_rates(r, X, steps), loss=r["loss"],
                              batch_size=r["batch_size"],
                              steps=steps, eval_inputs=E, eval_targets=Ye,
                              optimizer=_optimizer(param.optimizer, r))
        except TPError as exc:
            raise type(exc)(renamed(str(exc), _routine_keys(param.optimizer, r))) from None
        if cfg["finetune"]["train"] is not None:
            routine = _with_finetune(cfg, routine, net, Path(base))
    except ExperimentError:
        raise
    except TPError as exc:
        raise ExperimentError(f"{source}: {exc}") from None
    k = param.classify()
    sw = cfg["sweep"]
    if not k.stable and sw["lrs"] is None:
        raise ExperimentError(
            f"{source}: parametrization {param.label} (L = {param.L}) is unstable — it has no "
            "infinite-width limit:\n  " + "\n  ".join(k.violations) + "\n  (a [sweep] "
            "section sweeps its finite widths alone: tp-limits sweep)")
    # every [limit] key is a simulate_limit option of the same name (schema.table_keys)
    limit = dict(cfg["limit"])
    fin = cfg["finite"]
    finite = {} if not fin["enabled"] else {
        "widths": tuple(sorted(set(fin["widths"]))), "seeds": fin["seeds"],
        "backend": fin["backend"], "parallel": fin["parallel"], "spectral": fin["spectral"],
        "time_budget": fin["time_budget"]}
    estimate, no_limit = {}, ""
    try:                  # the engines' own checks: what --check accepts, a run accepts
        if k.stable:      # an unstable one is swept at its finite widths alone
            plan = prepare_limit(net, routine, **limit)
            estimate["limit"] = plan.engine.info.get("time_estimate_s", 0.0)
    except UnsupportedError as exc:
        # no engine computes this limit (an orthogonal hidden initialization, a spectral
        # update of Adam's direction): a sweep of the finite widths alone still runs
        if sw["lrs"] is None or sw["limit"]:
            raise ExperimentError(
                f"{source}: {exc}\n  (a [sweep] section with limit = false sweeps its finite "
                "widths alone: tp-limits sweep)") from None
        no_limit = str(exc)
    except TPError as exc:
        raise ExperimentError(f"{source}: {renamed(str(exc), _option_keys(LIMIT_OPTIONS))}") \
            from None
    try:
        if finite:        # every width is checked and priced; the widest is the dearest
            estimate["finite"] = finite["seeds"] * sum(
                prepare_finite(net, routine, w, backend=finite["backend"],
                               record=_record(finite), time_budget=finite["time_budget"]
                               ).time_estimate for w in finite["widths"])
    except TPError as exc:
        raise ExperimentError(f"{source}: {renamed(str(exc), _option_keys(FINITE_OPTIONS))}") \
            from None
    sweep, compared = {}, ()
    if sw["lrs"] is not None:
        sweep = {"lrs": tuple(float(x) for x in sw["lrs"]),
                 "widths": tuple(sw["widths"] or fin["widths"]), "seeds": sw["seeds"],
                 "metric": sw["metric"], "limit": sw["limit"], "refine": sw["refine"],
                 "particles": limit["particles"], "replicates": limit["replicates"]}
        compared = _compared(net, p, sw["compare"], source)
        estimate["sweep"] = 0.0
        for one in (net, *compared):
            try:
                estimate["sweep"] += check_sweep(one, routine, **sweep)[-1]
            except TPError as exc:
                where = "" if one is net else f" ({one.param.label}, sweep.compare)"
                raise ExperimentError(f"{source}: [sweep]{where}: {exc}") from None
    adapter = (build_adapter(cfg["adapter"], net, routine, source) if "adapter" in config
               else {})
    ex = cfg["experiment"]
    return Experiment(ex["name"], ex["description"], net, routine, limit, finite, source, cfg,
                      sweep, compared, estimate, no_limit, adapter)


def _compared(net: MLP, p: dict, presets, source: str) -> tuple:
    """The networks of ``sweep.compare``: ``net`` under each named preset, with the file's
    L, form and optimizer (the preset's own learning-rate exponents)."""
    out = []
    for name in presets:
        try:
            param = from_options(name, net.L, None, None, None, p["form"], p["optimizer"])
        except TPError as exc:
            raise ExperimentError(f"{source}: sweep.compare {name!r}: {exc}") from None
        if param.label == net.param.label or any(param.label == o.param.label for o in out):
            raise ExperimentError(f"sweep.compare holds {name!r} twice, or the file's own "
                                  f"parametrization ({param.label}): name each once")
        out.append(dataclasses.replace(net, param=param))
    return tuple(out)


def _record(finite: dict) -> tuple:
    return ("stats", "spectral") if finite["spectral"] else ("stats",)


def load(path) -> Experiment:
    """Read, validate and build the experiment file at ``path``."""
    path = Path(path)
    return build(read_toml(path), base=path.parent, source=str(path))


def require_limit(exp: Experiment):
    """The classification of ``exp``'s parametrization, which must have a limit to run
    (an unstable one builds for its [sweep] alone)."""
    k = exp.net.param.classify()
    if exp.no_limit:
        raise ExperimentError(f"{exp.source}: {exp.no_limit}\n  `tp-limits sweep` sweeps its "
                              "finite widths (tp-limits sweep --check validates its [sweep])")
    if not k.stable:
        raise ExperimentError(f"{exp.source}: {exp.net.param.label} is unstable and has no "
                              "limit to run; `tp-limits sweep` sweeps its finite widths "
                              "(tp-limits sweep --check validates its [sweep])")
    return k


def run(exp: Experiment, progress: bool = True, executor=None) -> ExperimentResult:
    """Simulate the limit and train the finite networks of ``exp``.

    ``executor``: None (process pool when ``finite.parallel``), 'serial', or a
    concurrent.futures.Executor.  Ctrl-C ends the run within seconds and the
    result holds what finished (``res.interrupted`` says where it stopped).
    """
    k = require_limit(exp)
    times = {}
    study = None
    started = time.perf_counter()
    limit = simulate_limit(exp.net, exp.routine, progress=progress, **exp.limit)
    times["limit"] = time.perf_counter() - started
    if limit.interrupted:
        return ExperimentResult(exp, k, limit, None, times,
                                f"during the limit, after {limit.steps} of "
                                f"{exp.routine.steps} steps")
    interrupted = ""
    if exp.finite:
        if executor is None and not exp.finite["parallel"]:
            executor = "serial"
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="convergence interrupted")
                study = convergence(exp.net, exp.routine, exp.finite["widths"],
                                    seeds=exp.finite["seeds"], limit=limit, executor=executor,
                                    progress=progress, keep_runs=True,
                                    backend=exp.finite["backend"], record=_record(exp.finite),
                                    time_budget=exp.finite["time_budget"])
        except KeyboardInterrupt:
            interrupted = "during the finite networks, before any had finished"
        else:
            if study.interrupted:
                interrupted = (f"during the finite networks, after {int(study.finished.sum())} "
                               f"of {study.finished.size} had finished")
        times["finite"] = time.perf_counter() - started
    return ExperimentResult(exp, k, limit, study, times, interrupted)


@dataclass(frozen=True)
class SweepResult:
    """The sweeps of an experiment's [sweep]: its own parametrization's first, then those
    of ``sweep.compare`` in order (fewer when Ctrl-C stopped it)."""

    experiment: Experiment
    sweeps: tuple
    wall_time_s: float

    @property
    def sweep(self) -> LRSweep:
        """The sweep of the file's own parametrization."""
        return self.sweeps[0]

    @property
    def complete(self) -> bool:
        return (len(self.sweeps) == 1 + len(self.experiment.compared)
                and not any(s.interrupted for s in self.sweeps))


def run_sweep(exp: Experiment, progress: bool = True, executor=None) -> SweepResult:
    """The learning-rate sweep of ``exp``'s [sweep] section (:func:`tp_limits.lr_sweep`),
    for its parametrization and then each of ``sweep.compare``; Ctrl-C keeps the sweeps
    that finished and the part of the one it stopped."""
    if not exp.sweep:
        raise ExperimentError(f"{exp.source} has no [sweep] section with lrs = [...]")
    s = exp.sweep
    if executor is None and exp.finite and not exp.finite["parallel"]:
        executor = "serial"
    started, sweeps = time.perf_counter(), []
    for net in (exp.net, *exp.compared):
        if progress and exp.compared:
            print(f"sweeping {net.param.label}", flush=True)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="lr_sweep interrupted")
                sweeps.append(lr_sweep(net, exp.routine, s["lrs"], widths=s["widths"],
                                       seeds=s["seeds"], limit=s["limit"],
                                       metric=s["metric"], particles=s["particles"],
                                       replicates=s["replicates"], refine=s["refine"],
                                       executor=executor, progress=progress))
        except KeyboardInterrupt:      # between two sweeps: the finished ones are kept
            break
        if sweeps[-1].interrupted:
            break
    return SweepResult(exp, tuple(sweeps), time.perf_counter() - started)
