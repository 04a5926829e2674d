"""Experiment files (`tp-limits run`), the built-in demo (`tp-limits demo`) and their reports."""
import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import D1

import tp_limits as tp
from tp_limits.cli import main
from tp_limits.experiment import (
    SCHEMA,
    ExperimentError,
    build,
    demo_config,
    load,
    run,
    schema_markdown,
    validate,
    write_report,
)
from tp_limits.experiment.data import GENERATORS
from tp_limits.experiment.runner import read_toml
from tp_limits.spec.layers import RMSNorm

ROOT = Path(__file__).resolve().parents[1]
# the files `tp-limits run` runs; those with an [adapter] are `tp-limits adapt`'s
# (tests/test_adapt_experiment.py)
EXAMPLE_TOMLS = sorted(p for p in (ROOT / "examples" / "experiments").glob("*.toml")
                       if "[adapter]" not in p.read_text(encoding="utf-8"))

SMALL = {
    "parametrization": {"preset": "mup", "L": 2},
    "data": {"generator": "d1"},
    "routine": {"lr": 0.5, "steps": 3},
    "limit": {"particles": 20_000, "replicates": 2},
    "finite": {"widths": [64, 128], "seeds": 2, "parallel": False},
}


def with_(cfg, section, **kv):
    out = copy.deepcopy(cfg)
    out.setdefault(section, {}).update(kv)
    return out


@pytest.mark.parametrize("cfg, words", [
    (with_(SMALL, "model", phy="tanh"), ["model.phy", "did you mean 'phi'"]),
    (with_(SMALL, "finite", widhts=[1, 2]), ["finite.widhts", "widths"]),
    ({**SMALL, "limt": {}}, ["[limt]", "did you mean 'limit'"]),
    (with_(SMALL, "routine", lr="fast"), ["routine.lr", "a number", "'fast'"]),
    (with_(SMALL, "finite", seeds=2.5), ["finite.seeds", "an integer"]),
    (with_(SMALL, "finite", widths=[256]), ["finite.widths", "two distinct"]),
    (with_(SMALL, "limit", particles=True), ["limit.particles", "an integer"]),
    ({k: v for k, v in SMALL.items() if k != "routine"}, ["missing section [routine]"]),
    (with_(SMALL, "routine", lr=None) | {"routine": {"steps": 3}}, ["routine.lr", "required"]),
    (with_(SMALL, "data", X=[[1.0, 0.0]]), ["exactly one of generator, file, or X"]),
    (with_(SMALL, "parametrization", a=[0, 0, 0]), ["either preset", "not both"]),
    (with_(SMALL, "model", phi="tahn"), ["model.phi", "did you mean 'tanh'", "choose one of"]),
    (with_(SMALL, "limit", zdot="adjoint"), ["limit.zdot", "stein, tangent"]),
    (with_(SMALL, "data", generator="mnist"), ["data.generator", "teacher"]),
])
def test_schema_errors_name_the_key(cfg, words):
    with pytest.raises(ExperimentError) as exc:
        validate(cfg)
    for w in words:
        assert w in str(exc.value)


def test_defaults_filled_and_schema_documented():
    cfg = validate(SMALL)
    assert cfg["model"]["phi"] == "tanh" and cfg["routine"]["batch_size"] == 1
    assert set(cfg) == set(SCHEMA)
    table = schema_markdown()
    cli_doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for section, keys in SCHEMA.items():
        for key in keys:
            assert f"`{section}.{key}`" in table
            assert f"`{section}.{key}`" in cli_doc, f"docs/cli.md misses {section}.{key}"


def test_unstable_and_bad_values_fail_before_any_work():
    with pytest.raises(ExperimentError, match=r"(?s)parametrization SP .*unstable"):
        build(with_(SMALL, "parametrization", preset="sp"))
    bad = copy.deepcopy(SMALL)
    bad["data"] = {"X": [[1.0, 0.0], [0.5, float("nan")]], "Y": [[1.0], [0.0]]}
    with pytest.raises(ExperimentError, match="NaN"):
        build(bad)


