"""The one memory guard: refuse, before allocating, work that would not fit.

Engines compute what a run needs from its sizes alone (no allocation) and
call :func:`require_memory`; the refusal says how much was needed, how much
may be used (``USABLE`` of what the backend reports free) and, where the
caller can compute it, the largest size that would fit.
"""
from __future__ import annotations

from ..errors import MemoryBudgetError
from .backend import Backend, numpy_backend

#: Fraction of the free memory a run may plan to use (the rest is headroom for temporaries).
USABLE = 0.8


def usable_bytes(backend: Backend | None = None) -> float:
    return USABLE * (backend or numpy_backend()).available_bytes()


def require_memory(need: float, what: str, backend: Backend | None = None,
                   largest: str = "", advice: str = "") -> None:
    """Raise MemoryBudgetError when ``need`` bytes exceed the usable memory of ``backend``."""
    have = usable_bytes(backend)
    if need > have:
        where = (backend or numpy_backend()).name
        raise MemoryBudgetError(
            f"{what} need about {need / 2**30:.2f} GiB but only {have / 2**30:.2f} GiB may be "
            f"used ({where})" + (f"; {largest}" if largest else "")
            + (f"; {advice}" if advice else ""))


def require_particles(N: int, bytes_per_particle: float, what: str,
                      backend: Backend | None = None, fixed: float = 0.0,
                      fixed_what: str = "", fixed_advice: str = "shorten the run",
                      usable=lambda k: k) -> None:
    """The guard for particle engines: memory N · bytes_per_particle + ``fixed`` (arrays
    whose size does not depend on N, ``fixed_what``; ``fixed_advice`` says how to shrink
    them), so name the largest N that fits — ``usable(k)``, the largest count at most k
    that the engine runs as given (its sampler's rounding: limit/sampling.py
    ``fitting_count``), so the advice is not refused again."""
    room = usable_bytes(backend) - fixed
    if room <= 0:
        require_memory(fixed + N * bytes_per_particle,
                       f"{fixed_what or 'the fixed arrays'} alone", backend,
                       advice=f"no particle count fits beside them: {fixed_advice}")
    fit = usable(int(room / bytes_per_particle))
    require_memory(N * bytes_per_particle + fixed, f"{N:,} particles ({what})"
                   + (f" and {fixed_what}" if fixed else ""), backend,
                   largest=f"at most {fit:,} particles fit")
