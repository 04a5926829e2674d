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
