"""Learning-rate schedules: the rate of each step of a routine (docs/theory.md §10.9).

A routine's learning rate is a number η (every step), or one rate η_t per step:
an array of T values or a function of the step t = 0 … T−1.  Internally a
schedule is its peak η = max_t η_t and the factors s_t = η_t / η ∈ [0, 1]; the
parametrization's width exponents act on η, and step t's update is scaled as
PyTorch's schedulers scale it (the step, not what momentum accumulates;
docs/theory.md §10.9).  ``lr_sweep`` sweeps the peak and keeps the shape.

The helpers return the T rates as a read-only array:

* :func:`warmup_cosine` — linear warm-up to the peak, then a half cosine to
  ``final`` × peak;
* :func:`step_decay` — the peak, multiplied by ``factor`` every ``every`` steps
  (after an optional warm-up);
* :func:`linear_warmup` — linear warm-up, then constant.

Warm-up step t (t < w) has rate (t + 1)/w × peak, so no step has rate 0 unless
asked for.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import SpecError
from .checks import check_int, finite_positive, fraction


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


def _warmup(steps: int, warmup: int) -> np.ndarray:
    """Factors (t + 1)/w for t < w, then 1."""
    t = np.arange(steps, dtype=np.float64)
    return np.minimum(1.0, (t + 1) / warmup) if warmup else np.ones(steps)


def _check_warmup(steps, warmup) -> tuple:
    steps = check_int(steps, "steps")
    warmup = check_int(warmup, "warmup", 0)
    if warmup > steps:
        raise SpecError(f"warmup = {warmup} exceeds steps = {steps}")
    return steps, warmup


def warmup_cosine(peak: float, steps: int, warmup: int = 0, final: float = 0.0) -> np.ndarray:
    """η_t = peak · (t + 1)/w for t < w, then
    peak · (final + (1 − final) · ½ (1 + cos(π (t − w)/(T − w)))): the peak at step w,
    falling to ``final`` × peak at t = T (so the last step's rate is just above it)."""
    peak = finite_positive(peak, "peak")
    steps, warmup = _check_warmup(steps, warmup)
    final = fraction(final, "final (a fraction of the peak)")
    s = _warmup(steps, warmup)
    t = np.arange(warmup, steps, dtype=np.float64)
    s[warmup:] = final + (1.0 - final) * 0.5 * (1.0 + np.cos(math.pi * (t - warmup)
                                                             / (steps - warmup)))
    return _frozen(peak * s)


def step_decay(peak: float, steps: int, every: int, factor: float = 0.1,
               warmup: int = 0) -> np.ndarray:
    """η_t = peak · factor^⌊(t − w)/every⌋ after a linear warm-up of w steps."""
    peak = finite_positive(peak, "peak")
    steps, warmup = _check_warmup(steps, warmup)
    every = check_int(every, "every")
    factor = fraction(factor, "factor")
    if factor == 0.0:
        raise SpecError("factor = 0 must be in (0, 1]: the rate would drop to 0 at once")
    s = _warmup(steps, warmup)
    t = np.arange(warmup, steps)
    s[warmup:] = factor ** ((t - warmup) // every)
    return _frozen(peak * s)


def linear_warmup(peak: float, steps: int, warmup: int) -> np.ndarray:
    """η_t = peak · min(1, (t + 1)/w)."""
    peak = finite_positive(peak, "peak")
    steps, warmup = _check_warmup(steps, warmup)
    return _frozen(peak * _warmup(steps, warmup))


def resolve(lr, steps: int) -> tuple:
    """(peak η, factors): a number gives (η, None); T rates (an array, or a function of
    t = 0 … T−1) give their maximum and the read-only factors η_t / η (None when every
    rate is the peak: a constant rate, run exactly as a number is).  Every rate must be
    finite and >= 0, and at least one > 0."""
    if isinstance(lr, numbers.Real) and not isinstance(lr, bool):
        return finite_positive(lr, "lr"), None
    if callable(lr):
        rates = []
        for t in range(steps):
            try:
                v = lr(t)
            except Exception as exc:
                raise SpecError(f"the learning-rate function raised {type(exc).__name__} at "
                                f"step {t}: {exc}") from exc
            if not isinstance(v, numbers.Real) or isinstance(v, bool):
                raise SpecError(f"the learning-rate function returned {v!r} at step {t}; it "
                                "must return a number")
            rates.append(float(v))
        what = "the learning-rate function"
    elif isinstance(lr, (str, bytes, bool)) or lr is None:
        raise SpecError(f"lr = {lr!r} must be a positive number, {steps} rates (one per step) "
                        "or a function of the step")
    else:
        try:
            rates = np.asarray(lr, dtype=np.float64)
        except (TypeError, ValueError):
            raise SpecError(f"lr = {lr!r} must be a positive number, {steps} rates (one per "
                            "step) or a function of the step") from None
        if rates.ndim != 1 or len(rates) != steps:
            raise SpecError(f"lr has shape {rates.shape}; a schedule needs one rate per step: "
                            f"{steps} values (the routine's steps)")
        what = "lr"
    rates = np.asarray(rates, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(rates) | (rates < 0))
    if len(bad):
        raise SpecError(f"{what} gives {float(rates[bad[0]])!r} at step {int(bad[0])}; every rate "
                        "must be finite and >= 0")
    peak = float(rates.max(initial=0.0))
    if peak <= 0:
        raise SpecError(f"{what} is 0 at every step: nothing would train")
    factors = rates / peak
    return peak, (None if np.all(factors == 1.0) else _frozen(factors))


#: experiment files' [routine] schedule names -> (helper, {TOML key: the helper's argument})
NAMED = {
    "warmup_cosine": (warmup_cosine, {"warmup": "warmup", "final_fraction": "final"}),
    "step_decay": (step_decay, {"warmup": "warmup", "decay_every": "every",
                                "decay_factor": "factor"}),
    "linear_warmup": (linear_warmup, {"warmup": "warmup"}),
}


def named(kind: str, peak: float, steps: int, settings: dict) -> np.ndarray:
    """The rates of the named schedule ``kind`` (a key of :data:`NAMED`) from an experiment
    file's [routine] ``settings`` (TOML key -> value, None where not given); a key of
    another schedule is refused, naming it."""
    if kind not in NAMED:
        raise SpecError(f"schedule = {kind!r}; choose one of {('constant', *NAMED)}")
    fn, keys = NAMED[kind]
    for other in {k for _, ks in NAMED.values() for k in ks} - set(keys):
        if settings.get(other) is not None:
            raise SpecError(f"{other} does not apply to schedule = {kind!r} (its settings: "
                            f"{', '.join(keys)})")
    given = {arg: settings[key] for key, arg in keys.items() if settings.get(key) is not None}
    if kind in ("step_decay", "linear_warmup") and not given.get(
            "every" if kind == "step_decay" else "warmup"):
        need = "decay_every" if kind == "step_decay" else "warmup"
        raise SpecError(f"schedule = {kind!r} needs {need}")
    return fn(peak, steps, **given)
