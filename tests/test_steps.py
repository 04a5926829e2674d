"""The shared step loop: counting, progress calls, clean stops."""
import pytest

from tp_limits.engine.status import Divergence
from tp_limits.engine.steps import StepLoop
from tp_limits.errors import DivergenceError


def run(T, fail_at=None, exc=None, catch=True, before=None):
    seen = []
    loop = StepLoop(T, seen.append, catch_divergence=catch)
    with loop:
        if before is not None:
            raise before
        for t in loop:
            if t == fail_at:
                raise exc
    return loop, seen


def test_counts_every_step_and_reports_progress_after_each():
    loop, seen = run(5)
    assert (loop.completed, loop.interrupted, loop.diverged) == (5, False, None)
    assert seen == [0, 1, 2, 3, 4]
    assert len(loop) == 5


def test_ctrl_c_keeps_the_finished_steps():
    loop, seen = run(5, fail_at=3, exc=KeyboardInterrupt())
    assert loop.completed == 3 and loop.interrupted and loop.diverged is None
    assert seen == [0, 1, 2]          # the interrupted step reports no progress


def test_divergence_is_recorded_with_step_and_layer():
    loop, _ = run(5, fail_at=2, exc=DivergenceError(3, 2, "output f"))
    assert loop.completed == 2 and not loop.interrupted
    assert loop.diverged == Divergence(3, 2, "output f", None)
    assert loop.diverged.step == 3 and str(loop.diverged) == "step 3, output f of layer 2"


def test_divergence_propagates_when_not_caught():
    with pytest.raises(DivergenceError):
        run(5, fail_at=1, exc=DivergenceError(1, None, "loss"), catch=False)


def test_other_errors_propagate_unchanged():
    with pytest.raises(ValueError, match="boom"):
        run(5, fail_at=1, exc=ValueError("boom"))


def test_the_prelude_inside_the_block_is_guarded_too():
    loop, seen = run(5, before=KeyboardInterrupt())
    assert loop.completed == 0 and loop.interrupted and seen == []
