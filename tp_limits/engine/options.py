"""Options shared by the finite and the limit engines, checked in one place.

Every public entry point (``train_finite``, ``simulate_limit``, the studies)
and the experiment-file schema call these, so a value is accepted or refused
the same way wherever it is given.
"""
from __future__ import annotations

import numbers
from concurrent.futures import Executor

import numpy as np

from ..errors import SpecError
from ..spec.checks import check_bool, check_choice, check_int, finite_positive

DTYPES = ("float64", "float32")
ON_DIVERGENCE = ("raise", "stop")
#: The largest seed numpy's SeedSequence takes comfortably as a Python int.
MAX_SEED = 2 ** 63 - 1


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


def check_on_divergence(value) -> str:
    return check_choice(value, "on_divergence", ON_DIVERGENCE)


def check_progress(value) -> bool:
    return check_bool(value, "progress")


def check_divergence_bound(bound):
    """A positive number (magnitudes beyond it count as divergence), or None (only inf/NaN)."""
    if bound is None:
        return None
    return finite_positive(bound, "divergence_bound")


def check_seed(seed, name: str = "seed") -> int:
    return check_int(seed, name, minimum=0, maximum=MAX_SEED)


def check_seeds(seeds, name: str = "seeds", minimum: int = 1) -> tuple:
    """A seed count k (seeds 0..k-1) or an explicit list of distinct seeds."""
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        return tuple(range(check_int(seeds, name, minimum)))
    try:
        out = tuple(check_seed(s, f"{name}[{i}]") for i, s in enumerate(seeds))
    except TypeError:
        raise SpecError(f"{name} = {seeds!r} must be a count or a list of seeds") from None
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


#: Widths beyond this cannot be trained on any machine this library targets.
MAX_WIDTH = 10 ** 8


def check_widths(widths, who: str) -> tuple:
    """At least two distinct positive int widths, sorted."""
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__"):
        raise SpecError(f"widths = {widths!r}: {who} needs a list of at least two widths")
    out = tuple(sorted(check_int(w, "width", 1, MAX_WIDTH) for w in widths))
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
