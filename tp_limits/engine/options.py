"""The options of the engines: one declaration each, and the checks they share.

:data:`LIMIT_OPTIONS` (``simulate_limit``) and :data:`FINITE_OPTIONS`
(``train_finite``) declare every option once — name, default, check, one-line
doc, and its experiment-file key where it has one.  From these tables come the
engines' checked option records (:func:`option_record`), the keyword options
the studies pass on (``lr_sweep``, ``convergence``, ``coord_check``), the
experiment-file schema and ``--check`` (experiment/schema.py), and the option
tables of docs/api.md and docs/cli.md (tested equal to :func:`options_markdown`
and the schema's table).  The checks below are shared by every public entry
point, so a value is accepted or refused the same way wherever it is given.
"""
from __future__ import annotations

import dataclasses
import numbers
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import SpecError
from ..spec.checks import (check_bool, check_choice, check_int, check_sequence,
                           check_width, finite_positive)

DTYPES = ("float64", "float32")
ON_DIVERGENCE = ("raise", "stop")
#: The largest seed numpy's SeedSequence takes comfortably as a Python int.
MAX_SEED = 2 ** 63 - 1
#: array backends (engine/backend.py)
BACKENDS = ("numpy", "cupy")
#: limit methods; one-hidden-layer sweeps (None: 'numba' on the host, 'cuda' on a GPU)
METHODS = ("exact", "monte_carlo", "quadrature")
KERNELS = ("numba", "numpy", "cuda")
BACKPROP = ("exact", "decoupled")
ZDOT = ("stein", "tangent")
F0 = ("sample", "zero")
#: where a Monte Carlo run's random numbers come from, and how its Gaussians are drawn
#: (limit/sampling.py; docs/theory.md §2.2, §4.7, §4.8)
SOURCES = ("backend", "host")
SAMPLERS = ("antithetic", "mc", "qmc")
#: Counts beyond this cannot finish on any machine this library targets (particle
#: counts are bounded by the memory guard instead, which names the largest that fits).
MAX_REPLICATES = 10 ** 5


