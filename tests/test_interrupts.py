"""Ctrl-C as users meet it: the CLI's main job, interrupted in each phase, ends within
seconds, keeps what had finished on disk under a summary that says PARTIAL, exits 130
and prints no traceback (SIGINT sent to the whole process group, as a terminal does)."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

import tp_limits as tp


def _foreground():
    """In the child: Ctrl-C's default disposition, as a terminal gives a foreground job.  A
    test run started in the background of a non-interactive shell inherits SIGINT ignored
    (POSIX), and a Python started that way keeps ignoring it: no program can be
    interrupted there, so the test would measure its harness, not the package."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_demo(out, command=("demo",)):
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "tp_limits", *command, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True, preexec_fn=_foreground)
    text = {"err": "", "out": ""}

    def pump(stream, key):
        for chunk in iter(lambda: stream.read1(256) if hasattr(stream, "read1")
                          else stream.read(256), b""):
            text[key] += chunk.decode("utf-8", "replace")
            if "said" not in text and "tp-limits: interrupted" in text[key]:
                text["said"] = time.time()       # the report is written: only the exit left
    for stream, key in ((proc.stderr, "err"), (proc.stdout, "out")):
        threading.Thread(target=pump, args=(stream, key), daemon=True).start()
    return proc, text


def wait_for(proc, text, pattern, timeout=240):
    end = time.time() + timeout
    while time.time() < end:
        m = re.search(pattern, text["err"])
        if m:
            return m
        assert proc.poll() is None, text["err"][-2000:]
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} never appeared:\n{text['err'][-2000:]}")


def interrupt(proc, text):
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.time()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        time.sleep(0.3)
        raise AssertionError("still running 30 s after Ctrl-C; its output so far:\n"
                             + text["err"][-3000:]) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(0.3)                       # let the reader threads drain the pipes
    elapsed = time.time() - t0
    said = text.get("said")
    text["timing"] = (f"{elapsed:.1f} s after Ctrl-C, of which "
                      + (f"{said - t0:.1f} s to the interrupted message" if said else
                         "no interrupted message"))
    return elapsed


@pytest.mark.parametrize("phase", ["limit", "finite networks"])
def test_ctrl_c_in_the_demo_keeps_the_finished_work(phase, tmp_path):
    out = tmp_path / "demo"
    proc, text = start_demo(out)
    if phase == "limit":
        wait_for(proc, text, r"limit \(monte_carlo\):\s+\d+%.*\| *[1-9]\d*/128")
    else:
        wait_for(proc, text, r"finite networks:\s+\d+%.*\| *([4-9]|\d\d)/48")
    elapsed = interrupt(proc, text)
    assert elapsed < 10, text["timing"]
    assert proc.returncode == 130, text["err"][-2000:]
    assert "Traceback" not in text["err"] and "Traceback" not in text["out"]
    assert "interrupted" in text["err"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["interrupted"].startswith("during the")
    assert (out / "summary.md").read_text().count("PARTIAL") >= 1
    limit = tp.Trajectory.load(out / "trajectories" / "limit.npz")
    if phase == "limit":
        assert limit.interrupted and not list((out / "trajectories").glob("finite_*"))
    else:
        assert limit.steps == 16 and not limit.interrupted
        finished = list((out / "trajectories").glob("finite_*.npz"))
        assert len(finished) >= 4
        assert all(not tp.Trajectory.load(f).interrupted for f in finished)
    assert not list(tmp_path.glob(".demo.incomplete"))


def test_a_second_ctrl_c_during_the_clean_up_keeps_the_partial_summary(tmp_path):
    """Two presses 0.5 s apart (an impatient user): the second lands while the first one's
    report is being written, and must not cost the PARTIAL summary."""
    out = tmp_path / "demo"
    proc, text = start_demo(out)
    wait_for(proc, text, r"finite networks:\s+\d+%.*\| *([4-9]|\d\d)/48")
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.5)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    interrupt_done = proc.wait(timeout=60)
    time.sleep(0.3)
    assert interrupt_done == 130, text["err"][-2000:]
    assert "Traceback" not in text["err"] and "PARTIAL" in text["err"], text["err"][-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False
    assert (out / "summary.md").read_text().count("PARTIAL") >= 1


SWEEP = """
[parametrization]
preset = "mup"
L = 2
[data]
generator = "d1"
[routine]
lr = 0.5
steps = 20
[limit]
particles = 2000
replicates = 2
[finite]
widths = [1024, 2048, 4096]
seeds = 8
[sweep]
lrs = [0.25, 0.5, 1.0, 2.0]
seeds = 8
"""


def test_ctrl_c_in_a_sweep_writes_the_partial_report(tmp_path):
    """tp-limits sweep interrupted in its finite phase (the default process pool): exit 130
    within seconds, no traceback, and a report of the runs that finished, marked
    incomplete (it used to fail writing the report with a KeyError)."""
    config = tmp_path / "sweep.toml"
    config.write_text(SWEEP)
    out = tmp_path / "sweep"
    proc, text = start_demo(out, ("sweep", str(config)))
    wait_for(proc, text, r"learning-rate sweep:\s+\d+%.*\| *([4-9]|\d\d)/96")
    elapsed = interrupt(proc, text)
    assert elapsed < 10, text["timing"]
    assert proc.returncode == 130, text["err"][-2000:]
    assert "Traceback" not in text["err"] and "PARTIAL" in text["err"]
    assert "serially" not in text["err"]                      # python -m uses the pool too
    report = json.loads((out / "sweep.json").read_text())
    assert report["complete"] is False
    assert len((out / "records.csv").read_text().splitlines()) > 1 + 8     # limit rows + runs
    assert (out / "figures" / "sweep.png").exists()
