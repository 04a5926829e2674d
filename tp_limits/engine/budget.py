"""``time_budget``: a run priced beyond it is refused before any work, by one rule for every
engine (the prices: each engine's measured cost model, docs/performance.md "Time
estimates")."""
from __future__ import annotations

from ..errors import SpecError
from .progress import duration


def refuse_beyond_budget(estimate: float, budget: float | None, what: str,
                         shorter: str) -> None:
    """A SpecError when ``estimate`` seconds exceed ``budget`` (None: no limit): ``what`` the
    run and what drives its cost, ``shorter`` the changes that shorten it."""
    if budget is not None and estimate > budget:
        raise SpecError(f"{what} is estimated at {duration(estimate)} on two cores, beyond "
                        f"time_budget = {duration(budget)}; pass a larger time_budget, or "
                        f"time_budget=None to run it anyway ({shorter} shorten it)")
