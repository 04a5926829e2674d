"""Run many independent engine calls (widths x seeds) on an executor.

``executor`` may be:

* ``None``: a local process pool (``spawn`` start method, one worker per
  core, BLAS pinned to one thread per worker so workers do not oversubscribe);
  from the top level of a script without an ``if __name__ == "__main__":``
  guard a pool would re-run the script in every worker, so the work then runs
  serially and a warning says how to get the pool;
* ``"serial"``: run in this process, in order (debugging, tiny sweeps);
* any ``concurrent.futures.Executor`` — e.g. ``distributed.Client(...)
  .get_executor()`` to spread a sweep over a Dask cluster.

Results come back in task order whatever the completion order.  Ctrl-C
stops the whole run within seconds: queued tasks are cancelled, local
workers (which ignore SIGINT themselves) are terminated, and
:class:`Interrupted` carries the results that had finished.
"""
from __future__ import annotations

import ast
import contextlib
import multiprocessing
import os
import pickle
import signal
import threading
import sys
import warnings
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed

from ..errors import SpecError
from .options import check_executor

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_tasks`: ``results`` holds the finished results in task
    order, None where a task had not finished."""

    def __init__(self, results: list):
        super().__init__(f"interrupted: {sum(r is not None for r in results)} of "
                         f"{len(results)} runs had finished")
        self.results = results


class WorkersLost(Interrupted):
    """A worker process died under :func:`run_tasks` (killed, out of memory; a broken
    local pool, Dask's KilledWorker): the study stops as on Ctrl-C, keeping ``results``
    that had finished, and ``cause`` says what happened."""

    def __init__(self, results: list, cause: BaseException):
        super().__init__(results)
        self.cause = cause


#: exceptions of a future that mean its worker was lost, not that the task failed
_LOST = ("BrokenProcessPool", "BrokenExecutor", "KilledWorker")


def _worker_lost(exc: BaseException) -> bool:
    return any(c.__name__ in _LOST for c in type(exc).__mro__)


def completed(traj):
    """A run inside a study: a Ctrl-C that cut it short (the engines return the partial
    run) stops the whole study instead of letting the next run start."""
    if traj.interrupted:
        raise KeyboardInterrupt
    return traj


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


def _ignore_sigint():
    """Pool workers leave Ctrl-C to the parent, which cancels and terminates them; and
    they die with it, even when it is killed outright (SIGKILL runs no clean-up)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()


def _die_with_parent() -> None:
    """Linux: ask the kernel to kill this process when its parent dies (PR_SET_PDEATHSIG);
    elsewhere nothing (the parent's clean-up on Ctrl-C still stops the workers)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)                  # 1 = PR_SET_PDEATHSIG
        if os.getppid() == 1:                          # the parent died before the call
            os._exit(1)
    except (OSError, AttributeError):
        pass


def unguarded_script() -> bool:
    """True when called, directly or not, from the top level of a ``__main__`` script
    outside an ``if __name__ == "__main__":`` block: a spawned worker would run it again."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not os.path.exists(path):
        return False                      # interactive, Jupyter, python -c
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is vars(main):
            break
        frame = frame.f_back
    if frame is None:
        return False                      # not reached from the script's own top level
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    line = frame.f_lineno
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_guard(node.test) and \
                node.lineno <= line <= node.end_lineno:
            return False
    return True


def _is_main_guard(test) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def default_pool_is_safe(what: str) -> bool:
    """Whether the default process pool may start here; warns once per call when it may not."""
    if not unguarded_script():
        return True
    warnings.warn(
        f"tp_limits: running {what} serially: a process pool started from the top level of "
        "a script re-runs the script in every worker. Put the call under "
        "`if __name__ == \"__main__\":` to use every core.", RuntimeWarning, stacklevel=3)
    return False


def run_tasks(fn, tasks: list, executor=None, progress: bool = False, desc: str = "") -> list:
    """Return ``[fn(*task) for task in tasks]``, computed on ``executor``.

    Ctrl-C raises :class:`Interrupted` with the finished results, in order.
    """
    executor = check_executor(executor)
    if executor is None and not default_pool_is_safe(desc or "the runs"):
        executor = "serial"
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(tasks), desc=desc, unit="run")
    try:
        if executor == "serial":
            out = [None] * len(tasks)
            try:
                for i, task in enumerate(tasks):
                    out[i] = fn(*task)
                    if bar is not None:
                        bar.update()
            except KeyboardInterrupt:
                raise Interrupted(out) from None
            return out
        if uses_worker_processes(executor) and tasks:
            check_picklable(executor, task=(fn, tasks[0]))       # a refusal, not a hang
        if executor is None:
            with process_pool(max(1, min(len(tasks), os.cpu_count() or 1))) as pool:
                return _collect(pool, fn, tasks, bar)
        return _collect(executor, fn, tasks, bar)
    finally:
        if bar is not None:
            bar.close()


@contextlib.contextmanager
def executor_session(executor, what: str):
    """One executor for a study that calls :func:`run_tasks` in several rounds (a search
    sends a few runs at a time): the default pool starts once for all of them, not once
    per round.  Yields 'serial', the default pool, or ``executor`` itself.  An
    exception leaving the block (Ctrl-C included) terminates the default pool's workers,
    so the block must be left for the work to stop."""
    executor = check_executor(executor)
    if executor is None and default_pool_is_safe(what):
        with process_pool(os.cpu_count() or 1) as pool:
            yield pool
    else:
        yield "serial" if executor is None else executor


