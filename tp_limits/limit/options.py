"""The options of :func:`~tp_limits.simulate_limit`, checked once, before any work.

:class:`LimitOptions` holds every option with its default; :meth:`LimitOptions.of`
checks each value (the rules shared with the finite engine come from
:mod:`tp_limits.engine.options`).  Whether an option fits the problem (say,
``method="quadrature"`` on a deep network) is checked by the engine that
:mod:`tp_limits.limit.select` picks, also before any work.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..engine.backend import BACKENDS
from ..engine.options import (
    check_divergence_bound,
    check_dtype,
    check_executor,
    check_on_divergence,
    check_progress,
    check_record,
    check_seed,
)
from ..engine.steps import DIVERGENCE_BOUND
from ..errors import SpecError
from ..spec.checks import check_bool, check_choice, check_int
from .sampling import SAMPLERS, SOURCES

METHODS = ("exact", "monte_carlo", "quadrature")
#: one hidden layer; None picks 'numba' on the host, 'cuda' (or the array twin for wide
#: inputs) on a GPU
KERNELS = ("numba", "numpy", "cuda")
BACKPROP = ("exact", "decoupled")
ZDOT = ("stein", "tangent")
F0 = ("sample", "zero")
RECORD = ("stats",)
#: Counts beyond this cannot finish on any machine this library targets (particle
#: counts are bounded by the memory guard instead, which names the largest that fits).
MAX_REPLICATES = 10 ** 5


@dataclass(frozen=True)
class LimitOptions:
    particles: int = 100_000
    seed: int = 0
    replicates: int = 8
    method: str | None = None
    eval_every: int = 1
    progress: bool = False
    dtype: np.dtype = np.dtype(np.float64)
    record: tuple = RECORD
    kernel: str | None = None
    f0: object = "sample"
    samples: int = 64
    backprop: str = "exact"
    on_divergence: str = "raise"
    zdot: str = "stein"
    workers: int = 1
    divergence_bound: float | None = DIVERGENCE_BOUND
    executor: object = None
    partners: int | None = None
    debias_partners: bool = True
    backend: str = "numpy"
    random: str = "backend"
    sampler: str | None = None        # None: 'qmc' where it is the default, else 'antithetic'

    @classmethod
    def of(cls, **given) -> "LimitOptions":
        """Check every given option; unknown names and bad values raise SpecError."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise SpecError(f"unknown option(s) {unknown} of simulate_limit; "
                            f"valid: {sorted(names)}")
        o = dict(given)
        if "particles" in o:
            o["particles"] = check_int(o["particles"], "particles", 2)
        if "seed" in o:
            o["seed"] = check_seed(o["seed"])
        if "replicates" in o:
            o["replicates"] = check_int(o["replicates"], "replicates", 1, MAX_REPLICATES)
        if o.get("method") is not None:
            check_choice(o["method"], "method", METHODS)
        if "eval_every" in o:
            o["eval_every"] = check_int(o["eval_every"], "eval_every")
        if "progress" in o:
            o["progress"] = check_progress(o["progress"])
        if "dtype" in o:
            o["dtype"] = check_dtype(o["dtype"])
        if "record" in o:
            o["record"] = check_record(o["record"], RECORD)
        if o.get("kernel") is not None:
            check_choice(o["kernel"], "kernel", KERNELS)
        if "backend" in o:
            check_choice(o["backend"], "backend", BACKENDS)
        if "random" in o:
            check_choice(o["random"], "random", SOURCES)
        if o.get("sampler") is not None:
            check_choice(o["sampler"], "sampler", SAMPLERS)
        if "f0" in o and isinstance(o["f0"], str):
            check_choice(o["f0"], "f0", F0)
        if "samples" in o:
            o["samples"] = check_int(o["samples"], "samples", 1, MAX_REPLICATES)
        if "backprop" in o:
            check_choice(o["backprop"], "backprop", BACKPROP)
        if "on_divergence" in o:
            check_on_divergence(o["on_divergence"])
        if "zdot" in o:
            check_choice(o["zdot"], "zdot", ZDOT)
        if "workers" in o:
            o["workers"] = check_int(o["workers"], "workers", 1, 4096)
        if "executor" in o:
            o["executor"] = check_executor(o["executor"])
        if o.get("partners") is not None:
            o["partners"] = check_int(o["partners"], "partners", 2)
        if "debias_partners" in o:
            o["debias_partners"] = check_bool(o["debias_partners"], "debias_partners")
        if "divergence_bound" in o:
            o["divergence_bound"] = check_divergence_bound(o["divergence_bound"])
        return cls(**o)

    @property
    def record_stats(self) -> bool:
        return "stats" in self.record

    def eval_steps(self, T: int) -> tuple:
        """The steps whose f̊ is evaluated: every ``eval_every``-th, and always 0 and T."""
        return tuple(sorted(set(range(0, T + 1, self.eval_every)) | {T}))
