"""Convergence studies (tp.convergence): errors, exponents, the limit they compare with."""
import numpy as np
import pytest
from conftest import d1

import tp_limits as tp


def test_study_fields_and_exponent():
    net = tp.MLP(tp.mup(1), 2, 1, phi="tanh")
    lim = tp.simulate_limit(net, d1(), method="quadrature", particles=60 ** 3)
    study = tp.convergence(net, d1(), widths=[256, 1024, 4096], seeds=6, limit=lim,
                           executor="serial", keep_runs=True)
    assert study.errors.shape == (3, 6) and len(study.runs) == 3 and len(study.runs[0]) == 6
    assert np.all(np.diff(study.rms) < 0)                     # closer as the width grows
    assert -0.9 < study.exponent < -0.2
    assert len(study.table().rows) == 5
    assert study.plot().axes[0].get_yscale() == "log"
    # the widest width's largest |seed mean − limit| over the combined SE, written out
    F = np.array([tr.f_eval for tr in study.runs[-1]])[:, 1:]
    z = np.abs(F.mean(axis=0) - lim.f_eval[1:]) / np.sqrt(
        F.var(axis=0, ddof=1) / 6 + lim.f_eval_se[1:] ** 2)
    assert study.widest_gap() == pytest.approx(z.max(), rel=1e-12) and study.widest_gap() > 0


@pytest.mark.parametrize("other", [
    dict(net=tp.MLP(tp.mup(1), 2, 1, phi="relu")),
    dict(routine=d1(lr=0.4)),
    dict(net=tp.MLP(tp.mup(1), 2, 1, phi="tanh", sigma=[1.0, 1.5])),
])
def test_a_limit_of_another_problem_is_refused(other):
    """It used to print a plausible table against the wrong limit."""
    net, r = tp.MLP(tp.mup(1), 2, 1, phi="tanh"), d1()
    lim = tp.simulate_limit(other.get("net", net), other.get("routine", r), particles=2_000)
    with pytest.raises(tp.SpecError, match="another problem"):
        tp.convergence(net, r, widths=[32, 64], seeds=2, limit=lim, executor="serial")


def test_bad_arguments():
    net = tp.MLP(tp.mup(1), 2, 1)
    with pytest.raises(tp.SpecError, match="two distinct widths"):
        tp.convergence(net, d1(), widths=[64], executor="serial")
    with pytest.raises(tp.SpecError, match="seeds"):
        tp.convergence(net, d1(), widths=[32, 64], seeds=1, executor="serial")
    with pytest.raises(tp.SpecError, match="Trajectory"):
        tp.convergence(net, d1(), widths=[32, 64], seeds=2, limit="limit.npz",
                       executor="serial")


def test_a_kept_run_is_found_by_its_width_and_seed():
    """study.run(width, seed) is the run of those values (runs holds them by position);
    a width or seed not swept, or a study that kept nothing, is named."""
    net = tp.MLP(tp.mup(1), 2, 1)
    study = tp.convergence(net, d1(), [16, 32], seeds=[5, 9], keep_runs=True,
                           executor="serial", progress=False)
    tr = study.run(32, 9)
    assert tr.meta["width"] == 32 and tr.meta["seed"] == 9
    assert study.run(16, 5).meta["seed"] == 5
    with pytest.raises(tp.SpecError, match="seeds \\[5, 9\\]"):
        study.run(32, 1)
    bare = tp.convergence(net, d1(), [16, 32], seeds=2, executor="serial", progress=False)
    with pytest.raises(tp.SpecError, match="keep_runs=True"):
        bare.run(16, 0)
    with pytest.raises(tp.SpecError, match="keep_runs=True"):
        bare.widest_gap()
