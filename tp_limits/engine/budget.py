"""``time_budget``: a run priced beyond it is refused before any work, by one rule for every
engine (the prices: each engine's measured cost model, docs/performance.md "Time
estimates")."""
from __future__ import annotations

from ..errors import SpecError
from .progress import duration


def refuse_beyond_budget(estimate: float, budget: float | None, what: str,
                         shorter: str, fits: str = "") -> None:
    """A SpecError when ``estimate`` seconds exceed ``budget`` (None: no limit): ``what`` the
    run and what drives its cost, ``shorter`` the changes that shorten it, ``fits`` (when
    given) a setting that fits the budget."""
    if budget is not None and estimate > budget:
        raise SpecError(f"{what} is estimated at {duration(estimate)} on two cores, beyond "
                        f"time_budget = {duration(budget)}; pass a larger time_budget, or "
                        f"time_budget=None to run it anyway ({shorter} shorten it"
                        + (f"; {fits}" if fits else "") + ")")


def particles_within(price, particles: int, budget: float | None, usable) -> int:
    """The largest particle count, as ``usable`` rounds it (the sampler's rule), whose
    ``price(count)`` in seconds fits ``budget``; 0 when not even two particles do.  Prices
    grow about linearly in the particles, so the first guess is the proportional one."""
    if budget is None:
        return particles
    k = usable(int(particles * budget / max(price(particles), 1e-300)))
    while k >= 2 and price(k) > budget:
        k = usable(int(k * 0.8))
    return k if k >= 2 else 0