@pytest.mark.parametrize("section, key, value, words", [
    ("limit", "particles", 1, ["particles = 1", ">= 2"]),
    ("limit", "particles", 10 ** 12, ["at most", "particles fit"]),
    ("limit", "workers", 0, ["workers"]),
    ("limit", "seed", -1, ["seed"]),
    ("finite", "widths", [256, 10 ** 6], ["width 1000000", "GiB"]),
    ("limit", "partners", 8, ["partners", "Adam training only"]),
])
def test_check_accepts_exactly_what_the_engines_accept(section, key, value, words, tmp_path,
                                                       capsys):
    """Each of these passed --check and failed only in the engine (some after the limit
    had been simulated); the engines' own checks now run at build time."""
    cfg = with_(SMALL, section, **{key: value})
    with pytest.raises(ExperimentError) as exc:
        build(cfg)
    for w in words:
        assert w in str(exc.value)


def test_cli_reports_errors_with_status_2(tmp_path, capsys):
    f = tmp_path / "bad.toml"
    f.write_text('[parametrization]\npreset = "mup"\nL = 2\n[data]\ngenerator = "d1"\n'
                 '[routine]\nlr = 0.5\nbatchsize = 2\n')
    assert main(["run", str(f), "--check"]) == 2
    assert "routine.batchsize" in capsys.readouterr().err
    f.write_text('[parametrization]\npreset = "sp"\nL = 3\n[data]\ngenerator = "d1"\n'
                 '[routine]\nlr = 0.5\n')
    assert main(["run", str(f), "--check"]) == 2
    err = capsys.readouterr().err
    assert "SP" in err and "unstable" in err
    f.write_text("[routine\nlr = 0.5\n")
    assert main(["run", str(f)]) == 2
    assert "not valid TOML" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(set(GENERATORS) - {"digits"}))
def test_generators_are_deterministic_and_finite(name):
    d_out = 3 if name == "blobs" else 1
    a = GENERATORS[name](12, 2, d_out, 3, 0.1, 5)
    b = GENERATORS[name](12, 2, d_out, 3, 0.1, 5)
    for x, y in zip(a, b):
        assert np.array_equal(x, y) and np.all(np.isfinite(x))
    assert a[0].shape == (12, 2) and len(a[1]) == 12 and a[2].shape == (3, 2)


def test_data_from_npz_and_npy_files(tmp_path):
    X = np.array([[1.0, 0.0], [0.6, 0.8]])
    Y = np.array([[1.0], [-1.0]])
    np.savez(tmp_path / "d.npz", X=X, Y=Y)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    base = {k: v for k, v in SMALL.items() if k not in ("data", "routine")}
    base["routine"] = {"lr": 0.5}
    e1 = build(base | {"data": {"file": "d.npz"}}, base=tmp_path)
    e2 = build(base | {"data": {"X": "x.npy", "Y": "y.npy"}}, base=tmp_path)
    e3 = build(base | {"data": {"X": X.tolist(), "Y": Y.tolist()}})
    for e in (e1, e2, e3):
        assert np.array_equal(e.routine.X, X) and e.routine.steps == 2
    with pytest.raises(ExperimentError, match="data.file"):
        build(base | {"data": {"file": "missing.npz"}}, base=tmp_path)


def test_experiment_builds_the_same_problem_as_the_python_api():
    exp = build(SMALL)
    assert exp.net == tp.MLP(tp.mup(2), d_in=2, d_out=1, phi="tanh")
    assert exp.routine.steps == 3 and exp.routine.lr == 0.5


