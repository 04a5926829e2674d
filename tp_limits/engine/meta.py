"""The run metadata every Trajectory carries (``Trajectory.meta``).

:func:`problem_meta` describes the problem (network, routine), identical for
the finite and the limit engines, so two trajectories of the same problem
can be checked against each other (:func:`problem_mismatch`);
:func:`run_meta` adds how the run went.
"""
from __future__ import annotations

import numpy as np

from .._version import __version__
from ..spec.fields import MODEL_FIELDS
from ..spec.phases import phases_json

#: Keys of :func:`problem_meta`: two runs agree on all of them iff they solve the same problem.
PROBLEM_KEYS = (("parametrization", "L", "d_in", "d_out")
                + tuple(f.name for f in MODEL_FIELDS)
                + ("lr", "lr_schedule", "loss", "batch_size", "steps", "optimizer"))


def model_meta(net) -> dict:
    """The network's description as JSON: its size and every declared field
    (spec/fields.py: constants, initialization, skips, biases, normalization)."""
    return {"L": net.L, "d_in": net.d_in, "d_out": net.d_out,
            **{f.name: f.record(net) for f in MODEL_FIELDS}}


def problem_meta(problem) -> dict:
    net, r = problem.net, problem.routine
    return {"parametrization": repr(net.param), **model_meta(net),
            "lr": r.lr, "lr_schedule": None if r.lr_factors is None else r.lr_factors.tolist(),
            "loss": r.loss, "batch_size": r.batch_size, "steps": r.steps,
            "optimizer": str(problem.optimizer),
            "phases": phases_json(r.phase_spans)}


def run_meta(problem, status, wall_time_s: float, **engine) -> dict:
    """Problem description, engine settings (keyword arguments) and how the run ended
    (the JSON view of ``status``, a :class:`~tp_limits.engine.status.RunStatus`)."""
    meta = dict(engine)
    meta.update(problem_meta(problem))
    meta.update(status.to_json())
    meta.update({"wall_time_s": float(wall_time_s),
                 "versions": {"tp_limits": __version__, "numpy": np.__version__}})
    return meta


def problem_mismatch(problem, meta: dict) -> list:
    """The problem keys on which ``meta`` (a Trajectory's) differs from ``problem``: empty iff
    the trajectory was computed for this problem."""
    mine = problem_meta(problem)
    return [f"{k} = {meta.get(k, _BEFORE.get(k))!r} (here {mine[k]!r})" for k in PROBLEM_KEYS
            if meta.get(k, _BEFORE.get(k)) != mine[k]]


#: what a key added later meant in trajectories saved before it existed
_BEFORE = {f.name: f.before for f in MODEL_FIELDS}
