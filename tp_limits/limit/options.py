"""The options of :func:`~tp_limits.simulate_limit`, checked once, before any work.

:class:`LimitOptions` has one field per option of the one table
(engine/options.py ``LIMIT_OPTIONS``: name, default, check, doc);
``LimitOptions.of(**given)`` checks each given value and refuses unknown names.
Whether an option fits the problem (say, ``method="quadrature"`` on a deep
network) is checked by the engine that :mod:`tp_limits.limit.select` picks, also
before any work.
"""
from __future__ import annotations

from ..engine.options import LIMIT_OPTIONS, option_record
from ..engine.steps import eval_steps
from .sampling import choose_sampler, sampler_count


class _Derived:
    """What the engines derive from the options, each by one rule."""

    @property
    def record_stats(self) -> bool:
        return "stats" in self.record

    def eval_steps(self, T: int) -> tuple:
        """The steps whose f̊ is evaluated: every ``eval_every``-th, and always 0 and T."""
        return eval_steps(T, self.eval_every)

    @property
    def sampler_used(self) -> str:
        """The Monte Carlo sampler: the one asked for, else 'qmc' with replicates (their
        spread is its error bar), else 'antithetic'."""
        return choose_sampler(self.sampler, self.replicates)

    @property
    def particle_count(self) -> int:
        """The particles a Monte Carlo run uses: ``particles`` as the sampler needs it (an
        even count for antithetic pairs, a power of two for Sobol' points)."""
        return sampler_count(self.particles, self.sampler_used)


LimitOptions = option_record("LimitOptions", LIMIT_OPTIONS, "simulate_limit", __name__,
                             bases=(_Derived,))
