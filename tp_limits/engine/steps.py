"""The step loop every engine shares: count steps, report progress, stop cleanly.

Each engine (finite network, kernel GD, exact linear recursions, particle
Monte Carlo) runs ``T`` training steps and must return the trajectory so far
when the user presses Ctrl-C or when the dynamics diverge.  ``StepLoop``
holds that bookkeeping once::

    loop = StepLoop(T, on_step)
    with loop:
        evaluate(0)                 # anything before the first step is guarded too
        for t in loop:
            ...                     # one step; raise DivergenceError(step, layer, what)
    loop.completed, loop.interrupted, loop.diverged

``completed`` counts the steps whose body finished; ``on_step(t)`` runs after
each of them (progress bars).  A ``KeyboardInterrupt`` ends the block with
``interrupted = True``; a ``DivergenceError`` ends it with ``diverged`` set to
its :class:`~tp_limits.engine.status.Divergence` record, unless
``catch_divergence=False`` (then it propagates, as
``train_finite(..., on_divergence="raise")`` asks).  Any
other exception propagates unchanged.
"""
from __future__ import annotations

import math
from typing import Callable, Iterator, Optional

import numpy as np

from ..errors import DivergenceError
from .status import Divergence

#: Default ``divergence_bound``: a pre-activation or output beyond this magnitude is
#: reported as a divergence even while it is still finite (stable parametrizations keep
#: them Θ(1); an exploding run passes 1e10 long before it overflows).
DIVERGENCE_BOUND = 1e10


def check_size(x, step: int, layer, quantity: str, bound: float | None, xp=np) -> None:
    """Raise DivergenceError when ``x`` has a non-finite entry or one beyond ``bound``.

    One reduction (max |x|) serves both tests: NaN and inf fail the comparison.
    """
    size = float(xp.max(xp.abs(x))) if x.size else 0.0
    limit = math.inf if bound is None else bound
    if not size <= limit:
        raise DivergenceError(step, layer, quantity, size=size, bound=bound)


def eval_steps(T: int, every: int) -> tuple:
    """The steps whose f on the evaluation inputs an engine evaluates (and whose
    statistics it records): every ``every``-th, and always 0 and T (the start and the
    end of training).  One rule for every engine, so a finite network and its limit with
    the same ``eval_every`` have their evaluated rows on the same steps."""
    return tuple(sorted(set(range(0, T + 1, every)) | {T}))


class StepLoop:
    def __init__(self, T: int, on_step: Optional[Callable[[int], None]] = None,
                 catch_divergence: bool = True):
        self.T = int(T)
        self.on_step = on_step
        self.catch_divergence = catch_divergence
        self.completed = 0
        self.interrupted = False
        self.diverged: Optional[Divergence] = None

    def __iter__(self) -> Iterator[int]:
        for t in range(self.T):
            yield t
            # reached only when the body of step t finished
            self.completed = t + 1
            if self.on_step is not None:
                self.on_step(t)

    def __len__(self) -> int:
        return self.T

    def __enter__(self) -> "StepLoop":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            return False
        if issubclass(exc_type, KeyboardInterrupt):
            self.interrupted = True
            return True
        if issubclass(exc_type, DivergenceError) and self.catch_divergence:
            self.diverged = Divergence.of(exc)
            return True
        return False
