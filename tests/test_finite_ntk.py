"""The empirical tangent kernel and initial outputs of finite networks."""
import numpy as np
import pytest
from conftest import D1, t_quantile

import tp_limits as tp

X3 = D1["eval_inputs"]


@pytest.mark.parametrize("param, d_out", [(tp.ntp(2), 1), (tp.ntp(1), 2), (tp.sp(2, c=1), 1)])
def test_empirical_ntk_converges_to_the_limit(param, d_out):
    net = tp.MLP(param, 2, d_out, phi="relu", sigma=[1.0, 1.2, 0.9][: param.L + 1])
    Ks = np.array([tp.empirical_ntk(net, X3, width=4096, seed=s) for s in range(8)])
    mean, se = Ks.mean(axis=0), Ks.std(axis=0, ddof=1) / np.sqrt(len(Ks))
    full = tp.ntk(net, X3, layers=tuple(range(1, param.L + 2)))
    limit = np.einsum("ij,ab->iajb", full, np.eye(d_out)) if d_out > 1 else full
    if param.name.startswith("SP"):
        limit = tp.ntk(net, X3)       # the input-layer term vanishes like 1/n
    # 8 seeds (7 degrees of freedom), plus the O(1/n) finite-width bias
    assert np.all(np.abs(mean - limit) < t_quantile(7) * se + 2e-3)
