"""One shared description of a training problem: an :class:`MLP` on a :class:`Routine`.

Both engines, finite and limit, read the problem through this object, so the
targets, the batches and the loss are derived once and the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import SpecError
from ..losses import Loss, get_loss
from .mlp import MLP
from .routine import Routine


@dataclass(frozen=True)
class Problem:
    net: MLP
    routine: Routine

    def __post_init__(self):
        if not isinstance(self.net, MLP):
            raise SpecError(f"net must be a tp.MLP, got {type(self.net).__name__}")
        if not isinstance(self.routine, Routine):
            raise SpecError(f"routine must be a tp.Routine, got {type(self.routine).__name__}")
        if self.routine.d_in != self.net.d_in:
            raise SpecError(f"X has {self.routine.d_in} columns but the network has "
                            f"d_in = {self.net.d_in}")
        self.targets            # noqa: B018  (checks the targets against d_out now)

    @cached_property
    def targets(self) -> np.ndarray:
        """The training targets as a float (T·B, d_out) matrix (one-hot for class labels)."""
        Y = np.array(self.routine.targets(self.net.d_out)[: self.T * self.B], dtype=np.float64)
        Y.setflags(write=False)
        return Y

    @property
    def T(self) -> int:
        return self.routine.steps

    @property
    def B(self) -> int:
        return self.routine.batch_size

    @property
    def E(self) -> int:
        return len(self.routine.eval_inputs)

    @property
    def eval_inputs(self) -> np.ndarray:
        return self.routine.eval_inputs

    @cached_property
    def loss(self) -> Loss:
        return get_loss(self.routine.loss)

    def batch(self, t: int):
        """(X_t, Y_t): the inputs and float targets of step t, as fresh C-ordered float64 arrays."""
        rows = self.routine.rows(t)
        return np.array(self.routine.X[rows], dtype=np.float64), np.array(self.targets[rows])
