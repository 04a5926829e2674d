"""The command line (tp-limits classify / table / coord-check)."""
import json
import subprocess
import sys

import pytest

from tp_limits.cli import main


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


def test_cli_version(capsys):
    from tp_limits import __version__
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"tp-limits {__version__}"


@pytest.mark.parametrize("argv", [["table", "--L", "6"], ["run", "--schema"]])
def test_output_into_a_closed_pipe_ends_quietly(argv):
    """``tp-limits table | head``: a reader that stops early is no error and no traceback."""
    p = subprocess.Popen([sys.executable, "-m", "tp_limits", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()                       # the reader leaves before the first line
    err = p.stderr.read().decode()
    assert p.wait() == 0 and "Traceback" not in err and "Broken" not in err, err
