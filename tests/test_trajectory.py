"""The one result type (tp.Trajectory): properties, atomic save, load."""
import numpy as np
import pytest
from conftest import D1, d1

import tp_limits as tp


def small_trajectory():
    return tp.train_finite(tp.MLP(tp.mup(2), 2, 1), d1(), width=32, seed=1)


def test_round_trip_keeps_every_array_and_the_meta(tmp_path):
    tr = small_trajectory()
    path = tmp_path / "run.npz"
    tr.save(path)
    back = tp.Trajectory.load(path)
    for name in ("f_eval", "f_train", "loss"):
        assert np.array_equal(getattr(back, name), getattr(tr, name))
    assert set(back.stats) == set(tr.stats)
    assert all(np.array_equal(back.stats[k], tr.stats[k]) for k in tr.stats)
    assert back.meta == tr.meta and back.f_eval_se is None
    lim = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1), d1(), particles=2_000)
    lim.save(tmp_path / "lim.npz")
    assert np.array_equal(tp.Trajectory.load(tmp_path / "lim.npz").f_eval_se, lim.f_eval_se)


def test_properties():
    tr = small_trajectory()
    assert tr.steps == 3 and not tr.diverged
    assert tr.f_eval.shape == (4, 3, 1) and tr.f_train.shape == (3, 1, 1)


def test_status_is_typed_and_meta_is_its_json_view(tmp_path):
    """The run's status is a RunStatus on the Trajectory; meta repeats it as JSON, and a
    saved Trajectory comes back with the same typed status (divergence included)."""
    from tp_limits.engine.status import Divergence, RunStatus
    net = tp.MLP(tp.mup(2), 2, 1)
    tr = tp.train_finite(net, d1().with_lr(1e4), 64, record=(), on_divergence="stop")
    assert isinstance(tr.status, RunStatus) and tr.diverged and not tr.interrupted
    assert isinstance(tr.divergence, Divergence) and tr.completed_steps == tr.steps
    assert tr.meta["diverged"] == tr.divergence.to_json() and tr.se_dof is None
    tr.save(tmp_path / "run.npz")
    back = tp.Trajectory.load(tmp_path / "run.npz")
    assert back.status == tr.status
    lim = tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1), d1(), particles=2_000, replicates=3)
    assert lim.status == RunStatus(3, False, None, 2) and lim.meta["se_dof"] == 2
    # a Trajectory built by hand from arrays and a meta dict reads its status from meta
    hand = tp.Trajectory(tr.f_eval, tr.f_train, tr.loss, meta={"interrupted": True})
    assert hand.interrupted and hand.completed_steps == tr.steps and hand.meta["interrupted"]


def test_failed_save_leaves_no_file(tmp_path, monkeypatch):
    tr = small_trajectory()
    target = tmp_path / "run.npz"

    def broken(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", broken)
    with pytest.raises(OSError):
        tr.save(target)
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_load_of_a_foreign_file_is_a_library_error(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(tp.TPError, match="cannot read"):
        tp.Trajectory.load(bad)


def test_saved_weights_keep_the_biases_and_the_file_is_readable(tmp_path):
    """keep_weights returns every trained array, biases included, through save and load;
    the file takes the process's umask (not the private mode of a temporary file)."""
    import os
    import stat
    net = tp.MLP(tp.mup(2), 2, 1, bias=tp.Bias(0.5))
    tr = tp.train_finite(net, tp.Routine(lr=0.5, **D1), 32, keep_weights=True, record=())
    w = tr.weights
    assert sorted(w.bias_initial) == sorted(w.bias_final) == [0, 1, 2]
    assert np.abs(w.bias_final[2] - w.bias_initial[2]).max() > 0      # the readout's moved
    old = os.umask(0o022)
    try:
        tr.save(tmp_path / "t.npz")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "t.npz").st_mode) == 0o644
    back = tp.Trajectory.load(tmp_path / "t.npz").weights
    for l in (0, 1, 2):
        assert np.array_equal(back.bias_initial[l], w.bias_initial[l])
        assert np.array_equal(back.bias_final[l], w.bias_final[l])
