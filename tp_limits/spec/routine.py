"""The data half of the problem description: :class:`Routine`."""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..errors import SpecError
from ..losses import get_loss
from .checks import as_matrix, check_bool, check_int, finite_positive
from .optimizers import Optimizer, names
from .phases import Phase, check_train
from .schedules import resolve


def distinct_rows(A: np.ndarray) -> np.ndarray:
    """The distinct rows of A in order of first appearance (rows compared bit for bit)."""
    seen = {}
    for i, row in enumerate(A):
        seen.setdefault(row.tobytes(), i)
    return A[sorted(seen.values())]


#: the largest target an mse routine takes: its square, summed over a batch, stays finite
MAX_TARGET = 1e150


@dataclass(frozen=True, init=False)
class Routine:
    """A training routine: data consumed in order, mean loss, SGD steps.

    ``X`` has shape (T·B, d_in); step t uses rows t·B … t·B+B−1.  ``Y`` has
    shape (T·B, d_out) (``mse``; a 1-D Y means d_out = 1) or holds integer
    class labels / one-hot rows (``xent``).  ``steps`` defaults to
    len(X) // B.  ``eval_inputs`` (E, d_in) defaults to the distinct training
    inputs in order of first appearance.  ``eval_targets`` (optional, in Y's
    format, one row per eval input) makes both engines report the held-out
    loss and, for ``xent``, the accuracy at every evaluated step
    (``Trajectory.stats["eval_loss"]``, ``["eval_accuracy"]``).
    ``optimizer`` is an optimizer (:class:`~tp_limits.SGD`, :class:`~tp_limits.Adam`)
    holding the width-free hyperparameters (momentum, weight decay, Adam's
    β, ε); None means the plain optimizer the parametrization names.

    ``train`` names the parameters the routine trains ("W1" … "W{L+1}", "b1" …; None: every
    one); the others stay frozen.  :meth:`phases` joins routines into one that runs them in
    turn (pretrain, then fine-tune), each phase with its data, rates and ``train``
    (``phase_spans``, docs/theory.md §10.10).

    ``lr`` is the base learning rate η, or a schedule: ``steps`` rates (an array,
    e.g. from :func:`tp.schedules.warmup_cosine <tp_limits.spec.schedules.warmup_cosine>`)
    or a function of the step t = 0 … T−1.  A schedule is kept as its peak
    (``lr``, on which the width exponents act) and the factors ``lr_factors``
    = η_t / peak (None for a constant rate); docs/theory.md §10.9.
    """

    X: np.ndarray
    Y: np.ndarray
    lr: float
    loss: str
    batch_size: int
    steps: int
    eval_inputs: np.ndarray
    eval_targets: np.ndarray | None
    optimizer: object
    lr_factors: np.ndarray | None
    phase_spans: tuple
    swept: tuple | None

    def __init__(self, X, Y, lr, loss: str = "mse", batch_size: int = 1, steps=None,
                 eval_inputs=None, eval_targets=None, optimizer=None, train=None):
        if optimizer is not None and not isinstance(optimizer, Optimizer):
            raise SpecError(f"optimizer must be {names()} or None, got {optimizer!r}")
        get_loss(loss)
        train = check_train(train)
        X = as_matrix(X, "X")
        B = check_int(batch_size, "batch_size")
        Y = self._targets(Y, loss, len(X))
        if steps is None:
            if len(X) % B:
                raise SpecError(f"len(X) = {len(X)} is not a multiple of batch_size = {B}; "
                                "pass steps= to use only the first steps*B rows")
            steps = len(X) // B
        steps = check_int(steps, "steps")
        if steps * B > len(X):
            raise SpecError(f"steps * batch_size = {steps * B} exceeds the {len(X)} rows of X")
        if eval_inputs is None:
            eval_inputs = distinct_rows(X[: steps * B])
        E = as_matrix(eval_inputs, "eval_inputs")
        if E.shape[1] != X.shape[1]:
            raise SpecError(f"eval_inputs have dimension {E.shape[1]} but X has {X.shape[1]}")
        if eval_targets is not None:
            eval_targets = self._targets(eval_targets, loss, len(E), "eval_targets",
                                         "eval_inputs")
            if (eval_targets.ndim == 2) != (Y.ndim == 2) or (
                    Y.ndim == 2 and eval_targets.shape[1] != Y.shape[1]):
                raise SpecError("eval_targets must have the format of Y (the same number of "
                                "columns, or class labels for both)")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "Y", Y)
        peak, factors = resolve(lr, steps)
        object.__setattr__(self, "lr", peak)
        object.__setattr__(self, "lr_factors", factors)
        object.__setattr__(self, "loss", loss)
        object.__setattr__(self, "batch_size", B)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "eval_inputs", E)
        object.__setattr__(self, "eval_targets", eval_targets)
        object.__setattr__(self, "optimizer", optimizer)
        object.__setattr__(self, "phase_spans", (Phase(0, steps, train),))
        object.__setattr__(self, "swept", None)

    @classmethod
    def phases(cls, *routines, eval_inputs=None, eval_targets=None,
               swept=None) -> "Routine":
        """One routine that runs ``routines`` in turn: phase k's steps follow phase k−1's,
        each with its own batches, its own rates (its η times its schedule) and its own
        ``train`` (docs/theory.md §10.10).  The phases share one optimizer, one loss and one
        batch size.  Evaluation is on the last phase's eval inputs and targets (the task
        being fine-tuned) unless ``eval_inputs`` / ``eval_targets`` are given.  ``swept``
        (a phase number k = 1, 2, …; None: all) is the phase whose rate :meth:`with_lr`,
        and so ``lr_sweep``, moves, the others held: ``swept=2`` sweeps the fine-tuning
        rate of a pretrained network.

        >>> pretrain = tp.Routine(X1, Y1, lr=0.5)
        >>> finetune = tp.Routine(X2, Y2, lr=0.1, train=("W3",))
        >>> routine = tp.Routine.phases(pretrain, finetune)
        """
        if not routines:
            raise SpecError("Routine.phases needs at least one routine")
        for k, r in enumerate(routines):
            if not isinstance(r, Routine):
                raise SpecError(f"Routine.phases: phase {k + 1} is a {type(r).__name__}, not "
                                "a tp.Routine")
        first = routines[0]
        for k, r in enumerate(routines[1:], 2):
            for what in ("loss", "batch_size", "optimizer"):
                if getattr(r, what) != getattr(first, what):
                    raise SpecError(
                        f"Routine.phases: phase {k} has {what} = {getattr(r, what)!r} but "
                        f"phase 1 has {getattr(first, what)!r}; the phases of one routine "
                        "share the loss, the batch size and the optimizer (its state "
                        "carries over from phase to phase)")
            if r.d_in != first.d_in:
                raise SpecError(f"Routine.phases: phase {k}'s inputs X have {r.d_in} columns "
                                f"but phase 1's have {first.d_in}")
            if (r.Y.ndim == 1) != (first.Y.ndim == 1) or (
                    r.Y.ndim == 2 and r.Y.shape[1] != first.Y.shape[1]):
                raise SpecError(f"Routine.phases: phase {k}'s targets Y are not in phase 1's "
                                "format (the same number of columns, or class labels for both)")
        last = routines[-1]
        if eval_inputs is None:
            eval_inputs = last.eval_inputs
            if eval_targets is None:
                eval_targets = last.eval_targets
        if swept is not None:
            swept = check_int(swept, "swept", maximum=len(routines))
        spans, starts, start = [], [], 0
        for r in routines:
            spans.extend(Phase(start + p.start, start + p.stop, p.train) for p in r.phase_spans)
            starts.append(start)
            start += r.steps
        # equal rates everywhere resolve to a constant rate (spec/schedules.resolve)
        rates = np.concatenate([r.lr * r.rates for r in routines])
        out = cls(np.concatenate([r.training_inputs for r in routines]),
                  np.concatenate([r.Y[: r.steps * r.batch_size] for r in routines]),
                  lr=rates, loss=first.loss,
                  batch_size=first.batch_size, steps=start, eval_inputs=eval_inputs,
                  eval_targets=eval_targets, optimizer=first.optimizer)
        object.__setattr__(out, "phase_spans", tuple(spans))
        if swept is not None:
            object.__setattr__(out, "swept", (starts[swept - 1],
                                              starts[swept - 1] + routines[swept - 1].steps))
        return out

    @classmethod
    def from_arrays(cls, X, Y, lr, batch_size: int = 1, steps=None, epochs=None,
                    shuffle: bool = True, seed: int = 0, **routine) -> "Routine":
        """A routine over a dataset of n examples (X, Y), as a training loop would draw it:
        ``epochs`` passes (default 1) or ``steps`` batches of ``batch_size``; each pass a
        fresh permutation of the examples when ``shuffle`` (seeded by ``seed``: the same
        batches for a finite network and its limit) with its first ⌊n/B⌋·B rows used (an
        incomplete batch dropped), passes following one another until the steps are
        done.  ``routine``: the other arguments of :class:`Routine` (loss, eval_inputs,
        eval_targets, optimizer); a schedule ``lr`` has one rate per step."""
        X = as_matrix(X, "X")
        Y = np.asarray(Y)
        if Y.ndim == 0 or len(Y) != len(X):
            raise SpecError(f"Y has {0 if Y.ndim == 0 else len(Y)} rows but X has {len(X)}: "
                            "one target per example")
        B = check_int(batch_size, "batch_size")
        if B > len(X):
            raise SpecError(f"batch_size = {B} exceeds the {len(X)} examples")
        shuffle = check_bool(shuffle, "shuffle")
        seed = check_int(seed, "seed", minimum=0)
        if steps is not None and epochs is not None:
            raise SpecError("give steps= or epochs=, not both")
        per_pass = len(X) // B
        steps = (per_pass * check_int(1 if epochs is None else epochs, "epochs")
                 if steps is None else check_int(steps, "steps"))
        rng = np.random.default_rng(seed)
        passes = -(-steps // per_pass)
        order = np.concatenate([(rng.permutation(len(X)) if shuffle else np.arange(len(X)))
                                [:per_pass * B] for _ in range(passes)])[:steps * B]
        return cls(X[order], Y[order], lr, batch_size=B, steps=steps, **routine)

    @staticmethod
    def _targets(Y, loss: str, n: int, name: str = "Y", rows_of: str = "X") -> np.ndarray:
        arr = np.asarray(Y)
        if loss == "xent" and arr.ndim in (1, 2) and (arr.ndim == 1 or arr.shape[1] == 1) \
                and np.issubdtype(arr.dtype, np.integer):
            labels = arr.reshape(-1)
            if labels.min(initial=0) < 0:
                raise SpecError("xent class labels must be >= 0")
            out = labels.astype(np.int64)
            out.setflags(write=False)
        else:
            if arr.ndim == 1:
                arr = arr[:, None]
            out = as_matrix(arr, name)
            if loss == "xent" and not (np.all((out == 0) | (out == 1))
                                       and np.all(out.sum(axis=1) == 1)):
                raise SpecError(f"xent {name} must be integer labels or one-hot rows")
            big = float(np.abs(out).max())
            if loss == "mse" and big > MAX_TARGET:
                raise SpecError(f"{name} has entries as large as {big:.3g}: the squared error "
                                "overflows float64 before any learning rate matters; rescale "
                                f"the targets (|{name}| <= {MAX_TARGET:g})")
        if len(out) != n:
            raise SpecError(f"{name} has {len(out)} rows but {rows_of} has {n}")
        return out

    @property
    def d_in(self) -> int:
        return self.X.shape[1]

    def with_lr(self, lr) -> "Routine":
        """The same routine with another learning rate: a number replaces the peak and keeps
        the schedule's shape (what ``lr_sweep`` sweeps); rates or a function replace both.
        With a swept phase (:meth:`phases`) a number becomes that phase's peak, its shape
        and every other phase's rates kept."""
        number = isinstance(lr, numbers.Real) and not isinstance(lr, bool)
        rates = lr
        if self.swept is not None:
            if not number:
                raise SpecError(f"lr = {lr!r}: a routine with a swept phase takes a number, "
                                "the swept phase's new peak")
            a, b = self.swept
            rates = self.lr * self.rates
            peak = float(rates[a:b].max())
            rates[a:b] *= finite_positive(lr, "lr") / peak
        out = Routine(self.X, self.Y, lr=rates, loss=self.loss, batch_size=self.batch_size,
                      steps=self.steps, eval_inputs=self.eval_inputs,
                      eval_targets=self.eval_targets, optimizer=self.optimizer)
        object.__setattr__(out, "phase_spans", self.phase_spans)
        object.__setattr__(out, "swept", self.swept)
        if number and self.swept is None:
            object.__setattr__(out, "lr_factors", self.lr_factors)     # the same shape
        return out

    @property
    def rates(self) -> np.ndarray:
        """s_t = η_t / η for t = 0 … T−1 (ones for a constant rate)."""
        return np.ones(self.steps) if self.lr_factors is None else self.lr_factors

    def targets(self, d_out: int, which: str = "Y") -> np.ndarray:
        """Targets (``which``: "Y" or "eval_targets") as a float (rows, d_out) matrix
        (one-hot for class labels)."""
        Y = self.Y if which == "Y" else self.eval_targets
        if Y.ndim == 1:
            if Y.max(initial=0) >= d_out:
                raise SpecError(f"class label {int(Y.max())} in {which} needs d_out > "
                                f"{int(Y.max())}, but the network has d_out = {d_out}")
            return np.eye(d_out)[Y]
        if Y.shape[1] != d_out:
            raise SpecError(f"{which} has {Y.shape[1]} columns but the network has "
                            f"d_out = {d_out}")
        return np.asarray(Y)

    def rows(self, t: int) -> slice:
        """The rows of X and Y that step t trains on."""
        return slice(t * self.batch_size, (t + 1) * self.batch_size)

    @property
    def training_inputs(self) -> np.ndarray:
        """The T·B rows of X that training consumes."""
        return self.X[: self.steps * self.batch_size]

    def kernel_points(self) -> np.ndarray:
        """Distinct training inputs (first-seen order), then the distinct new eval inputs.

        Kernel gradient descent (docs/theory.md §5.2) tracks f̊ exactly on these points.
        """
        return distinct_rows(np.vstack([self.training_inputs, self.eval_inputs]))


def kernel_points(routine: Routine) -> np.ndarray:
    """The points on which kernel gradient descent runs: :meth:`Routine.kernel_points`."""
    if not isinstance(routine, Routine):
        raise SpecError(f"routine must be a tp.Routine, got {type(routine).__name__}")
    return routine.kernel_points()
