"""The spectral condition (tp.spectral)."""
import math

import pytest
from sympy import Rational as R

import tp_limits as tp
from tp_limits import spectral


def test_spectral_widths_table():
    d, n, do = 3, 1024, 2
    inp, hid, out = spectral.parametrization([d, n, n, do])
    assert math.isclose(inp.init_std, d ** -0.5) and math.isclose(inp.lr, n / d)
    assert math.isclose(hid.init_std, n ** -0.5) and math.isclose(hid.lr, 1.0)
    assert math.isclose(out.init_std, math.sqrt(do) / n) and math.isclose(out.lr, do / n)
    inp, hid, out = spectral.parametrization([d, n, n, do], optimizer="adam")
    assert (inp.lr, hid.lr, out.lr) == pytest.approx((1 / d, 1 / n, 1 / n))


def test_spectral_sgd_is_mup_a0_form():
    """Read b and c off the spectral rule at two widths: they are muP's a = 0 form."""
    L, d, do = 3, 2, 1
    small, big = (spectral.parametrization([d] + [n] * L + [do]) for n in (2 ** 10, 2 ** 14))
    slope = lambda s, b: -math.log(b / s) / math.log(2 ** 4)  # noqa: E731
    b = [round(2 * slope(s.init_std, g.init_std)) / 2 for s, g in zip(small, big)]
    c = [round(2 * slope(s.lr, g.lr)) / 2 for s, g in zip(small, big)]
    assert tp.ABC([0] * (L + 1), b, c) == tp.mup(L, form="a0")


def test_spectral_condition_verdicts():
    assert spectral.satisfies(tp.mup(3)) and spectral.satisfies(tp.mup(3, form="a0"))
    assert not spectral.satisfies(tp.ntp(3)) and not spectral.satisfies(tp.sp(3, c=1))
    assert spectral.ratio_exponents(tp.ntp(2)) == (-R(1, 2), -R(1, 2), R(-1, 2))
    with pytest.raises(tp.TPError):
        spectral.parametrization([3])
    with pytest.raises(tp.TPError):
        spectral.parametrization([3, 0, 1])
