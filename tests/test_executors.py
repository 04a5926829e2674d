"""Running many engine calls on an executor: serial, process pool, any Executor."""
from concurrent.futures import ThreadPoolExecutor

import time

import pytest

import tp_limits as tp
from tp_limits.engine.executors import run_tasks
from tp_limits.engine.options import check_executor


def square_plus(x, y):
    return x * x + y


TASKS = [(i, 10 * i) for i in range(6)]
EXPECTED = [i * i + 10 * i for i in range(6)]


def test_serial_and_thread_pool_keep_task_order():
    assert run_tasks(square_plus, TASKS, executor="serial") == EXPECTED
    with ThreadPoolExecutor(3) as pool:
        assert run_tasks(square_plus, TASKS, executor=pool) == EXPECTED


def test_default_process_pool():
    assert run_tasks(square_plus, TASKS) == EXPECTED


def test_bad_and_closed_executors_are_refused():
    with pytest.raises(tp.SpecError, match="executor"):
        check_executor("threads")
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    with pytest.raises(tp.SpecError, match="shut down"):
        check_executor(pool)


def _slow(x):
    import time
    time.sleep(x)
    return x


def test_terminate_never_raises_and_stops_the_workers():
    """The clean-up on Ctrl-C: after a shutdown that dropped the pool's table of processes
    (as CPython 3.11's shutdown(cancel_futures=True) does), on a pool already shut down,
    and twice in a row, it neither raises nor leaves a worker alive."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from tp_limits.engine.executors import terminate
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    futures = [pool.submit(_slow, 30) for _ in range(4)]
    procs = list(pool._processes.values())
    assert procs
    terminate(pool)
    terminate(pool)
    # terminate() joins for 5 s; on a loaded machine a worker may take longer to be
    # reaped, so wait up to 15 s — far less than the 30 s a worker left running lives
    deadline = time.monotonic() + 15
    while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(not p.is_alive() for p in procs)
    # a task already handed to the call queue cannot be cancelled: the pool's manager
    # thread marks it failed once it sees the workers gone, which on a loaded machine
    # comes after the workers are reaped, so it gets what is left of the same deadline
    def settled():
        return all(f.cancelled() or f.done() for f in futures[2:])
    while not settled() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert settled()
    dropped = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    dropped.submit(_slow, 0).result()
    dropped._processes = None                       # what some Python versions leave
    terminate(dropped)


def test_a_task_the_pool_cannot_pickle_is_refused_with_its_part_named():
    def local_fn(x):
        return x
    with pytest.raises(tp.SpecError, match=r"local_fn.*cannot be sent to worker processes"):
        run_tasks(len, [(local_fn,)], executor=None)
    assert run_tasks(len, [((1, 2),)], executor="serial") == [2]     # serial pickles nothing


def _die_on_three(x):
    import os
    import time
    if x == 3:
        time.sleep(1.0)           # the quick runs finish first
        os._exit(1)               # a worker killed mid-run (out of memory, say)
    return x * 10


def test_a_lost_worker_keeps_the_finished_runs():
    """A worker that dies (BrokenProcessPool locally; KilledWorker on Dask) stops the runs
    as Ctrl-C does: the finished results are kept, in order, with a warning naming the
    cause, and the studies treat it as an interruption."""
    from tp_limits.engine.executors import Interrupted, WorkersLost
    with pytest.warns(RuntimeWarning, match="a worker was lost"):
        with pytest.raises(WorkersLost) as info:
            run_tasks(_die_on_three, [(i,) for i in range(4)], executor=None)
    assert isinstance(info.value, Interrupted)
    assert info.value.results[:3] == [0, 10, 20] and info.value.results[3] is None
    assert type(info.value.cause).__name__ == "BrokenProcessPool"


def test_a_ctrl_c_in_a_held_block_is_kept_not_dropped():
    """sigint_deferred holds a SIGINT for the whole block (it finishes) and raises it after
    (or reports it), with the handler restored; before, the submission window ignored it."""
    import os
    import signal

    from tp_limits.engine.executors import sigint_deferred
    before = signal.getsignal(signal.SIGINT)
    finished = False
    with pytest.raises(KeyboardInterrupt):
        with sigint_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            finished = True
    assert finished and signal.getsignal(signal.SIGINT) is before
    with sigint_deferred(reraise=False) as held:
        os.kill(os.getpid(), signal.SIGINT)
    assert held.hit and signal.getsignal(signal.SIGINT) is before
    with sigint_deferred(reraise=False) as quiet:
        pass
    assert not quiet.hit


def test_a_ctrl_c_during_submission_reaches_the_caller():
    """A SIGINT that lands between two submissions is held until every task is submitted,
    and the caller learns of it (it then cancels what has not started)."""
    import os
    import signal
    from concurrent.futures import ThreadPoolExecutor

    from tp_limits.engine.executors import submit_all

    class Interrupting(ThreadPoolExecutor):
        def submit(self, fn, *args):
            if args == (5,):
                os.kill(os.getpid(), signal.SIGINT)
            return super().submit(fn, *args)
    with Interrupting(1) as pool:
        futures = submit_all(pool, abs, [(i,) for i in range(20)])
        assert futures.interrupted and [f.result() for f in futures] == list(range(20))
