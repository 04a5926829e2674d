"""Bookkeeping shared by the Monte Carlo engines (one hidden layer and deep).

* :func:`check_memory`: refuse, before allocating, a particle count whose
  per-particle storage would not fit, naming the largest count that does;
* :func:`run_replicates`: independent runs from one seed (SeedSequence
  spawning), stopped early by Ctrl-C or a divergence, combined into mean ±
  standard error over replicates — or, for a single run, that run with its
  own (batch-means) standard error.
"""
from __future__ import annotations

import numpy as np

from ..backend import numpy_backend
from ..errors import MemoryBudgetError
from ..parallel import process_pool

#: Result arrays averaged over replicates.
AVERAGED = ("f_eval", "f_train", "loss", "h2", "dh2", "x2", "dx2", "fk")


def check_memory(N: int, bytes_per_particle: float, what: str) -> None:
    have = 0.8 * numpy_backend().available_bytes()
    if N * bytes_per_particle > have:
        raise MemoryBudgetError(
            f"{N:,} particles need about {N * bytes_per_particle / 2**30:.2f} GiB for {what} "
            f"but only {have / 2**30:.2f} GiB may be used; at most "
            f"{int(have / bytes_per_particle):,} particles fit")


def combine_replicates(runs: list, replicates: int) -> dict:
    """Mean over independent runs; f_eval_se = their spread / √R."""
    res = dict(runs[0])
    for key in AVERAGED:
        res[key] = np.mean([r[key] for r in runs], axis=0)
    res["se"] = np.std([r["f_eval"] for r in runs], axis=0, ddof=1) / np.sqrt(len(runs))
    res["completed"] = min(r["completed"] for r in runs)
    res["interrupted"] = any(r["interrupted"] for r in runs) or len(runs) < replicates
    return res


def _in_processes(task, seeds, workers: int, on_done) -> list:
    """``task(ss)`` for each seed sequence in a process pool; Ctrl-C keeps what finished.

    The workers receive the same Ctrl-C, stop at their own step boundary and
    return their partial runs, which are collected like finished ones.
    """
    runs = []
    with process_pool(workers) as pool:
        futures = [pool.submit(task, ss) for ss in seeds]
        try:
            for fut in futures:
                runs.append(fut.result())
                on_done()
        except KeyboardInterrupt:
            runs += [f.result() for f in futures[len(runs):] if not f.cancelled()]
    return runs


def run_replicates(run_one, seed: int, replicates: int, single_run_se: str, task=None,
                   workers: int = 1, on_done=lambda: None):
    """Run ``run_one(rng)`` ``replicates`` times; returns (result, meta additions).

    ``single_run_se`` describes the standard error a lone run reports itself.
    With ``workers > 1`` and a picklable ``task(seed_sequence)``, replicates run
    in that many processes (each with one BLAS and Numba thread); ``on_done``
    is called as each finishes.  The seeds are the same either way, so the
    result does not depend on ``workers``.
    """
    seeds = np.random.SeedSequence(seed).spawn(replicates)
    runs = []
    if workers > 1 and replicates > 1 and task is not None:
        runs = _in_processes(task, seeds, min(workers, replicates), on_done)
        bad = [i for i, r in enumerate(runs) if r["interrupted"] or r["diverged"]]
        runs = runs[: bad[0] + 1] if bad else runs
    else:
        for ss in seeds:
            runs.append(run_one(np.random.default_rng(ss)))
            if runs[-1]["interrupted"] or runs[-1]["diverged"]:
                break
    if len(runs) == 1:
        return runs[0], {"se_method": single_run_se}
    return combine_replicates(runs, replicates), {
        "replicates_completed": len(runs),
        "se_method": f"standard error over {len(runs)} independent replicates"}
