"""What every limit engine provides to :func:`~tp_limits.simulate_limit`.

An engine is constructed from (problem, classification, options): the
constructor checks the options that concern it and the memory it will need,
so that a constructed engine is ready to run.  ``run(on_step)`` returns a
:class:`~tp_limits.limit.result.LimitResult`; ``on_step(t)`` is called after
each completed step (``bar_total`` calls in all, for the progress bar).
"""
from __future__ import annotations

from .result import LimitResult


class Engine:
    name: str = ""                  # meta["engine"]
    method: str = ""                # meta["method"]
    particles: int | None = None    # particles per replicate (Monte Carlo), for the rate shown

    def __init__(self, problem, classification, options):
        self.problem, self.classification, self.options = problem, classification, options
        self.bar_total = problem.T
        self.info = {}              # engine-specific meta, merged into Trajectory.meta

    def run(self, on_step) -> LimitResult:
        raise NotImplementedError


class FeatureLearningEngine(Engine):
    """An engine of the feature-learning limit: it reads the switched constants."""

    def __init__(self, problem, classification, options):
        super().__init__(problem, classification, options)
        self.const = problem.net.limit_constants(problem.routine.lr)
