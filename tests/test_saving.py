"""Studies and sweeps saved to .npz and loaded back equal, field by field."""
import dataclasses
import warnings

import numpy as np
import pytest
from conftest import d1

import tp_limits as tp
from tp_limits.errors import TPError

NET = tp.MLP(tp.mup(2), 2, 1, phi="tanh")
RES = tp.MLP(tp.mup(2), 2, 1, phi="tanh", residual=tp.Residual())


def _same(a, b, where="result"):
    """Equal in value and type, recursively; arrays and floats bit for bit (NaN == NaN)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif isinstance(a, float):
        assert (a == b) or (np.isnan(a) and np.isnan(b)), f"{where}: {a} != {b}"
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _studies():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = d1(lr=0.5, eval_targets=np.array([[1.0], [-1.0], [1.0]]))
        return {
            "convergence": tp.convergence(NET, r, [16, 32], seeds=2, particles=500,
                                          executor="serial", keep_runs=True),
            "lr_sweep": tp.lr_sweep(NET, r, [0.1, 0.3, 1.0, 3.0], [16, 32], seeds=2,
                                    particles=500, replicates=2, refine=2,
                                    metric="eval_loss", executor="serial", progress=False),
            "coord_check": tp.coord_check(NET, r, [16, 32], seeds=2, executor="serial"),
            "depth_check": tp.depth_check(RES, r, [2, 3], width=16, seeds=2,
                                          executor="serial"),
            "depth_sweep": tp.depth_sweep(RES, r, [0.1, 0.3, 1.0], [1, 2], widths=[16],
                                          seeds=2, limit=False, refine=0, executor="serial",
                                          progress=False),
        }


@pytest.fixture(scope="module")
def studies():
    return _studies()


@pytest.mark.parametrize("kind", ["convergence", "lr_sweep", "coord_check", "depth_check",
                                  "depth_sweep"])
def test_a_saved_study_loads_back_equal(studies, kind, tmp_path):
    result = studies[kind]
    path = tmp_path / f"{kind}.npz"
    result.save(path)
    back = type(result).load(path)
    _same(result, back)
    assert back.table().text() == result.table().text()


def test_loading_the_wrong_kind_says_what_the_file_holds(studies, tmp_path):
    studies["lr_sweep"].save(tmp_path / "sweep.npz")
    with pytest.raises(TPError, match=r"holds a LRSweep, not a ConvergenceStudy.*"
                                      r"tp.LRSweep.load"):
        tp.ConvergenceStudy.load(tmp_path / "sweep.npz")
    studies["convergence"].limit.save(tmp_path / "traj.npz")
    with pytest.raises(TPError, match="not a saved result .*tp.Trajectory.load"):
        tp.LRSweep.load(tmp_path / "traj.npz")
    with pytest.raises(TPError, match="no file at"):
        tp.LRSweep.load(tmp_path / "missing.npz")
    with pytest.raises(TPError, match="does not exist"):
        studies["lr_sweep"].save(tmp_path / "no" / "such" / "folder.npz")
