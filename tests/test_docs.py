"""The documentation site builds without warnings (`mkdocs build --strict`)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(tmp_path / "site"), "--config-file", str(ROOT / "mkdocs.yml")],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (tmp_path / "site" / "quickstart" / "index.html").exists()


def test_every_doc_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in (ROOT / "docs").glob("*.md"):
        assert page.name in nav, f"{page.name} is not in mkdocs.yml's nav"
    for required in ("index.md", "install.md", "quickstart.md", "theory.md", "api.md",
                     "cli.md", "performance.md"):
        assert (ROOT / "docs" / required).exists()


CITING = [p for pattern in ("tp_limits/**/*.py", "tests/*.py", "benchmarks/*.py", "docs/*.md",
                            "examples/*.ipynb", "README.md")
          for p in ROOT.glob(pattern)]


def test_every_cited_theory_section_exists():
    """Code, docs, tests and notebooks cite docs/theory.md by stable section numbers."""
    import re
    theory = (ROOT / "docs" / "theory.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#+ (§\d+(?:\.\d+)?)\b", theory, flags=re.M))
    assert {"§0", "§1.1", "§4.4", "§5.3", "§8.1", "§9"} <= headings
    missing = {}
    for path in CITING:
        for ref in re.findall(r"§\d+(?:\.\d+)?", path.read_text(encoding="utf-8")):
            if ref not in headings:
                missing.setdefault(ref, []).append(path.relative_to(ROOT).as_posix())
    assert not missing, f"cited but not in docs/theory.md: {missing}"


def test_no_text_points_at_documents_users_do_not_have():
    import re
    bad = re.compile(r"DESIGN\s*§|\.\./shared|the spec's|TP4 §\d|\bSec\. \d")
    files = CITING + list((ROOT / "examples" / "experiments").glob("*.toml"))
    offenders = [p.relative_to(ROOT).as_posix() for p in files
                 if p.name != "test_docs.py" and bad.search(p.read_text(encoding="utf-8"))]
    assert not offenders, offenders


def _generated_blocks():
    """(file, opening marker, closing marker, generated Markdown) of every table that the
    docs hold as a copy of the code's declarations."""
    from tp_limits.engine.options import FINITE_OPTIONS, LIMIT_OPTIONS, options_markdown
    from tp_limits.experiment.schema import schema_markdown
    return [("api.md", "<!-- options: simulate_limit -->", "<!-- end options -->",
             options_markdown(LIMIT_OPTIONS)),
            ("api.md", "<!-- options: train_finite -->", "<!-- end options -->",
             options_markdown(FINITE_OPTIONS)),
            ("cli.md", "<!-- schema -->", "<!-- end schema -->", schema_markdown())]


def test_option_tables_in_the_docs_are_the_declared_ones():
    """docs/api.md's option tables and docs/cli.md's experiment-file schema are the
    declarations' own Markdown, word for word.  After changing a declaration, rewrite
    them with ``TP_WRITE_DOCS=1 python -m pytest tests/test_docs.py -k option_tables``."""
    import os
    stale = []
    for name, start, end, table in _generated_blocks():
        path = ROOT / "docs" / name
        text = path.read_text(encoding="utf-8")
        a = text.index(start) + len(start)
        b = text.index(end, a)
        if text[a:b] != "\n" + table + "\n":
            if os.environ.get("TP_WRITE_DOCS"):
                path.write_text(text[:a] + "\n" + table + "\n" + text[b:], encoding="utf-8")
            stale.append(f"{name} ({start})")
    assert not stale or os.environ.get("TP_WRITE_DOCS"), f"stale generated tables: {stale}"


def test_the_docs_claims_about_lr_sweep_rows_match_the_code():
    """docs/api.md and docs/theory.md say which sweeps have an ∞ row: a feature-learning
    Adam sweep has one; an unstable SP sweep and Adam in the kernel regime do not, and
    say why. Each claim is checked against what lr_sweep does."""
    import numpy as np
    from conftest import d1

    import tp_limits as tp
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    theory = (ROOT / "docs" / "theory.md").read_text(encoding="utf-8")
    assert "a\nfeature-learning Adam sweep has its `\"inf\"` row" in api
    assert "Adam has one in the feature-learning\n  regime" in theory
    kw = dict(widths=(), seeds=1, particles=2_000, replicates=2, progress=False,
              executor="serial")
    lrs = [0.01, 0.02, 0.04]
    adam = tp.lr_sweep(tp.MLP(tp.mup(1, optimizer="adam"), 2, 1), d1(optimizer=tp.Adam()),
                       lrs, **kw)
    assert "inf" in adam.optimal_lr and not adam.no_limit
    assert np.isfinite(adam.optimal_lr["inf"][0])
    sp = tp.lr_sweep(tp.MLP(tp.sp(2), 2, 1), d1(), lrs, **{**kw, "widths": [32, 64]})
    assert "inf" not in sp.optimal_lr and "unstable" in sp.no_limit
    ntk_adam = tp.ABC([0, "1/2", "1/2"], [0, 0, 0], ["1/2", 1, "1/2"], optimizer="adam")
    assert ntk_adam.classify().regime == "kernel"
    kr = tp.lr_sweep(tp.MLP(ntk_adam, 2, 1), d1(optimizer=tp.Adam()), lrs,
                     **{**kw, "widths": [32, 64]})
    assert "inf" not in kr.optimal_lr and "kernel" in kr.no_limit


