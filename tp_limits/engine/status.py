"""How a run ended, as typed values: :class:`RunStatus` and :class:`Divergence`.

Every engine reports the same four facts about its run: how many steps it
completed, whether Ctrl-C stopped it, where it diverged (if it did) and how
many degrees of freedom its standard error has.  They live here as frozen
records that :class:`~tp_limits.Trajectory` carries as ``status``; the
Trajectory's ``meta`` dict holds their JSON view (``completed_steps``,
``interrupted``, ``diverged``, ``se_dof``), written from the record and read
back into it by :meth:`RunStatus.from_meta` when a saved Trajectory is loaded.
Code branches on the record, never on the strings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

#: the keys of ``Trajectory.meta`` that are the JSON view of a :class:`RunStatus`
STATUS_KEYS = ("completed_steps", "interrupted", "diverged", "se_dof")


@dataclass(frozen=True)
class Divergence:
    """Where a run diverged: the step, the layer (None: the output, the loss or the
    statistics) and the quantity that was not finite or beyond the divergence bound,
    with its size where it was finite (None otherwise)."""

    step: int
    layer: int | None
    quantity: str
    size: float | None = None

    @classmethod
    def of(cls, error) -> "Divergence":
        """The record of a :class:`~tp_limits.DivergenceError`."""
        size = error.size
        finite = isinstance(size, (int, float)) and math.isfinite(size)
        return cls(int(error.step), error.layer, error.quantity, float(size) if finite else None)

    def to_json(self) -> dict:
        return {"step": self.step, "layer": self.layer, "quantity": self.quantity,
                "size": self.size}

    @classmethod
    def from_json(cls, d) -> "Divergence | None":
        """The record from its JSON view (None, or a dict with step, layer, quantity)."""
        if not d:
            return None
        return cls(int(d["step"]), d.get("layer"), str(d["quantity"]), d.get("size"))

    def __str__(self):
        where = f"layer {self.layer}" if self.layer is not None else "the output"
        return f"step {self.step}, {self.quantity} of {where}"


@dataclass(frozen=True)
class RunStatus:
    """How a run ended.

    ``completed_steps`` training steps finished; ``interrupted``: Ctrl-C stopped
    it; ``divergence``: where it diverged, or None; ``se_dof``: degrees of
    freedom of the standard error of ``f_eval_se`` (replicates − 1, particle
    groups − 1), None where it is not a sampling error (exact engines, the
    quadrature rule difference, finite networks; docs/theory.md §8.1).
    """

    completed_steps: int
    interrupted: bool = False
    divergence: Divergence | None = None
    se_dof: int | None = None

    @property
    def diverged(self) -> bool:
        return self.divergence is not None

    @property
    def complete(self) -> bool:
        """Neither interrupted nor diverged (it may still have been asked for few steps)."""
        return not self.interrupted and self.divergence is None

    def to_json(self) -> dict:
        """The view stored in ``Trajectory.meta`` (keys :data:`STATUS_KEYS`)."""
        return {"completed_steps": int(self.completed_steps),
                "interrupted": bool(self.interrupted),
                "diverged": None if self.divergence is None else self.divergence.to_json(),
                "se_dof": None if self.se_dof is None else int(self.se_dof)}

    @classmethod
    def from_meta(cls, meta: dict, steps: int) -> "RunStatus":
        """The status a ``meta`` dict records (a Trajectory saved or built by hand);
        ``steps`` (the length of its loss) stands in for a missing step count."""
        return cls(int(meta.get("completed_steps", steps)), bool(meta.get("interrupted", False)),
                   Divergence.from_json(meta.get("diverged")), meta.get("se_dof"))
