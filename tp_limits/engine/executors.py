"""Run many independent engine calls (widths x seeds) on an executor.

``executor`` may be:

* ``None``: a local process pool (``spawn`` start method, one worker per
  core, BLAS pinned to one thread per worker so workers do not oversubscribe);
* ``"serial"``: run in this process, in order (debugging, tiny sweeps);
* any ``concurrent.futures.Executor`` — e.g. ``distributed.Client(...)
  .get_executor()`` to spread a sweep over a Dask cluster.

Results come back in task order whatever the completion order.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed

from ..errors import SpecError

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS")


@contextlib.contextmanager
def single_threaded_children():
    """Children spawned inside this block inherit one-thread BLAS settings."""
    saved = {k: os.environ.get(k) for k in _THREAD_VARS}
    os.environ.update({k: "1" for k in _THREAD_VARS})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_tasks(fn, tasks: list, executor=None, progress: bool = False, desc: str = "") -> list:
    """Return ``[fn(*task) for task in tasks]``, computed on ``executor``."""
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(tasks), desc=desc, unit="run")
    try:
        if executor == "serial":
            out = []
            for task in tasks:
                out.append(fn(*task))
                if bar is not None:
                    bar.update()
            return out
        if executor is None:
            with process_pool(max(1, min(len(tasks), os.cpu_count() or 1))) as pool:
                return _collect(pool, fn, tasks, bar)
        if not isinstance(executor, Executor):
            raise SpecError(f"executor must be None, 'serial' or a concurrent.futures.Executor, "
                            f"got {executor!r}")
        return _collect(executor, fn, tasks, bar)
    finally:
        if bar is not None:
            bar.close()


@contextlib.contextmanager
def process_pool(workers: int):
    """A spawn-context process pool whose workers run one BLAS and one Numba thread.

    Workers start lazily, so the one-thread environment is kept for the
    pool's whole life (the parent's own thread pools are already set up and
    do not read it again).
    """
    with single_threaded_children(), ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


def _collect(pool, fn, tasks, bar) -> list:
    futures = {pool.submit(fn, *task): i for i, task in enumerate(tasks)}
    out = [None] * len(tasks)
    for fut in as_completed(futures):
        out[futures[fut]] = fut.result()
        if bar is not None:
            bar.update()
    return out