def test_the_guides_run_as_written():
    """docs/guides.md's blocks, in order, as a reader runs them; each section's claim:
    NTP's nearest fix is μP, the own-data study's width exponent holds −½, LayerNorm with
    spectral init beside its limit, the Adam limit beside a width-1024 network, Muon's spectral-norm ratios Θ(1), the
    scheduled limit beside width 2048, the phased limit's held-out loss beside width 1024
    (and below the pretrained network's on the new task), the depth exponents as predicted, an interior
    optimum at every width and in the limit, mup's configuration feature-learning, a
    transformer at n = 1024 beside its limit, and its tangent kernel at n = 512 beside the
    limiting one."""
    import re
    import warnings

    import numpy as np
    text = (ROOT / "docs" / "guides.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 14
    ns = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)      # no warning in a guide
        for block in blocks:
            exec(compile(block, "docs/guides.md", "exec"), ns)   # noqa: S102
    assert ns["fixed"].equivalent(ns["tp"].mup(2)) and ns["k"].regime == "kernel"
    study = ns["study"]                              # n^(-1/2) within the 95 % interval
    assert abs(study.exponent + 0.5) <= study.exponent_ci < 0.5
    assert np.all(np.abs(ns["lim_norm"].f_eval[-1] - ns["fin_norm"].f_eval[-1]) < 0.1)
    gap = np.abs(ns["lim_adam"].f_eval[-1] - ns["wide_adam"].f_eval[-1])
    assert np.all(gap < 0.05)
    ratios = ns["wide_muon"].stats["spectral_ratio"][-1]
    assert np.all((ratios > 0.05) & (ratios < 2))
    assert np.all(np.abs(ns["lim_sched"].f_eval[-1] - ns["fin_sched"].f_eval[-1]) < 0.05)
    assert np.abs(ns["fin_tf"].f_eval - ns["lim_tf"].f_eval).max() < 0.2
    K, K_n = ns["K"], np.einsum("avbv->ab", ns["K_n"]) / 8
    assert np.abs(K_n - K).max() < 0.2 * np.abs(K).max()
    lim_loss = ns["lim_phased"].stats["eval_loss"]
    assert abs(lim_loss[-1] - ns["fin_phased"].stats["eval_loss"][-1]) < 0.01
    assert lim_loss[-1] < 0.5 * lim_loss[ns["task"].steps]      # the probe learned the task
    dc = ns["dc"]
    assert all(abs(s - dc.predicted[q]) < 0.15 for q, (s, _) in dc.slopes.items())
    opt = ns["sweep"].optimal_lr
    assert set(opt) == {64, 256, "inf"} and all(0.1 < opt[k][0] < 10 for k in opt)
    assert ns["cfg"].net.param.classify().regime == "feature_learning"


def test_the_signatures_in_api_md_are_the_code_s():
    """Every `### tp.name(...)` heading of docs/api.md lists the function's parameters in
    order with its defaults, as inspect.signature reads them from the code."""
    import inspect
    import re

    import numpy as np

    import tp_limits as tp
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    headings = re.findall(r"^### `(tp\.[\w.]+)\((.*?)\)`", text, flags=re.M)
    assert len(headings) >= 20
    for name, args in headings:
        obj = tp
        for part in name.split(".")[1:]:
            obj = getattr(obj, part)
        params = inspect.signature(obj).parameters
        given = [p.strip() for p in re.split(r",\s*(?![^()]*\))", args) if p.strip()]
        assert [p.split("=")[0].strip().lstrip("*") for p in given] == list(params), name
        for p in given:
            if "=" in p:
                key, value = (x.strip() for x in p.split("=", 1))
                want, have = eval(value, {"np": np, "tp": tp}), params[key].default   # noqa: S307
                assert want == have or (isinstance(have, np.dtype) and np.dtype(want) == have), \
                    (name, key, value, have)


#: the tables of docs/theory.md that are derivations or definitions, by their header row;
#: any other table there is a measurement and belongs in docs/results.md
THEORY_TABLES = ("| § | topic |", "| symbol | value | meaning |",
                 "| name | a | b | c | r (L ≥ 2) | r (L = 1) | regime |",
                 "| quantity | exponent of n |", "| where the error comes from | ν |",
                 "| class | condition | meaning |",
                 "| representation | engine | a vector is | its product `W^l x` |",
                 "| `transform` | f(x), x = σ/σ_max | T(Φ) |")


def test_measured_tables_live_in_results_with_the_script_that_regenerates_them():
    """docs/theory.md keeps the derivations: every table it holds is one of the known
    derivation tables; each section of docs/results.md names a `python studies/...`
    command whose script exists and compiles, and holds its table; every pointer from
    theory.md lands on an anchor of results.md."""
    import re
    theory = (ROOT / "docs" / "theory.md").read_text(encoding="utf-8")
    lines = theory.splitlines()
    headers = [l.strip() for i, l in enumerate(lines)
               if l.startswith("|") and (i == 0 or not lines[i - 1].startswith("|"))]
    measured = [h for h in headers if h not in THEORY_TABLES]
    assert not measured, f"measured tables in docs/theory.md (move them to results.md): " \
                         f"{measured}"
    results = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', results))
    pointed = set(re.findall(r"\(results\.md#([\w-]+)\)", theory))
    assert pointed and pointed <= anchors, f"theory.md points at missing anchors: " \
                                           f"{pointed - anchors}"
    sections = results.split('<a id="')[1:]
    assert len(sections) == len(anchors) >= 15
    for section in sections:
        name = section.split('"', 1)[0]
        command = re.search(r"Regenerate: `python (studies/\w+\.py)[^`]*`", section)
        assert command, f"results.md section {name} names no regenerating script"
        script = ROOT / command.group(1)
        assert script.exists(), f"{name}: {script} does not exist"
        compile(script.read_text(encoding="utf-8"), str(script), "exec")
        assert "\n| " in section, f"results.md section {name} holds no table"
