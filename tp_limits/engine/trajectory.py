"""The one result type of every engine: :class:`Trajectory`.

It lives with the engines' shared plumbing, not in the analysis layer,
because the engines construct it and engines never import the analysis layer.

| field       | shape                  | meaning                                       |
|-------------|------------------------|-----------------------------------------------|
| f_eval      | (T+1, E, d_out)        | output on evaluation inputs, before step 0 .. after step T-1 |
| f_eval_se   | same, or None          | Monte Carlo standard error (limit engines); its degrees of freedom in status.se_dof |
| f_train     | (T, B, d_out)          | output on the batch of step t, before its update |
| loss        | (T,)                   | mean training loss of step t                  |
| stats       | name -> array          | per-layer coordinate statistics (leading axis: t = 0..T) |
| status      | RunStatus              | completed steps, interrupted, divergence, SE dof |
| meta        | dict (JSON-able)       | engine, width/particles, seed, versions, ...; status as JSON |
| weights     | Weights or None        | finite nets with keep_weights=True: W^l before and after |
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ..errors import TPError
from .npz import read_npz, write_npz
from .status import Divergence, RunStatus


@dataclass(frozen=True)
class Weights:
    """The weights W^1..W^{L+1} of a finite network (W-space, docs/theory.md §7.1):
    ``initial`` before the first step, ``final`` after the last completed one; with biases
    (docs/theory.md §13), ``bias_initial`` and ``bias_final`` map each biased layer l
    (0-based; L is the readout's) to its (rows, 1) bias."""

    initial: tuple
    final: tuple
    bias_initial: dict = field(default_factory=dict)
    bias_final: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Trajectory:
    f_eval: np.ndarray
    f_train: np.ndarray
    loss: np.ndarray
    stats: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    f_eval_se: np.ndarray | None = None
    status: RunStatus | None = None
    weights: Weights | None = None

    def __post_init__(self):
        """``status`` from ``meta`` when not given (a Trajectory built by hand or loaded);
        ``meta`` then holds the JSON view of ``status`` in every case."""
        status = self.status
        if status is None:
            status = RunStatus.from_meta(self.meta, len(self.loss))
        elif not isinstance(status, RunStatus):
            raise TPError(f"status must be a RunStatus, got {type(status).__name__}")
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "meta", {**self.meta, **status.to_json()})

    @property
    def steps(self) -> int:
        """Number of completed training steps T."""
        return len(self.loss)

    @property
    def completed_steps(self) -> int:
        return self.status.completed_steps

    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C stopped the run (it holds the steps before)."""
        return self.status.interrupted

    @property
    def divergence(self) -> Divergence | None:
        """Where the run diverged (step, layer, quantity, size), or None."""
        return self.status.divergence

    @property
    def diverged(self) -> bool:
        return self.status.diverged

    @property
    def se_dof(self):
        """Degrees of freedom of ``f_eval_se``; None when it is not a sampling standard
        error (exact engines, quadrature) or there is none (finite networks)."""
        return self.status.se_dof

    def f_eval_ci(self, level: float = 0.95):
        """(low, high): a two-sided confidence interval for the limit's f_eval.

        f_eval ± t_ν((1 + level)/2) · f_eval_se with ν = ``se_dof`` degrees of
        freedom (docs/theory.md §8.1): replicates R give ν = R − 1, so 8 replicates
        widen a nominal 95 % interval to ±2.36 SE.  Without a sampling error
        (ν = None) the interval is f_eval ± f_eval_se: exact engines report 0,
        quadrature its error estimate.
        """
        if self.f_eval_se is None:
            raise TPError("this trajectory has no standard error (a finite network): its "
                          "spread over seeds is the error bar")
        if not (isinstance(level, (int, float)) and 0 < level < 1):
            raise TPError(f"level = {level!r} must be a number strictly between 0 and 1")
        dof = self.se_dof
        if dof is None:
            q = 1.0
        elif dof < 1:
            raise TPError("a standard error with 0 degrees of freedom gives no interval")
        else:
            from scipy.stats import t as student
            q = float(student.ppf(0.5 + level / 2, dof))
        return self.f_eval - q * self.f_eval_se, self.f_eval + q * self.f_eval_se

    def save(self, path) -> None:
        """Write to ``path`` (.npz with the meta as JSON inside), atomically: a temporary
        file in the same folder is renamed into place, so ``path`` never holds half a file."""
        write_npz(path, self.to_arrays(), "a Trajectory")

    def to_arrays(self) -> dict:
        """The arrays :meth:`save` writes (the meta as a JSON string array)."""
        arrays = {"f_eval": self.f_eval, "f_train": self.f_train, "loss": self.loss,
                  "meta_json": np.array(json.dumps(self.meta, default=_jsonable))}
        if self.f_eval_se is not None:
            arrays["f_eval_se"] = self.f_eval_se
        for k, v in self.stats.items():
            arrays[f"stats/{k}"] = v
        if self.weights is not None:
            for when in ("initial", "final"):
                for l, W in enumerate(getattr(self.weights, when)):
                    arrays[f"weights/{when}/{l}"] = W
                for l, b in getattr(self.weights, f"bias_{when}").items():
                    arrays[f"weights/bias_{when}/{l}"] = b
        return arrays

    @classmethod
    def load(cls, path) -> "Trajectory":
        """Read a Trajectory written by :meth:`save`; anything else is a TPError."""
        return cls.from_arrays(read_npz(path, "a Trajectory", "Trajectory.save"), repr(path))

    @classmethod
    def from_arrays(cls, data: dict, where: str = "the arrays") -> "Trajectory":
        """The Trajectory of :meth:`to_arrays`' ``data``, checked; ``where`` names its
        source in the errors."""
        missing = [k for k in ("f_eval", "f_train", "loss", "meta_json") if k not in data]
        if missing:
            raise TPError(f"{where} is an .npz file but not a Trajectory (missing "
                          f"{', '.join(missing)})")
        try:
            meta = json.loads(str(data["meta_json"]))
        except (json.JSONDecodeError, TypeError):
            raise TPError(f"{where}: its metadata are not valid JSON") from None
        for key, ndim in (("f_eval", 3), ("f_train", 3), ("loss", 1), ("f_eval_se", 3)):
            a = data.get(key)
            if a is not None and (a.ndim != ndim or a.dtype.kind not in "fiu"):
                raise TPError(f"{where} is not a Trajectory: its {key} is a {a.ndim}-D "
                              f"{a.dtype} array (a Trajectory's is {ndim}-D numeric)")
        if len(data["loss"]) != len(data["f_train"]) or len(data["f_eval"]) < len(data["loss"]):
            raise TPError(f"{where} is not a Trajectory: {len(data['loss'])} losses, "
                          f"{len(data['f_train'])} training outputs and {len(data['f_eval'])} "
                          "evaluations do not describe one run")
        stats = {k[len("stats/"):]: v for k, v in data.items() if k.startswith("stats/")}
        layers = sum(k.startswith("weights/initial/") for k in data)
        def biases(when):
            key = f"weights/bias_{when}/"
            return dict(sorted((int(k[len(key):]), v) for k, v in data.items()
                               if k.startswith(key)))
        weights = (Weights(*(tuple(data[f"weights/{when}/{l}"] for l in range(layers))
                             for when in ("initial", "final")),
                           biases("initial"), biases("final")) if layers else None)
        return cls(f_eval=data["f_eval"], f_train=data["f_train"], loss=data["loss"],
                   stats=stats, meta=meta, f_eval_se=data.get("f_eval_se"), weights=weights)


def _jsonable(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)
