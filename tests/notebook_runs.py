"""The example notebooks' runs, started in the background when the session has collected
their tests (conftest.pytest_collection_finish).

A notebook runs in its own kernel process, so on the CI's two cores it can overlap with
the rest of the suite: they run one at a time, each kernel with one thread for BLAS,
OpenMP and Numba (the suite keeps the other core), in a temporary working directory.  A
test asks for its notebook's run with :func:`result`, which re-raises the notebook's
error; a notebook that was not started (its test selected some other way) runs then.
"""
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

import nbformat
from nbclient import NotebookClient

#: the kernels' environment: one thread each, so a kernel and the suite share two cores
ONE_THREAD = {k: "1" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                               "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
_RUNS = {}
_POOL = []


def run(path) -> None:
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": tmp}}).execute(
            env={**os.environ, "MPLBACKEND": "Agg", **ONE_THREAD})


def start(paths) -> None:
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notebooks")
    _POOL.append(pool)
    for path in paths:
        _RUNS[str(path)] = pool.submit(run, path)


def result(path) -> None:
    """Wait for the run of ``path`` (re-raising its error), or run it now."""
    future = _RUNS.get(str(path))
    if future is None:
        run(path)
    else:
        future.result()


def stop() -> None:
    """Drop the runs not yet started (an interrupted or failed session)."""
    for pool in _POOL:
        pool.shutdown(wait=False, cancel_futures=True)
