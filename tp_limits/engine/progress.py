"""Progress bars (tqdm) for the step loops, shown only when asked for."""
from __future__ import annotations

import contextlib
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