@contextlib.contextmanager
def process_pool(workers: int):
    """A spawn-context process pool whose workers run one BLAS and one Numba thread and
    ignore SIGINT.  On Ctrl-C in the parent the pending tasks are cancelled and the
    workers terminated, so the block ends within seconds.

    Workers start lazily, so the one-thread environment is kept for the
    pool's whole life (the parent's own thread pools are already set up and
    do not read it again).
    """
    with single_threaded_children():
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_ignore_sigint)
        try:
            yield pool
        except BaseException:
            terminate(pool)
            raise
        else:
            pool.shutdown(wait=True)


def terminate(pool: ProcessPoolExecutor) -> None:
    """Cancel the queued tasks and stop the workers now (they ignore SIGINT).

    The workers are listed before the shutdown: on some Python versions
    ``shutdown(cancel_futures=True)`` drops the pool's table of processes.  Never
    raises: it runs while another exception (Ctrl-C, a failed task) is on its way."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:                      # a broken pool: its workers are stopped below
        pass
    for proc in procs:
        try:
            if proc.is_alive():
                proc.terminate()
        except (OSError, ValueError):      # already gone, or closed
            pass
    for proc in procs:
        try:
            proc.join(timeout=5)
        except (OSError, ValueError, AssertionError):
            pass


def uses_worker_processes(executor) -> bool:
    """Whether ``executor`` (already checked) sends the runs to local worker processes,
    which receive them pickled: the default pool (unless an unguarded script makes it
    serial) or a ProcessPoolExecutor.  Dask pickles with cloudpickle, which takes
    closures and lambdas too."""
    if executor is None:
        return not unguarded_script()
    return isinstance(executor, ProcessPoolExecutor)


def check_picklable(executor, **named) -> None:
    """Refuse, before any work, an argument that worker processes cannot receive: each
    ``name=value`` is pickled once when ``executor`` uses them (uses_worker_processes)."""
    if not uses_worker_processes(executor):
        return
    for name, value in named.items():
        bad = _unpicklable(value)
        if bad is not None:
            part, exc = bad
            what = name if part is value else f"{name} (its part {_short(part)})"
            raise SpecError(
                f"{what} cannot be sent to worker processes ({type(exc).__name__}: "
                f"{str(exc)[:120]}): define it as a function at the top level of a module "
                "(not a lambda, nor a function inside another), or pass executor='serial', "
                "or a Dask client, which pickles closures")


def _short(obj) -> str:
    """A function's qualified name (its end, where it is long), else a short repr."""
    name = getattr(obj, "__qualname__", None)
    if name:
        return name if len(name) <= 80 else "..." + name[-77:]
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


def _unpicklable(value):
    """(the innermost part of ``value`` that does not pickle, its error), or None; tuples,
    lists and dict values are searched part by part."""
    try:
        pickle.dumps(value)
        return None
    except Exception as exc:
        error = exc
    parts = (value.values() if isinstance(value, dict) else
             value if isinstance(value, (tuple, list)) else ())
    for part in parts:
        inner = _unpicklable(part)
        if inner is not None:
            return inner
    return value, error


class _Held:
    """Whether a Ctrl-C arrived while it was held (:func:`sigint_deferred`)."""

    hit = False


@contextlib.contextmanager
def sigint_deferred(reraise: bool = True):
    """Hold Ctrl-C for the block: a SIGINT that arrives is kept, not lost, and acted on
    when the block ends (raised as KeyboardInterrupt with ``reraise``; else only noted in
    the yielded ``hit``).  The main thread blocks the signal, so processes started in the
    block inherit it blocked (pending, never a traceback while they import, and dropped
    once their initializer ignores it), and a handler notes one delivered to another
    thread.  Only the main thread may change signal handlers: elsewhere nothing is held."""
    held = _Held()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def note(signum, frame):
        held.hit = True
    old_handler = signal.signal(signal.SIGINT, note)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield held
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)   # a pending one: noted now
        finally:
            signal.signal(signal.SIGINT, old_handler)
    if held.hit and reraise:
        raise KeyboardInterrupt


class Submitted(list):
    """The futures of :func:`submit_all`; ``interrupted``: a Ctrl-C came while they were
    submitted (held until then), which the caller raises inside its own handling."""

    interrupted = False


def submit_all(pool: Executor, fn, arg_lists) -> Submitted:
    """``pool.submit(fn, *args)`` for each args, in order; local workers that start now
    inherit Ctrl-C blocked and ignore it from their initializer on (the parent handles it).
    A Ctrl-C during the submission is held, not lost: the result says so, and the caller
    raises it where it cancels the futures."""
    with sigint_deferred(reraise=False) as held:
        out = Submitted(pool.submit(fn, *args) for args in arg_lists)
    out.interrupted = held.hit
    return out


def _collect(pool: Executor, fn, tasks, bar) -> list:
    submitted = submit_all(pool, fn, tasks)
    futures = {fut: i for i, fut in enumerate(submitted)}
    out = [None] * len(tasks)
    lost = None
    try:
        if submitted.interrupted:
            raise KeyboardInterrupt
        for fut in as_completed(futures):
            try:
                out[futures[fut]] = fut.result()
            except Exception as exc:
                if not _worker_lost(exc):
                    raise
                lost = exc                             # keep collecting what finished
                continue
            if bar is not None:
                bar.update()
    except KeyboardInterrupt:
        _keep_finished(futures, out)
        raise Interrupted(out) from None
    if lost is not None:
        _keep_finished(futures, out)
        warnings.warn(f"tp_limits: a worker was lost ({type(lost).__name__}: "
                      f"{str(lost)[:150]}); {sum(r is not None for r in out)} of {len(out)} "
                      "runs had finished and are kept", RuntimeWarning, stacklevel=4)
        raise WorkersLost(out, lost)
    return out


def _keep_finished(futures: dict, out: list) -> None:
    """Cancel what has not started; copy into ``out`` every result that finished."""
    for fut in futures:
        fut.cancel()
    for fut, i in futures.items():
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            out[i] = fut.result()
