"""The one result type (tp.Trajectory): properties, atomic save, load."""
import numpy as np
import pytest
from conftest import d1

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
