"""Value checks shared by every public entry point.

Each returns the cleaned value or raises :class:`~tp_limits.SpecError` with
a message that names the argument, what it must be, and what it was.  They
are the single source of these rules: the problem spec, the engine options
and the experiment schema all call them.
"""
from __future__ import annotations

import math
import numbers
import os

import numpy as np

from ..errors import SpecError


def check_int(value, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an int in [minimum, maximum], or a SpecError saying what it must be."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise SpecError(f"{name} = {value!r} must be an int >= {minimum}")
    if maximum is not None and value > maximum:
        raise SpecError(f"{name} = {value!r} exceeds the largest supported value {maximum:,}")
    return int(value)


#: Widths beyond this cannot be trained on any machine this library targets.
MAX_WIDTH = 10 ** 8


def check_width(value, name: str = "width") -> int:
    """A network's width n: an int in [1, MAX_WIDTH], or a SpecError naming ``name``.  Every
    entry point that takes a width checks it here."""
    return check_int(value, name, 1, MAX_WIDTH)


def check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise SpecError(f"{name} = {value!r} must be True or False")
    return bool(value)


def check_choice(value, name: str, choices) -> str:
    """``value`` if it is one of ``choices`` (compared as given), else a SpecError listing them."""
    try:
        ok = value in choices
    except TypeError:            # unhashable values against a set
        ok = False
    if not ok or isinstance(value, bool):
        raise SpecError(f"{name} = {value!r}; choose one of {tuple(choices)}")
    return value


def finite_positive(value, name: str) -> float:
    x = _number(value, name)
    if not (math.isfinite(x) and x > 0):
        raise SpecError(f"{name} = {value!r} must be a positive finite number")
    return x


def finite_nonzero(value, name: str) -> float:
    x = _number(value, name)
    if not math.isfinite(x) or x == 0:
        raise SpecError(f"{name} = {value!r} must be a finite nonzero number")
    return x


def unit_interval(value, name: str) -> float:
    """A number in [0, 1) (momentum, Adam's β)."""
    x = _number(value, name)
    if not 0.0 <= x < 1.0:
        raise SpecError(f"{name} = {value!r} must be in [0, 1)")
    return x


def finite_non_negative(value, name: str) -> float:
    """A finite number >= 0 (weight decay, Adam's ε)."""
    x = _number(value, name)
    if not (math.isfinite(x) and x >= 0.0):
        raise SpecError(f"{name} = {value!r} must be a finite number >= 0")
    return x


def _number(value, name: str) -> float:
    if isinstance(value, (bool, np.bool_, str, bytes, complex, np.complexfloating)):
        raise SpecError(f"{name} = {value!r} must be a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{name} = {value!r} must be a number") from None


def check_sequence(values, name: str, what: str = "a list", unordered: bool = False) -> list:
    """``values`` as a list, from an ordered collection (a list, tuple, range or 1-D
    array).  A string (iterated character by character), a set (in hash order; accepted
    with ``unordered`` where the caller sorts) or a dict (its keys) is refused, as is a
    scalar: each would be read as something the user did not write."""
    if unordered and isinstance(values, (set, frozenset)):
        return list(values)
    if (isinstance(values, (str, bytes, set, frozenset, dict)) or not hasattr(values, "__iter__")
            or (isinstance(values, np.ndarray) and values.ndim != 1)):
        kind = ("a set, whose order is not yours" if isinstance(values, (set, frozenset))
                else "a string" if isinstance(values, (str, bytes)) else type(values).__name__)
        raise SpecError(f"{name} = {values!r} must be {what}, in order (a list or tuple); "
                        f"got {kind}")
    return list(values)


def check_path(path, name: str) -> str:
    """A file-system path (a str or os.PathLike) as a str."""
    if isinstance(path, (str, os.PathLike)) and not isinstance(path, bytes):
        return os.fspath(path)
    raise SpecError(f"{name} = {path!r} must be a path (a str or pathlib.Path)")


def fraction(value, name: str, low: float = 0.0, high: float = 1.0) -> float:
    """A number in [low, high]."""
    x = _number(value, name)
    if not low <= x <= high:
        raise SpecError(f"{name} = {value!r} must be in [{low:g}, {high:g}]")
    return x


def per_layer(values, name: str, L1: int, check=None, each: str = "layer 1..L+1") -> tuple:
    """One constant per layer 1..L+1 (or per ``each``) from a scalar, a sequence, or None
    (all 1), each passed through ``check`` (default: finite and positive)."""
    check = check or finite_positive
    if values is None:
        return (1.0,) * L1
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        return (check(values, name),) * L1
    vals = check_sequence(values, name, f"a number or one number per {each.split()[0]}")
    if len(vals) != L1:
        raise SpecError(f"{name} has {len(vals)} entries; give one per {each} ({L1})")
    return tuple(check(v, f"{name}[{i}]") for i, v in enumerate(vals))


def repeat_hidden(values: tuple, L: int, tail: int, what: str) -> tuple:
    """``values`` (the first entry, the hidden layers' entries, then ``tail`` more) rebuilt
    for L hidden layers: the hidden entries, which must agree, repeated L − 1 times."""
    hidden = values[1:len(values) - tail]
    if not hidden:
        raise SpecError(f"{what} have no entry to repeat: build the network at the depth "
                        "you need")
    if any(x != hidden[0] for x in hidden):
        raise SpecError(f"{what} differ ({list(hidden)}): give them one value to change the "
                        "depth")
    return (values[0],) + (hidden[0],) * (L - 1) + values[len(values) - tail:]


def as_matrix(a, name: str, dtype=np.float64) -> np.ndarray:
    """A read-only, finite, 2-D float array (rows = examples)."""
    try:
        complex_ = np.iscomplexobj(a)
    except (TypeError, ValueError):
        complex_ = False
    if complex_:
        raise SpecError(f"{name} is complex; give real numbers")
    try:
        arr = np.array(a, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{name} must be a numeric array ({exc})") from None
    if arr.ndim != 2:
        raise SpecError(f"{name} must be 2-D (rows = examples), got shape {arr.shape}")
    if arr.size == 0:
        raise SpecError(f"{name} is empty (shape {arr.shape}); give at least one row and column")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        if not isinstance(a, np.ndarray) or a.dtype == object:    # None converts to NaN
            cells = np.asarray(a, dtype=object).reshape(arr.shape)
            missing = [i for i, v in np.ndenumerate(cells) if v is None]
            if missing:
                raise SpecError(f"{name} has a missing value (None) at row {missing[0][0]}, "
                                f"column {missing[0][1]}; give numbers only")
        raise SpecError(f"{name} contains NaN or inf (first at row {bad[0]}, column {bad[1]})")
    arr.setflags(write=False)
    return arr
