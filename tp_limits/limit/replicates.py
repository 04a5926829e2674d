"""Independent replicates of a Monte Carlo limit engine, and their combination.

:func:`run_replicates` runs one engine R times from seeds spawned off one
``SeedSequence`` (so the result does not depend on how the runs are spread
over processes), stops at the first interrupted or diverged run, and
:func:`combine` turns the runs into mean ± standard error over replicates.
A single run keeps the engine's own (batch-means) standard error.
"""
from __future__ import annotations

import numpy as np

from ..engine.executors import default_pool_is_safe, process_pool, submit_all, terminate
from .result import CoordinateMoments, LimitResult


def combine(runs: list, replicates: int) -> LimitResult:
    """Mean over independent runs; f_eval_se = their sample standard deviation / √R."""
    first = runs[0]
    mean = lambda key: np.mean([getattr(r, key) for r in runs], axis=0)  # noqa: E731
    return LimitResult(
        f_eval=mean("f_eval"),
        f_eval_se=np.std([r.f_eval for r in runs], axis=0, ddof=1) / np.sqrt(len(runs)),
        f_train=mean("f_train"), loss=mean("loss"),
        completed=min(r.completed for r in runs),
        interrupted=any(r.interrupted for r in runs) or len(runs) < replicates,
        diverged=next((r.diverged for r in runs if r.diverged), None),
        moments=None if first.moments is None else CoordinateMoments.mean(
            [r.moments for r in runs]),
        se_method=f"standard error over {len(runs)} independent replicates",
        se_dof=len(runs) - 1,
        info={**first.info, "replicates_completed": len(runs)},
        extras=_combine_extras(runs))


def _combine_extras(runs: list) -> dict:
    """Each extra estimate's mean over the runs, and its standard error as ``<name>_se``."""
    out = {}
    for key in runs[0].extras:
        values = np.array([r.extras[key] for r in runs])
        out[key] = values.mean(axis=0)
        out[key + "_se"] = values.std(axis=0, ddof=1) / np.sqrt(len(runs))
    return out


def _on_pool(pool, task, seeds, on_done):
    """``task(ss)`` for each seed sequence on ``pool`` -> (finished runs in order, interrupted).

    Ctrl-C reaches only this process (local workers ignore it): the replicates
    that finished are kept and the others cancelled.
    """
    runs = []
    futures = submit_all(pool, task, [(ss,) for ss in seeds])
    try:
        if futures.interrupted:
            raise KeyboardInterrupt
        for fut in futures:
            runs.append(fut.result())
            on_done()
    except KeyboardInterrupt:
        for fut in futures:
            fut.cancel()
        return runs, True
    return runs, False


def run_replicates(run_one, seed: int, replicates: int, task=None, workers: int = 1,
                   on_done=lambda: None, executor=None) -> LimitResult | None:
    """Run ``run_one(rng)`` ``replicates`` times and combine the runs.

    With a picklable ``task(seed_sequence)``, the replicates can run elsewhere:
    on ``executor`` (a concurrent.futures Executor, e.g. a Dask client's) or,
    with ``workers > 1``, in that many local processes (each with one BLAS and
    Numba thread); ``on_done`` is called as each finishes.  The seeds are the
    same either way, so the result does not depend on where the replicates ran.
    None when Ctrl-C came before any replicate finished.
    """
    seeds = np.random.SeedSequence(seed).spawn(replicates)
    runs, interrupted = [], False
    remote = executor is not None and executor != "serial"
    if task is not None and replicates > 1 and remote:
        runs, interrupted = _on_pool(executor, task, seeds, on_done)
    elif task is not None and replicates > 1 and workers > 1 and \
            default_pool_is_safe("the replicates"):
        with process_pool(min(workers, replicates)) as pool:
            runs, interrupted = _on_pool(pool, task, seeds, on_done)
            if interrupted:
                terminate(pool)
    else:
        for ss in seeds:
            try:
                runs.append(run_one(np.random.default_rng(ss)))
            except KeyboardInterrupt:
                # Ctrl-C while a replicate drew its particles, before its own step loop
                # (which keeps partial work) had started: keep the replicates already done
                interrupted = True
                break
            if runs[-1].interrupted or runs[-1].diverged:
                break
    bad = [i for i, r in enumerate(runs) if r.interrupted or r.diverged]
    runs = runs[: bad[0] + 1] if bad else runs
    if not runs:
        return None                        # interrupted before any replicate finished
    out = runs[0] if len(runs) == 1 else combine(runs, replicates)
    out.interrupted = out.interrupted or interrupted
    return out
