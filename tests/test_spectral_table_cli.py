"""Spectral condition, Table 1 rendering, phase diagram and the CLI."""
import json
import math
import subprocess
import sys

import pytest
from sympy import Rational as R

import tp_limits as tp
from tp_limits import spectral
from tp_limits.cli import main


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


def test_table_markdown_and_text():
    t = tp.table([tp.sp(2), tp.sp(2, c=1), tp.ntp(2), tp.mup(2)])
    md = t.markdown().splitlines()
    assert md[0].startswith("| name | a_l | b_l | c | r |") and len(md) == 6
    assert "| SP (c=1) | (0, 0, 0) | (0, 1/2, 1/2) | 1 | 1/2 | 1 | 1 | yes | yes | no | yes |" in md
    assert "| muP | (-1/2, 0, 1/2) | (1/2, 1/2, 1/2) | 0 | 0 | 1 | 1 | yes | yes | yes | no |" in md
    text = str(t).splitlines()
    assert text[0].startswith("name") and len(text) == 6


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


def test_cli_classify_preset(capsys):
    assert main(["classify", "mup", "--L", "3"]) == 0
    out = capsys.readouterr().out
    assert "FEATURE LEARNING" in out and "r_l = (0, 0, 0)" in out


def test_cli_classify_custom_json(capsys):
    assert main(["classify", "--a", "-1/2,0,1/2", "--b", "1/2,1/2,1/2", "--c", "0", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["regime"] == "feature_learning" and d["r_layers"] == ["0", "0"]


def test_cli_errors_are_messages(capsys):
    assert main(["classify", "mfp", "--L", "2"]) == 2
    assert "L = 1 only" in capsys.readouterr().err
    assert main(["classify", "--a", "0,0,0", "--b", "0,0"]) == 2
    assert "b has 2 entries" in capsys.readouterr().err


def test_cli_table(capsys):
    assert main(["table", "--L", "2", "--format", "markdown"]) == 0
    assert "| NTP |" in capsys.readouterr().out


def test_console_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "tp_limits", "classify", "sp", "--L", "3"],
                         capture_output=True, text=True, check=True).stdout
    assert "UNSTABLE" in out and "layers 2 and 3" in out


def test_cli_coord_check(capsys, tmp_path):
    png = tmp_path / "cc.png"
    assert main(["coord-check", "mup", "--L", "2", "--widths", "64,128", "--seeds", "2",
                 "--steps", "2", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "delta_h" in out and "predicted" in out and png.stat().st_size > 10_000