def check_dtype(dtype) -> np.dtype:
    """numpy.float64 (the default) or numpy.float32, given as a dtype, type or name."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.name not in DTYPES or isinstance(dtype, bool):
        raise SpecError(f"dtype = {dtype!r}; use numpy.float64 (default) or numpy.float32")
    return dt


def check_record(record, allowed: tuple) -> tuple:
    """A tuple of record options, each one of ``allowed``."""
    if record is None or isinstance(record, str):
        raise SpecError(f"record = {record!r} must be a tuple of options from {allowed} "
                        f"(e.g. record={allowed[:1]!r}, or record=() for none)")
    try:
        rec = tuple(record)
    except TypeError:
        raise SpecError(f"record = {record!r} must be a tuple of options from {allowed}") from None
    unknown = [r for r in rec if not isinstance(r, str) or r not in allowed]
    if unknown:
        raise SpecError(f"unknown record option(s) {unknown}; choose from {allowed}")
    return rec


def check_progress(value) -> bool:
    return check_bool(value, "progress")


def check_divergence_bound(bound):
    """A positive number (magnitudes beyond it count as divergence), or None (only inf/NaN)."""
    if bound is None:
        return None
    return finite_positive(bound, "divergence_bound")


def check_time_budget(budget):
    """Seconds a run or a study may be estimated to take (None: no limit)."""
    if budget is None:
        return None
    return finite_positive(budget, "time_budget")


def check_seed(seed, name: str = "seed") -> int:
    return check_int(seed, name, minimum=0, maximum=MAX_SEED)


def check_seeds(seeds, name: str = "seeds", minimum: int = 1) -> tuple:
    """A seed count k (seeds 0..k-1) or an explicit list of distinct seeds."""
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        return tuple(range(check_int(seeds, name, minimum)))
    out = tuple(check_seed(s, f"{name}[{i}]") for i, s in
                enumerate(check_sequence(seeds, name, "a count or a list of seeds")))
    if len(out) < minimum or len(set(out)) != len(out):
        raise SpecError(f"{name} = {seeds!r}: give at least {minimum} distinct seed(s)")
    return out


def _dask_client(obj) -> bool:
    """A Dask ``distributed.Client``, recognized without importing Dask."""
    return type(obj).__name__ == "Client" and hasattr(obj, "get_executor") and \
        type(obj).__module__.startswith("distributed")


def check_executor(executor):
    """None (a local process pool), 'serial', an open concurrent.futures.Executor, or an
    open Dask ``distributed.Client`` (returned as its Executor)."""
    if executor is None or (isinstance(executor, str) and executor == "serial"):
        return executor
    if _dask_client(executor):
        if getattr(executor, "status", "running") in ("closed", "closing"):
            raise SpecError(f"the Dask client {executor!r} is closed; pass an open one")
        return executor.get_executor()
    if not isinstance(executor, Executor):
        raise SpecError(f"executor must be None, 'serial', a concurrent.futures.Executor or a "
                        f"Dask distributed.Client, got {executor!r}")
    if getattr(executor, "_shutdown", False) or getattr(executor, "_shutdown_thread", False):
        raise SpecError(f"executor {executor!r} has been shut down; pass an open one")
    return executor


def check_widths(widths, who: str) -> tuple:
    """At least two distinct positive int widths, sorted."""
    widths = check_sequence(widths, "widths", f"a list of at least two widths for {who}")
    out = tuple(sorted(check_width(w) for w in widths))
    if len(out) < 2 or len(set(out)) != len(out):
        raise SpecError(f"{who} needs at least two distinct widths, got {out}")
    return out


def check_steps(steps, T: int, first: int = 1) -> tuple:
    """The steps t compared: a list of ints in first..T (default first..T, at least 1)."""
    if steps is None:
        return tuple(range(max(first, 1), T + 1))
    if isinstance(steps, (str, bytes)) or not hasattr(steps, "__iter__"):
        raise SpecError(f"steps = {steps!r} must be a list of steps, e.g. steps=[{T}]")
    out = tuple(check_int(t, "step", first) for t in steps)
    if not out or any(t > T for t in out):
        raise SpecError(f"steps must be a non-empty list of steps in {first}..{T}, got {steps!r}")
    return out


# ---- the option tables ---------------------------------------------------------------
@dataclass(frozen=True)
class Option:
    """One option of an engine's entry point.

    ``check(value)`` returns the cleaned value or raises SpecError naming the option;
    ``toml`` is its key in an experiment file ("section.key"), or None; ``kind`` that
    key's TOML type (experiment/schema.py); ``knob``: a rarely used engine knob, given
    through :class:`~tp_limits.Knobs` (or as a keyword) rather than a named parameter.
    """

    name: str
    default: object
    check: Callable
    doc: str
    toml: str | None = None
    kind: str | None = None
    knob: bool = False
    choices: tuple = ()


def _choice(name, choices, optional=False):
    def check(v):
        return None if (optional and v is None) else check_choice(v, name, choices)
    return check


def _count(name, minimum, maximum=None, optional=False):
    def check(v):
        return None if (optional and v is None) else check_int(v, name, minimum, maximum)
    return check


def _backend(v):
    if isinstance(v, str) and v in BACKENDS:
        return v
    raise SpecError(f"unknown backend {v!r}; choose one of {BACKENDS}")


def _f0(v):
    """'sample', 'zero', or an array of f_0 values (checked against the problem later)."""
    return check_choice(v, "f0", F0) if isinstance(v, str) else v


def _choice_option(name, default, choices, doc, toml=None, knob=False, optional=False):
    return Option(name, default, _choice(name, choices, optional), doc, toml, "str", knob,
                  choices)


#: the options of simulate_limit, in the order of its signature (knobs last)
LIMIT_OPTIONS = (
    Option("particles", 100_000, _count("particles", 2),
           "Monte Carlo particles per replicate (rounded as the sampler needs), or the node "
           "budget of quadrature", "limit.particles", "int"),
    Option("seed", 0, check_seed, "seed of the first replicate", "limit.seed", "int"),
    Option("replicates", 8, _count("replicates", 1, MAX_REPLICATES),
           "independent Monte Carlo runs; their spread is the error bar, with replicates − 1 "
           "degrees of freedom", "limit.replicates", "int"),
    _choice_option("method", None, METHODS,
                   "'exact' (φ = id, its default), 'monte_carlo' (default otherwise) or "
                   "'quadrature' (d + d_out <= 3)", "limit.method", optional=True),
    Option("progress", False, check_progress, "a progress bar"),
    Option("dtype", np.dtype(np.float64), check_dtype,
           "storage precision of particles or hat histories: float64 or float32",
           "limit.dtype", "str", choices=DTYPES),
    Option("record", ("stats",), lambda v: check_record(v, ("stats",)),
           "('stats',): per-layer statistics (keeps the initial particles), or ()"),
    Option("backend", "numpy", _backend,
           "'numpy', or 'cupy' for the Monte Carlo engines on a GPU", "limit.backend", "str",
           choices=BACKENDS),
    _choice_option("on_divergence", "raise", ON_DIVERGENCE,
                   "'raise' a DivergenceError, or 'stop' and return the steps before it"),
    Option("eval_every", 1, _count("eval_every", 1),
           "evaluate f̊ every k-th step (and at 0 and T); rows in between are NaN",
           knob=True),
    _choice_option("kernel", None, KERNELS,
                   "one hidden layer: the sweep — 'numba' (host default), 'numpy' (the array "
                   "twin) or 'cuda' (GPU default)", knob=True, optional=True),
    Option("f0", "sample", _f0,
           "kernel and trivial regimes: the initial function — 'sample' (NNGP draws), "
           "'zero', or an array on tp.kernel_points(routine)", knob=True),
    Option("samples", 64, _count("samples", 1, MAX_REPLICATES),
           "kernel regime with f0='sample': NNGP draws", knob=True),
    _choice_option("backprop", "exact", BACKPROP,
                   "'exact', or 'decoupled' (deep limits; a negative control)",
                   "limit.backprop", knob=True),
    _choice_option("zdot", "stein", ZDOT,
                   "deep Monte Carlo Ż estimator: 'stein' (time ∝ T²) or 'tangent' "
                   "(exact given the particles, time ∝ T³)", "limit.zdot", knob=True),
    Option("workers", 1, _count("workers", 1, 4096),
           "Monte Carlo: run the replicates in this many local processes",
           "limit.workers", "int", knob=True),
    Option("divergence_bound", 1e10, check_divergence_bound,
           "an output beyond this magnitude counts as a divergence (None: only inf/NaN)",
           knob=True),
    Option("executor", None, check_executor,
           "Monte Carlo: run the replicates on this concurrent.futures Executor or Dask "
           "Client", knob=True),
    Option("partners", None, _count("partners", 2, optional=True),
           "deep limit of an optimizer not linear in the gradients (Adam): partner "
           "particles M (default min(256, N/2))", "limit.partners", "int", knob=True),
    Option("debias_partners", True, lambda v: check_bool(v, "debias_partners"),
           "... and report 2 f(2M) − f(M) (the 1/M bias removed)", "limit.debias_partners",
           "bool", knob=True),
    _choice_option("random", "backend", SOURCES,
                   "'backend' (the device's generator) or 'host' (a GPU run then reproduces "
                   "the CPU run of its seed)", "limit.random", knob=True),
    _choice_option("sampler", None, SAMPLERS,
                   "Monte Carlo Gaussians: 'qmc' (scrambled Sobol' points; default with "
                   "replicates), 'antithetic' (default for one replicate) or 'mc'",
                   "limit.sampler", knob=True, optional=True),
    Option("time_budget", 3600.0, check_time_budget,
           "Monte Carlo (deep, and one hidden layer on the host): refuse, before any work, "
           "a run estimated (its measured cost model) to take longer than this many seconds, "
           "naming a particle count that fits (None: no limit; meta['time_estimate_s'])",
           "limit.time_budget", "number", knob=True),
)

#: the options of train_finite after (net, routine, width), in the order of its signature
FINITE_OPTIONS = (
    Option("seed", 0, check_seed, "seed of the initial weights"),
    Option("backend", "numpy", _backend, "'numpy' or 'cupy'", "finite.backend", "str",
           choices=BACKENDS),
    Option("dtype", np.dtype(np.float64), check_dtype, "float64 or float32"),
    _choice_option("backprop", "exact", BACKPROP,
                   "'exact', or 'decoupled' (L >= 2; a negative control)"),
    Option("record", ("stats",), lambda v: check_record(v, ("stats", "spectral")),
           "per-layer statistics ('stats'), and spectral-norm ratios ('spectral', when "
           "asked: they cost about as much as the training); either keeps a copy of W_0"),
    _choice_option("on_divergence", "raise", ON_DIVERGENCE,
                   "'raise' a DivergenceError, or 'stop' and return the steps before it"),
    Option("progress", False, check_progress, "a progress bar"),
    Option("divergence_bound", 1e10, check_divergence_bound,
           "a pre-activation or output beyond this magnitude counts as a divergence (None: "
           "only inf/NaN)"),
    Option("keep_weights", False, lambda v: check_bool(v, "keep_weights"),
           "return W^1..W^{L+1} before the first step and after the last "
           "(Trajectory.weights); keeps a copy of W_0"),
    Option("time_budget", 3600.0, check_time_budget,
           "refuse, before any work, a run estimated (its measured cost model) to take "
           "longer than this many seconds (None: no limit; meta['time_estimate_s'])",
           "finite.time_budget", "number", knob=True),
    Option("eval_every", 1, _count("eval_every", 1),
           "evaluate f (and record the statistics) every k-th step, and at 0 and T; rows "
           "in between are NaN", knob=True),
)


def option_names(table) -> tuple:
    return tuple(o.name for o in table)


def option_default(table, name: str):
    """The declared default of option ``name`` of ``table`` (one source for every caller
    that must compare with it or stand in for it)."""
    return next(o.default for o in table if o.name == name)


def check_options(table, given: dict, who: str) -> dict:
    """The given options checked against ``table`` (unknown names refused, listing the
    valid ones): name -> cleaned value, for the given ones only."""
    names = option_names(table)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise SpecError(f"unknown option(s) {unknown} of {who}; valid: {sorted(names)}")
    by_name = {o.name: o for o in table}
    return {k: by_name[k].check(v) for k, v in given.items()}


def option_record(name: str, table, who: str, module: str, bases=()):
    """A frozen dataclass with one field per option of ``table`` (its default), and
    ``of(**given)``: the record with the given options checked (``who``: the entry point
    named in errors).  ``module`` is where the class lives (records travel to worker
    processes by pickle)."""
    fields = [(o.name, object, dataclasses.field(default=o.default)) for o in table]
    cls = dataclasses.make_dataclass(name, fields, bases=bases, frozen=True)
    cls.__module__ = module
    cls.TABLE = table
    cls.of = classmethod(lambda c, **given: c(**check_options(table, given, who)))
    return cls


KNOB_OPTIONS = tuple(o for o in LIMIT_OPTIONS if o.knob)


class Knobs:
    """The rarely used engine knobs of :func:`~tp_limits.simulate_limit`, grouped:
    ``tp.Knobs(zdot="tangent", sampler="mc")``, each checked now (the knob options of
    docs/api.md; any of them may also be given to ``simulate_limit`` as a keyword)."""

    def __init__(self, **knobs):
        self._given = check_options(KNOB_OPTIONS, knobs, "tp.Knobs")

    def given(self) -> dict:
        """The knobs set, by name (the others keep their defaults)."""
        return dict(self._given)

    def __eq__(self, other):
        return isinstance(other, Knobs) and self._given == other._given

    def __repr__(self):
        return "Knobs(" + ", ".join(f"{k}={v!r}" for k, v in self._given.items()) + ")"


def options_markdown(table) -> str:
    """The table as Markdown (docs/api.md holds it, tested equal): option, default, meaning."""
    lines = ["| option | default | meaning |", "|---|---|---|"]
    for o in table:
        d = o.default
        shown = (repr(d.name) if isinstance(d, np.dtype) else f"{d:g}" if isinstance(d, float)
                 else repr(d))
        knob = " (a knob)" if o.knob else ""
        lines.append(f"| `{o.name}`{knob} | `{shown}` | {o.doc} |")
    return "\n".join(lines)


#: why a study sets a ``train_finite`` option of each run itself
_SET_BY_STUDY = {"seed": "its seeds= gives them",
                 "record": "it records what it measures",
                 "on_divergence": "a diverged run is marked and counts as the worst value",
                 "progress": "its own progress= draws one bar for all runs"}


def check_train_kwargs(kwargs: dict, who: str, fixed=("seed",)) -> dict:
    """Options a study passes on to every ``train_finite`` run, checked now against the
    table (unknown names and bad values refused before any work); ``fixed``: the ones
    the study sets itself, refused with the reason."""
    clash = sorted(set(kwargs) & set(fixed))
    if clash:
        raise SpecError(f"{who} sets {', '.join(clash)} of each run itself; leave "
                        f"{'it' if len(clash) == 1 else 'them'} out ("
                        + "; ".join(f"{k}: {_SET_BY_STUDY[k]}" for k in clash) + ")")
    check_options(FINITE_OPTIONS, kwargs, f"train_finite (through {who})")
    return kwargs