@pytest.mark.parametrize("path", EXAMPLE_TOMLS, ids=[p.stem for p in EXAMPLE_TOMLS])
def test_example_experiment_files_run(path, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--serial"]) == 0
    s = json.loads((out / "summary.json").read_text())
    exp = load(path)
    c = s["convergence"]
    assert c["widths"] == list(exp.finite["widths"])
    assert np.all(np.isfinite(c["rms"])) and np.isfinite(c["exponent"])
    # the largest width is closer to the limit than the smallest
    assert c["rms"][-1] < c["rms"][0]
    for f in ("summary.md", "figures/outputs.png", "figures/convergence.png",
              "figures/overview.png", "figures/loss.png", "trajectories/limit.npz"):
        assert (out / f).stat().st_size > 0, f
    lim = tp.Trajectory.load(out / "trajectories" / "limit.npz")
    assert np.allclose(lim.f_eval[-1], s["limit"]["f_final"])
    runs = list((out / "trajectories").glob("finite_*.npz"))
    assert len(runs) == len(exp.finite["widths"]) * exp.finite["seeds"]


def test_limit_only_experiment(tmp_path):
    res = run(build(with_(SMALL, "finite", enabled=False)), progress=False)
    assert res.study is None and res.limit.steps == 3
    files = write_report(res, tmp_path)
    assert "figures/outputs.png" in files and "figures/convergence.png" not in files
    s = json.loads((tmp_path / "summary.json").read_text())
    assert "convergence" not in s and len(s["limit"]["f_final"]) == 3


@pytest.mark.slow
def test_demo_main_job(tmp_path, capsys):
    """`tp-limits demo` as README runs it: files written, n^{-1/2} recovered."""
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "width exponent" in printed
    s = json.loads((out / "summary.json").read_text())
    c = s["convergence"]
    assert s["classification"]["regime"] == "feature_learning"
    assert len(c["widths"]) >= 4
    # the limit's own error is well below the finite networks' distance to it
    assert c["limit_error"] < 0.5 * min(c["rms"])
    assert abs(c["exponent"] + 0.5) <= max(c["exponent_ci95"], 0.1)
    assert c["exponent_resolved"] and c["consistent_with_prediction"] is True
    md = (out / "summary.md").read_text()
    assert "Fitted width exponent" in md
    cfg = demo_config()
    assert len(list((out / "trajectories").glob("finite_*.npz"))) == \
        len(cfg["finite"]["widths"]) * cfg["finite"]["seeds"]


def test_output_folder_is_written_aside_and_moved_into_place(tmp_path, monkeypatch):
    """--out into a used folder is refused (it mixed two runs' files); --force replaces it
    whole; a write that fails halfway leaves only a folder named as incomplete."""
    from tp_limits.experiment import report
    exp = build(with_(SMALL, "finite", enabled=False) | {"limit": {"particles": 2_000,
                                                                     "replicates": 2}})
    res = run(exp, progress=False)
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale_finite_n64_seed0.npz").write_text("from an older run")
    with pytest.raises(ExperimentError, match="not empty"):
        write_report(res, out)
    files = write_report(res, out, force=True)
    assert not (out / "stale_finite_n64_seed0.npz").exists() and (out / "summary.md").exists()
    assert sorted(p.name for p in out.iterdir()) == sorted({f.split("/")[0] for f in files})

    def broken(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(report, "_trajectories", broken)
    again = tmp_path / "again"
    with pytest.raises(ExperimentError, match="incomplete"):
        write_report(res, again)
    assert not again.exists() and (tmp_path / ".again.incomplete").exists()


def test_a_mount_point_output_is_filled_not_replaced(tmp_path, monkeypatch):
    """A mount point cannot be removed or renamed over: the report is staged inside it and
    its entries moved up, so the finished run is kept (os.path.ismount stands in for a
    real mount here)."""
    import os
    exp = build(with_(SMALL, "finite", enabled=False) | {"limit": {"particles": 2_000,
                                                                     "replicates": 2}})
    res = run(exp, progress=False)
    out = tmp_path / "mnt"
    out.mkdir()
    (out / "old.txt").write_text("an older run")
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: os.fspath(p) == os.fspath(out) or real(p))
    inode = out.stat().st_ino
    files = write_report(res, out, force=True)
    assert out.stat().st_ino == inode                      # the same folder, filled
    assert sorted(p.name for p in out.iterdir()) == sorted({f.split("/")[0] for f in files})
    assert (out / "summary.md").exists() and not (out / "old.txt").exists()


def test_divergence_on_the_command_line_gives_cli_advice(tmp_path, capsys):
    """The message used to advise on_divergence='stop', which the CLI does not offer."""
    f = tmp_path / "hot.toml"
    f.write_text('[parametrization]\npreset = "mup"\nL = 1\n[model]\nphi = "id"\n'
                 '[data]\ngenerator = "d1"\n[routine]\nlr = 1000.0\nsteps = 12\n'
                 '[finite]\nenabled = false\n')
    assert main(["run", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "diverged at step" in err and "routine.lr" in err and "on_divergence" not in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_digits_generator_gives_held_out_targets():
    a = GENERATORS["digits"](20, 2, 3, 15, 0.0, 4)
    X, y, E, Ye = a
    assert X.shape == (20, 64) and E.shape == (15, 64) and set(Ye) <= {0, 1, 2}
    assert np.array_equal(X, GENERATORS["digits"](20, 2, 3, 15, 0.0, 4)[0])
    cfg = {"parametrization": {"preset": "mup", "L": 1},
           "data": {"generator": "digits", "d_out": 3, "n_eval": 15},
           "routine": {"lr": 1.0, "loss": "xent", "batch_size": 4, "steps": 3},
           "limit": {"particles": 2_000, "replicates": 2}, "finite": {"enabled": False}}
    exp = build(cfg)
    assert exp.routine.eval_targets.shape == (15,) and exp.net.d_in == 64
    with pytest.raises(ExperimentError, match="digits"):
        build(with_(cfg, "data", d_in=16))


def test_sweep_command_writes_the_optima(tmp_path, capsys):
    toml = ROOT / "examples" / "experiments" / "lr_sweep_digits.toml"
    assert main(["sweep", str(toml), "--check"]) == 0
    out = tmp_path / "sweep"
    assert main(["sweep", str(toml), "--out", str(out), "--serial"]) == 0
    text = capsys.readouterr().out
    assert "optimal lr" in text and "inf" in text
    info = json.loads((out / "sweep.json").read_text())
    assert info["complete"] and set(info["optimal_lr"]) == {"64", "256", "1024", "inf"}
    rows = (out / "records.csv").read_text().splitlines()
    searched = sum(o["evaluations"] * 4 for o in info["optima"].values())   # 4 seeds each
    assert info["optima"]["64"]["method"] == "search" and info["optima"]["64"]["dof"] == 3
    assert rows[0] == "parametrization,width,lr,seed,value,diverged"
    assert len(rows) == 1 + 7 * 3 * 4 + 7 * 4 + searched
    assert (out / "figures" / "sweep.png").stat().st_size > 10_000
    plain = tmp_path / "plain.toml"
    plain.write_text('[parametrization]\npreset = "mup"\nL = 1\n[data]\ngenerator = "d1"\n'
                     '[routine]\nlr = 0.5\n')
    assert main(["sweep", str(plain), "--out", str(tmp_path / "x")]) == 2
    assert "no [sweep] section" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text(plain.read_text() + "[sweep]\nlrs = [0.1, 0.2]\n")
    assert main(["sweep", str(bad), "--check"]) == 2
    assert "at least three" in capsys.readouterr().err


def test_optimizer_keys_come_from_the_optimizers_declarations():
    """[routine] holds each optimizer's declared hyperparameters under their keys (one
    key for the weight decay they share); a key of another optimizer is refused."""
    for key in ("momentum", "nesterov", "weight_decay", "adam_betas", "adam_eps"):
        assert key in SCHEMA["routine"]
    exp = build(with_(SMALL, "routine", momentum=0.9, nesterov=True, weight_decay=0.01))
    assert exp.routine.optimizer == tp.SGD(momentum=0.9, nesterov=True, weight_decay=0.01)
    adam = with_(SMALL, "parametrization", optimizer="adam")
    exp = build(with_(adam, "routine", adam_betas=[0.8, 0.9], weight_decay=0.1))
    assert exp.routine.optimizer == tp.Adam(betas=(0.8, 0.9), weight_decay=0.1)
    with pytest.raises(ExperimentError, match="routine.nesterov is a hyperparameter of sgd"):
        build(with_(adam, "routine", nesterov=True))
    with pytest.raises(ExperimentError, match="nesterov must be true or false"):
        build(with_(SMALL, "routine", nesterov=1))


def test_a_second_run_into_the_same_out_is_refused_at_once(tmp_path):
    """While one run holds --out (its lock beside the folder, naming its live process), a
    second fails before any work; a lock left by a process that is gone is taken over."""
    import os

    from tp_limits.experiment.output import claimed_output
    out = tmp_path / "out"
    with claimed_output(out):
        assert (tmp_path / ".out.lock").read_text() == str(os.getpid())
        with pytest.raises(tp.TPError, match=r"another run \(process \d+\) is writing"):
            with claimed_output(out):
                pass
    assert not (tmp_path / ".out.lock").exists()
    (tmp_path / ".out.lock").write_text("999999999")            # no such process
    with claimed_output(out):
        pass


def test_output_folders_that_cannot_take_the_report_are_refused_up_front(tmp_path):
    from tp_limits.experiment.output import check_output_folder
    real = tmp_path / "real"
    real.mkdir()
    (real / "old.txt").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(tp.TPError, match="symbolic link"):
        check_output_folder(link, force=True)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(tp.TPError, match="is a file, not a folder"):
        check_output_folder(afile / "sub" / "out")
    assert check_output_folder(real, force=True) == real


@pytest.mark.parametrize("model, message", [
    ({"residual_alpha": float("nan")}, "model.residual_alpha = nan must be a finite number"),
    ({"residual_alpha": 0.5, "residual_block_depth": 3}, "model.residual_block_depth = 3"),
    ({"residual_gamma": 1.0}, "model.residual_gamma needs model.residual_alpha"),
    ({"bias": True, "bias_sigma": -1.0}, "model.bias_sigma = -1.0"),
    ({"bias_readout": False}, "model.bias_readout needs model.bias = true"),
    ({"norm": "rms", "norm_eps": -1.0}, "model.norm_eps = -1.0 must be a positive"),
    ({"norm_eps": 1e-3}, "model.norm_eps = 0.001 needs norm"),
    ({"sigma": [1.0, 2.0]}, "model.sigma has 2 entries"),
])
def test_model_errors_name_the_file_key(model, message):
    """Every [model] field is declared once (spec/fields.py): a constructor's complaint comes
    back under the experiment file's key, not the Python argument it feeds."""
    cfg = {"parametrization": {"preset": "mup", "L": 3}, "data": {"generator": "d1"},
           "routine": {"lr": 0.5}, "model": model}
    with pytest.raises(ExperimentError, match=re.escape(message)):
        build(cfg)


def test_norm_keys_build_a_normalized_network():
    cfg = {"parametrization": {"preset": "mup", "L": 2}, "data": {"generator": "d1"},
           "routine": {"lr": 0.5}, "model": {"norm": "rms", "norm_eps": 1e-4}}
    net = build(cfg).net
    assert net.norm == RMSNorm(1e-4)
    tr = tp.train_finite(net, tp.Routine(lr=0.5, **D1), 64, record=())
    assert tr.meta["norm"] == {"norm": "rms", "norm_eps": 1e-4}


def test_a_width_exponent_too_uncertain_is_not_called_consistent():
    """−0.50 ± 0.54 holds 0 and −1 as well: the report says it cannot test the prediction;
    a resolved interval is consistent with −1/2 or differs from it."""
    from tp_limits.experiment.report import exponent_verdict
    assert exponent_verdict(-0.50, 0.54).startswith("too uncertain")
    assert exponent_verdict(-0.48, 0.10) == "consistent with the predicted −1/2"
    assert exponent_verdict(-0.20, 0.10) == "differs from the predicted −1/2"
    assert exponent_verdict(-0.5, float("nan")).startswith("too uncertain")


def test_held_out_metrics_are_reported_when_the_data_has_targets(tmp_path):
    """A teacher task holds out noise-free targets, a blobs task its centres' labels: the
    report gives the held-out loss (and accuracy) of the limit and of every width, seed
    means with their standard errors; D1 has none and the report says nothing of it."""
    cfg = {**SMALL, "data": {"generator": "teacher", "d_in": 2, "n_eval": 3, "noise": 0.1}}
    res = run(build(cfg), progress=False)
    write_report(res, tmp_path)
    s = json.loads((tmp_path / "summary.json").read_text())
    held = s["held_out"]["eval_loss"]
    assert held["limit"] == pytest.approx(res.limit.stats["eval_loss"][-1])
    assert set(held["widths"]) == {"64", "128"}
    mean, se, seeds = held["widths"]["128"]
    want = [tr.stats["eval_loss"][-1] for tr in res.study.runs[1]]
    assert mean == pytest.approx(np.mean(want)) and seeds == 2
    assert se == pytest.approx(np.std(want, ddof=1) / np.sqrt(2))
    assert "## Held-out metrics after 3 steps" in (tmp_path / "summary.md").read_text()
    X, labels, E, held_labels = GENERATORS["blobs"](30, 2, 3, 4, 0.1, 0)
    assert list(held_labels) == [0, 1, 2, 0] and E.shape == (4, 2)
    plain = run(build(SMALL), progress=False)
    out = tmp_path / "d1"
    write_report(plain, out)
    assert "held_out" not in json.loads((out / "summary.json").read_text())


def test_sp_beside_mup_from_one_file(tmp_path, capsys):
    """sweep.compare = ["sp"]: the file's μP and SP swept on one grid; SP, which has no
    limit, is swept at its finite widths and its optimum drifts down (the ratio's interval
    excludes 1) while μP's stays (its interval holds 1)."""
    toml = ROOT / "examples" / "experiments" / "sp_vs_mup_digits.toml"
    assert main(["sweep", str(toml), "--check"]) == 0
    assert "muP, SP" in capsys.readouterr().out
    cfg = read_toml(toml)
    cfg["sweep"]["seeds"] = 3
    cfg["finite"]["widths"] = [64, 1024]
    cfg["limit"].update(particles=1_000, replicates=2)
    small = tmp_path / "small.toml"
    small.write_text(_as_toml(cfg))
    out = tmp_path / "out"
    assert main(["sweep", str(small), "--out", str(out), "--serial"]) == 0
    text = capsys.readouterr().out
    assert "estimated" in text and "SP is unstable, so it has no infinite-width limit" in text
    info = json.loads((out / "sweep.json").read_text())
    assert info["parametrization"] == "muP" and set(info["optimal_lr"]) == {"64", "1024", "inf"}
    (sp,) = info["compare"]
    assert sp["parametrization"] == "SP" and set(sp["optimal_lr"]) == {"64", "1024"}
    assert sp["drift"]["high"] < 1 < info["drift"]["high"] and info["drift"]["low"] < 1
    rows = (out / "records.csv").read_text().splitlines()
    assert rows[0].startswith("parametrization,") and {r.split(",")[0] for r in rows[1:]} == {
        "muP", "SP"}
    summary = (out / "summary.md").read_text()
    assert "## muP" in summary and "## SP" in summary and "η*(n = 1024)/η*(n = 64)" in summary


def _as_toml(cfg: dict) -> str:
    """A parsed experiment file written back as TOML (scalars and flat lists)."""
    def value(v):
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)
    return "\n".join(f"[{section}]\n" + "\n".join(f"{k} = {value(v)}" for k, v in keys.items())
                     for section, keys in cfg.items()) + "\n"


def test_unstable_parametrizations_are_swept_but_not_run(tmp_path, capsys):
    """SP (unstable: no limit) builds for a sweep — finite widths only — and is refused by
    `run` and `run --check`, which need the limit; sweep.compare's names are checked."""
    base = {"parametrization": {"preset": "sp", "L": 1}, "data": {"generator": "d1"},
            "routine": {"lr": 0.1}, "finite": {"widths": [8, 16], "seeds": 2}}
    with pytest.raises(ExperimentError, match=r"(?s)unstable.*\[sweep\] section sweeps"):
        build(base)
    swept = with_(base, "sweep", lrs=[0.05, 0.1, 0.2], limit=False, refine=0)
    exp = build(swept)
    assert exp.estimate["sweep"] > 0 and "limit" not in exp.estimate
    with pytest.raises(ExperimentError, match="unstable and has no limit to run"):
        run(exp, progress=False)
    path = tmp_path / "sp.toml"
    path.write_text(_as_toml(swept))
    assert main(["run", str(path), "--check"]) == 2
    assert "tp-limits sweep --check" in capsys.readouterr().err
    for compare, message in ((["mpu"], "sweep.compare holds 'mpu' (did you mean 'mup'?)"),
                             (["sp"], "twice, or the file's own"),
                             (["mup", "mup"], "twice")):
        with pytest.raises(ExperimentError, match=re.escape(message)):
            build(with_(swept, "sweep", compare=compare))
    with pytest.raises(ExperimentError, match="sweep.compare needs sweep.lrs"):
        build(with_(base, "sweep", compare=["mup"]))
