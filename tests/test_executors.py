"""Running many engine calls on an executor: serial, process pool, any Executor."""
from concurrent.futures import ThreadPoolExecutor

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
