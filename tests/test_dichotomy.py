"""TP4's dichotomy side by side (tp.dichotomy)."""
import numpy as np
from conftest import D1

import tp_limits as tp


def test_dichotomy_side_by_side():
    r = tp.Routine(np.tile(D1["X"], (2, 1)), np.tile(D1["Y"], (2, 1)), lr=0.5,
                   eval_inputs=D1["eval_inputs"])
    study = tp.dichotomy(r, d_in=2, L=1, phi="tanh", widths=[256, 1024, 4096], seeds=2,
                         particles=20_000)
    assert study.labels == ("SP (c=1)", "NTP", "muP", "MFP")
    assert study.regimes["NTP"] == "kernel" and study.regimes["MFP"] == "feature_learning"
    assert np.array_equal(study.limits["muP"].f_eval, study.limits["MFP"].f_eval)
    assert study.kernel_change_exponent["NTP"] < -0.6        # features freeze
    assert abs(study.kernel_change_exponent["muP"]) < 0.2    # features keep moving
    assert len(study.table().rows) == 4
    fig = study.plot()
    assert all(ax.get_xlabel() for ax in fig.axes)
