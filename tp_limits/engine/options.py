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
from ..spec.checks import check_bool, check_choice, check_int

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


def check_executor(executor):
    """None (a local process pool), 'serial', or an open concurrent.futures.Executor."""
    if executor is None or executor == "serial":
        return executor
    if not isinstance(executor, Executor):
        raise SpecError(f"executor must be None, 'serial' or a concurrent.futures.Executor, "
                        f"got {executor!r}")
    if getattr(executor, "_shutdown", False) or getattr(executor, "_shutdown_thread", False):
        raise SpecError(f"executor {executor!r} has been shut down; pass an open one")
    return executor
