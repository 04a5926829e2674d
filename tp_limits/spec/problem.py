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
from .optimizers import check_optimizer
from .phases import Clocks
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
        self.optimizer          # noqa: B018  (checks it against the parametrization)
        if self.net.bias is not None and not self.optimizer.coordinatewise:
            raise SpecError(f"biases with {self.optimizer}: an optimizer that moves whole "
                            "matrices has no rule for a bias vector here (docs/theory.md §13); "
                            "train biases with SGD or Adam, or build the network with "
                            "bias=None")
        self.clocks             # noqa: B018  (checks every phase's train against the net)
        self.targets            # noqa: B018  (checks the targets against d_out now)
        self.eval_targets       # noqa: B018

    @cached_property
    def program(self):
        """The network as a program (spec/program.py): the walk every engine takes."""
        return self.net.program

    @cached_property
    def optimizer(self):
        """The routine's optimizer, or the plain one the parametrization names (checked to be
        of the parametrization's kind)."""
        return check_optimizer(self.routine.optimizer, self.net.param.optimizer)

    @cached_property
    def targets(self) -> np.ndarray:
        """The training targets as a float (T·B, d_out) matrix (one-hot for class labels)."""
        Y = np.array(self.routine.targets(self.net.d_out)[: self.T * self.B], dtype=np.float64)
        Y.setflags(write=False)
        return Y

    @cached_property
    def eval_targets(self) -> np.ndarray | None:
        """The held-out targets as a float (E, d_out) matrix, or None."""
        if self.routine.eval_targets is None:
            return None
        Y = np.array(self.routine.targets(self.net.d_out, "eval_targets"), dtype=np.float64)
        Y.setflags(write=False)
        return Y

    def eval_metrics(self, f_eval: np.ndarray, samples: np.ndarray | None = None) -> dict:
        """Held-out loss (and, for xent, accuracy) at each row of f_eval (T+1, E, d_out).

        ``eval_loss[t]`` is the mean of ℓ(f_t(ζ_e), y_e) over the eval inputs;
        ``eval_accuracy[t]`` the fraction with argmax f_t(ζ_e) = the label.  With
        ``samples`` (S, T+1, E, d_out) — a limit that is random through f_0 —
        both are means over the samples.  NaN at steps not evaluated; {} when the
        routine has no eval targets.
        """
        if self.eval_targets is None:
            return {}
        F = f_eval[None] if samples is None else samples
        Y = self.eval_targets
        S, T1 = F.shape[:2]
        flat = F.reshape(S * T1, *F.shape[2:])
        with np.errstate(invalid="ignore", over="ignore"):
            loss = np.array([np.mean(self.loss.value(f, Y, np)) for f in flat])
        loss = loss.reshape(S, T1).mean(axis=0)
        evaluated = np.all(np.isfinite(f_eval), axis=(1, 2))
        out = {"eval_loss": np.where(evaluated, loss, np.nan)}
        if self.routine.loss == "xent":
            hit = (np.argmax(F, axis=-1) == np.argmax(Y, axis=-1)).mean(axis=(0, 2))
            out["eval_accuracy"] = np.where(evaluated, hit, np.nan)
        return out

    @cached_property
    def rates(self) -> np.ndarray:
        """The learning-rate factor s_t = η_t / η of every step (all ones at a constant rate;
        docs/theory.md §10.9): the one place engines take it from, beside the η_l of the
        network's constants."""
        return self.routine.rates

    def rate(self, t: int) -> float:
        """s_t of step t (0-based)."""
        return self.rates[t]

    @property
    def constant_rate(self) -> bool:
        """Whether the routine trains at a constant rate (no schedule) and every step trains
        every parameter (the engines' shortcut for plain SGD)."""
        return self.routine.lr_factors is None and not self.clocks.phased

    @cached_property
    def clocks(self) -> Clocks:
        """Every parameter's update count at every step: 0 where the routine's phases leave
        it frozen (spec/phases.py, docs/theory.md §10.10)."""
        names = tuple(p.name for p in self.program.parameters)
        return Clocks.of(self.routine.phase_spans, names, self.T)

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
