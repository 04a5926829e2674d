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
