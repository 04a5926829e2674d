"""Progress bars (tqdm) for the step loops, shown only when asked for; durations as a
person reads them."""
from __future__ import annotations

import contextlib
import sys
import threading
import time


@contextlib.contextmanager
def progress_bar(enabled: bool, total: int, desc: str, per_step: float | None = None,
                 rate_unit: str = "particle-steps/s"):
    """Yield ``on_step(t)``: advances a tqdm bar by one step (a no-op when disabled).

    With ``per_step`` (e.g. the particle count) the bar also shows the rate
    per_step · steps / elapsed seconds in ``rate_unit``.
    """
    if not enabled:
        yield lambda t: None
        return
    from tqdm.auto import tqdm
    bar = tqdm(total=total, desc=desc, unit="step")
    started = time.perf_counter()

    def on_step(t):
        bar.update(1)
        if per_step:
            rate = per_step * bar.n / max(time.perf_counter() - started, 1e-9)
            bar.set_postfix_str(f"{rate:.3g} {rate_unit}", refresh=False)
    try:
        yield on_step
    finally:
        bar.close()


@contextlib.contextmanager
def step_notice(doing: str, done: str, after: float = 1.0):
    """Say on stderr what a long step without a progress bar is doing (a compile, one big
    factorization) when it takes more than ``after`` seconds, and how long it took: a
    silent minute looks like a hang."""
    started = time.perf_counter()
    shown = threading.Event()

    def show():
        shown.set()
        print(f"tp_limits: {doing}...", file=sys.stderr, flush=True)
    timer = threading.Timer(after, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if shown.is_set():
            print(f"tp_limits: {done} in {time.perf_counter() - started:.0f} s",
                  file=sys.stderr, flush=True)


def compile_notice(what: str, after: float = 3.0):
    """:func:`step_notice` for a first call of a Numba kernel: a compilation, done once and
    then cached on disk.  ``after`` lies between the two things a first call in a new
    process can be: loading the cached kernel (0.2–0.6 s measured on two busy cores) and
    compiling it (20–80 s), so a cache load says nothing."""
    return step_notice(f"compiling {what} (first use; cached on disk afterwards)",
                       f"compiled {what}", after)


def duration(seconds: float) -> str:
    """``42 s``, ``17 min``, ``2.5 h``: an estimate's size, not its digits."""
    if seconds < 1:
        return "under 1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
