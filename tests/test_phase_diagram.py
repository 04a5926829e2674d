"""Phase diagrams of exponent space (tp.phase_diagram)."""
import pytest
from sympy import Rational as R

import tp_limits as tp


def test_phase_diagram_figure():
    from tp_limits.analysis.phase_diagram import regime_grid
    xs, ys, rows = regime_grid(tp.sp(1), "c", "b_2", x_range=(0, 2), y_range=(0, 1), step="1/2")
    assert xs[2] == 1 and ys[1] == R(1, 2)
    assert rows[1][2] == "kernel"            # SP with c = 1
    assert rows[1][0] == "unstable"          # SP with c = 0
    fig = tp.phase_diagram(tp.sp(1), x="c", y="b_2", x_range=(-1, 2), y_range=(-1, 2),
                           step="1/4", mark=[tp.ntp(1)])
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_legend() is not None
    with pytest.raises(tp.TPError, match="layer index"):
        regime_grid(tp.sp(1), "c", "b_7")
