"""What every limit engine provides to :func:`~tp_limits.simulate_limit`.

An engine is constructed from (problem, classification, options): the
constructor checks the options that concern it and the memory it will need,
so that a constructed engine is ready to run.  ``run(on_step)`` returns a
:class:`~tp_limits.limit.result.LimitResult`; ``on_step(t)`` is called after
each completed step (``bar_total`` calls in all, for the progress bar).
"""
from __future__ import annotations

from ..engine.backend import get_backend
from ..errors import SpecError
from .result import LimitResult


class Engine:
    name: str = ""                  # meta["engine"]
    method: str = ""                # meta["method"]
    particles: int | None = None    # particles per replicate (Monte Carlo), for the rate shown
    #: whether the engine runs on ``options.backend`` (the particle engines); the exact
    #: and kernel engines work on small matrices and run on the host whatever it is
    on_backend: bool = False
    has_kernel: bool = False        # whether ``options.kernel`` means anything to the engine
    has_sampler: bool = False       # whether it draws initial particles by ``options.sampler``

    def __init__(self, problem, classification, options):
        self.problem, self.classification, self.options = problem, classification, options
        self.bar_total = problem.T
        self.info = {}              # engine-specific meta, merged into Trajectory.meta
        if options.kernel is not None and not self.has_kernel:
            raise SpecError(f"kernel={options.kernel!r} chooses the sweep of the one-hidden-"
                            f"layer particle engine; {self.name or type(self).__name__} has "
                            "none (leave kernel unset)")
        if options.sampler not in (None, "antithetic") and not self.has_sampler:
            raise SpecError(
                f"sampler={options.sampler!r} chooses how the Monte Carlo particle engines "
                f"draw their Gaussians; {self.name or type(self).__name__} draws none "
                "(leave sampler unset)")
        if options.sampler == "qmc" and options.replicates < 2:
            raise SpecError("sampler='qmc' needs replicates >= 2: its error bar is the "
                            "spread of independent scramblings (one run's particles are "
                            "not independent, so their batch means are no error bar)")
        self.backend = options.backend if self.on_backend else "numpy"     # meta["backend"]
        if self.backend != "numpy":
            get_backend(self.backend)       # CuPy and a device present, before any work
            if options.workers > 1:
                raise SpecError(f"workers = {options.workers} with backend={self.backend!r}: "
                                "one device runs the replicates one after another; use "
                                "workers=1 (or an executor whose workers each own a device)")

    @property
    def b(self):
        """The array backend of the run (built on use: engines travel to worker processes)."""
        return get_backend(self.backend)

    def run(self, on_step) -> LimitResult:
        raise NotImplementedError


class FeatureLearningEngine(Engine):
    """An engine of the feature-learning limit: it reads the switched constants."""

    def __init__(self, problem, classification, options):
        super().__init__(problem, classification, options)
        self.const = problem.net.limit_constants(problem.routine.lr)
