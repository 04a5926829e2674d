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


def run_replicates(run_one, seed: int, replicates: int, single_run_se: str):
    """Run ``run_one(rng)`` ``replicates`` times; returns (result, meta additions).

    ``single_run_se`` describes the standard error a lone run reports itself.
    """
    runs = []
    for ss in np.random.SeedSequence(seed).spawn(replicates):
        runs.append(run_one(np.random.default_rng(ss)))
        if runs[-1]["interrupted"] or runs[-1]["diverged"]:
            break
    if len(runs) == 1:
        return runs[0], {"se_method": single_run_se}
    return combine_replicates(runs, replicates), {
        "replicates_completed": len(runs),
        "se_method": f"standard error over {len(runs)} independent replicates"}
