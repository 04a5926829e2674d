"""`tp-limits adapt`: an experiment file's [adapter] section — pretrain, then fine-tune a
low-rank adapter at finite widths and in the limit (tp_limits/experiment/adapt.py)."""
import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tp_limits.adapters import fine_tune
from tp_limits.cli import main
from tp_limits.experiment import ExperimentError, build, load, run_adapt, write_adapt_report
from tp_limits.experiment.runner import read_toml
from conftest import interrupt_on_call

ROOT = Path(__file__).resolve().parents[1]
ADAPT_TOMLS = sorted(p for p in (ROOT / "examples" / "experiments").glob("*.toml")
                     if "[adapter]" in p.read_text(encoding="utf-8"))

SMALL = {
    "parametrization": {"preset": "mup", "L": 2},
    "data": {"generator": "teacher", "d_in": 3},
    "routine": {"lr": 0.5, "batch_size": 4, "steps": 3},
    "adapter": {"eta_A": 4.0, "eta_B": 0.05, "steps": 4, "n_train": 8, "n_test": 8,
                "particles": 1024, "replicates": 2},
    "finite": {"widths": [32, 64], "seeds": 2, "parallel": False},
}


def with_(section, **kv):
    out = copy.deepcopy(SMALL)
    out[section].update(kv)
    return out


def test_example_adapter_files_are_valid():
    assert ADAPT_TOMLS
    for path in ADAPT_TOMLS:
        assert main(["adapt", str(path), "--check"]) == 0
        assert load(path).adapter["pre"].rank >= 1


def test_an_adapter_experiment_runs_both_phases_and_writes_its_report(tmp_path, capsys):
    """The CLI's table holds the limit and every width; runs.json holds the same numbers
    as fine_tune called directly (the same seeds: bit for bit)."""
    path = tmp_path / "small.toml"
    path.write_text(_toml(SMALL), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["adapt", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| ∞ | 2 |" in printed and "| 64 | 2 |" in printed
    runs = json.loads((out / "runs.json").read_text())
    assert runs["complete"] and set(runs["runs"]) == {"inf", "32", "64"}
    assert (out / "figures" / "adapt.png").stat().st_size > 0
    assert "PARTIAL" not in (out / "summary.md").read_text()
    exp = build(read_toml(path))
    a = exp.adapter
    direct = fine_tune(a["pre"], a["task"], 64, *a["pre"].rates(64, 4.0, 0.05), steps=4,
                       seeds=2)
    np.testing.assert_array_equal(np.array(runs["runs"]["64"]["test_loss"]), direct.test_loss)


def test_an_adapter_on_a_middle_matrix_runs_from_a_file():
    """adapter.layer = "W2" of an L = 3 network: the limit (the deep run continued above
    W²) and a width run, each equal to fine_tune called directly."""
    cfg = with_("adapter", layer="W2", particles=512)
    cfg["parametrization"]["L"] = 3
    exp = build(cfg)
    pre, task = exp.adapter["pre"], exp.adapter["task"]
    assert (pre.matrix, pre.position) == (2, "hidden")
    res = run_adapt(exp, progress=False)
    assert res.complete and set(res.runs) == {math.inf, 32, 64}
    lim = fine_tune(pre, task, math.inf, 4.0, 0.05, steps=4, seeds=2, particles=512)
    np.testing.assert_array_equal(res.runs[math.inf].test_loss, lim.test_loss)
    net = fine_tune(pre, task, 64, *pre.rates(64, 4.0, 0.05), steps=4, seeds=2)
    np.testing.assert_array_equal(res.runs[64].test_loss, net.test_loss)
    assert np.all(np.isfinite(lim.test_loss))


@pytest.mark.parametrize("section, kv, words", [
    ("adapter", {"rnak": 4}, ["adapter.rnak", "did you mean 'rank'"]),
    ("adapter", {"rank": 0}, ["adapter.rank"]),
    ("adapter", {"eta_A": None}, ["adapter.eta_A", "required"]),
    ("adapter", {"eta_B": -1.0}, ["adapter.eta_B", "positive"]),
    ("adapter", {"layer": "W9"}, ["adapter.layer = 'W9'", "'input', 'hidden'", "'W3'"]),
    ("adapter", {"replicates": 1}, ["adapter.replicates", "at least two"]),
    ("adapter", {"alpha": float("nan")}, ["adapter.alpha"]),
    ("parametrization", {"L": 1}, ["L = 1"]),
])
def test_a_bad_adapter_key_is_named_before_any_work(section, kv, words):
    cfg = with_(section, **kv)
    if kv.get("eta_A", 0) is None:
        del cfg["adapter"]["eta_A"]
    with pytest.raises(ExperimentError) as err:
        build(cfg)
    for w in words:
        assert w in str(err.value)


def test_ctrl_c_keeps_the_finished_widths_and_says_partial(tmp_path, monkeypatch):
    import tp_limits.experiment.adapt as adapt
    calls = interrupt_on_call(monkeypatch, adapt, "fine_tune", 3)   # the second width's
    res = run_adapt(build(SMALL), progress=False)
    assert not res.complete and "width 64" in res.interrupted
    assert list(res.runs) == [math.inf, 32]
    assert [c[2] for c in calls] == [math.inf, 32, 64]
    write_adapt_report(res, tmp_path / "out")
    assert (tmp_path / "out" / "summary.md").read_text().count("PARTIAL RESULT") == 1
    assert json.loads((tmp_path / "out" / "runs.json").read_text())["complete"] is False


def _toml(cfg: dict) -> str:
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)
    return "\n".join(f"[{s}]\n" + "\n".join(f"{k} = {value(v)}" for k, v in keys.items())
                     for s, keys in cfg.items()) + "\n"
