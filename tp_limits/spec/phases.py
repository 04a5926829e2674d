"""Training in phases: which parameters each step trains (docs/theory.md §10.10).

A routine is a sequence of phases, each a span of steps [start, stop) with the parameters
it trains (``train``: names such as "W1", "W3", "b2"; None for all).  The usual routine is
one phase that trains everything; :meth:`Routine.phases <tp_limits.Routine.phases>` joins
several, e.g. pretraining every layer on one task, then fine-tuning the readout on another.

A frozen parameter is not touched at that step: no gradient enters its optimizer state, no
weight decay shrinks it, and its own update count does not advance, so a parameter first
trained in phase two starts its optimizer from a fresh state (Adam's bias correction at
its first update), as in a training loop that switches ``requires_grad`` under one
optimizer.  :class:`Clocks` holds that count per parameter and step, the one thing every
engine asks: 0 (frozen, skip) or k ≥ 1 (the parameter's k-th update).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import SpecError
from .program import Parameter


@dataclass(frozen=True)
class Phase:
    """Steps ``start`` … ``stop`` − 1 of a routine train the parameters ``train`` (names,
    None: all of them)."""

    start: int
    stop: int
    train: tuple | None = None


def check_train(train, name: str = "train") -> tuple | None:
    """``train`` cleaned: None (every parameter) or a tuple of distinct parameter names
    ("W1", "b2", …); a single name may be given as a string."""
    if train is None:
        return None
    if isinstance(train, str):
        train = (train,)
    try:
        names = tuple(train)
    except TypeError:
        raise SpecError(f"{name} = {train!r} must be None (train every parameter) or parameter "
                        "names such as ('W2', 'W3')") from None
    bad = [v for v in names if not isinstance(v, str) or not _is_name(v)]
    if bad:
        raise SpecError(f"{name} holds {bad[0]!r}: a parameter is named W<l> (the weight of "
                        "layer l = 1..L+1) or b<l> (its bias), e.g. ('W2', 'W3')")
    if not names:
        raise SpecError(f"{name} = () trains nothing; name the parameters to train, or None "
                        "for all of them")
    if len(set(names)) != len(names):
        raise SpecError(f"{name} = {names!r} names a parameter twice")
    return names


def _is_name(v: str) -> bool:
    return len(v) >= 2 and v[0] in "Wb" and v[1:].isdigit() and int(v[1:]) >= 1


def phases_json(phases: tuple) -> list:
    """The phases as JSON (run metadata, experiment summaries)."""
    return [{"steps": [p.start, p.stop], "train": None if p.train is None else list(p.train)}
            for p in phases]


def phase_label(phases: tuple, i: int) -> str:
    """How errors name phase i: "train" for a one-phase routine, else "phase k's train"."""
    return "train" if len(phases) == 1 else f"phase {i + 1}'s train"


@dataclass(frozen=True)
class Clocks:
    """Per parameter name, its update count at every step: ``counts[name][t]`` is 0 when
    step t leaves it frozen and k when step t is its k-th update (docs/theory.md §10.10)."""

    counts: dict

    @classmethod
    def of(cls, phases: tuple, names: tuple, T: int) -> "Clocks":
        """The clocks of ``phases`` for a network whose parameters are ``names``; a phase
        naming a parameter the network does not have is refused, naming the phase."""
        trained = {name: np.zeros(T, dtype=bool) for name in names}
        for i, phase in enumerate(phases):
            chosen = names if phase.train is None else phase.train
            unknown = [v for v in chosen if v not in trained]
            if unknown:
                raise SpecError(f"the routine's {phase_label(phases, i)} names {unknown[0]!r}, "
                                f"but the network's parameters are {', '.join(names)}")
            for name in chosen:
                trained[name][phase.start:phase.stop] = True
        counts = {}
        for name, mask in trained.items():
            c = np.where(mask, np.cumsum(mask), 0)
            c.setflags(write=False)
            counts[name] = c
        return cls(counts)

    @property
    def phased(self) -> bool:
        """Whether some step leaves some parameter frozen."""
        return any(not c.all() for c in self.counts.values())

    def of_layer(self, kind: str, l: int) -> np.ndarray:
        """The counts of the weight (``kind`` "W") or bias ("b") of 0-based layer ``l``."""
        return self.counts[Parameter(kind, l).name]

    def trains(self, kind: str, l: int, t: int) -> int:
        """The update count at step t (0: frozen) of the weight or bias of 0-based layer
        ``l``."""
        return int(self.of_layer(kind, l)[t])
