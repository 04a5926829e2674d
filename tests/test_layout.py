"""The package's layering: data flow one way, no engine importing the other."""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "tp_limits"
#: package part -> parts it must never import (directly, at any depth of its modules)
FORBIDDEN = {
    "abc": {"spec", "engine", "finite", "limit", "analysis", "experiment", "cli", "numpy"},
    "spec": {"engine", "finite", "limit", "analysis", "experiment", "cli"},
    "engine": {"finite", "limit", "analysis", "experiment", "cli"},
    "finite": {"limit", "analysis", "experiment", "cli"},
    "limit": {"finite", "analysis", "experiment", "cli"},
    "analysis": {"experiment", "cli"},
    "experiment": {"cli"},
    "adapters": {"experiment", "cli"},
    "transformer": {"experiment", "cli"},
}


def imported_parts(path: Path) -> set:
    """First package component of every tp_limits import in the file (and third-party tops)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(PKG).parts[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel[: len(rel) - (node.level - 1)]) if node.level > 1 else list(rel)
                target = base + (node.module.split(".") if node.module else [])
                if target:
                    out.add(target[0])
                else:                      # "from . import x" at the top of the package
                    out.update(a.name for a in node.names)
            elif node.module and node.module.split(".")[0] == "tp_limits":
                parts = node.module.split(".")
                out.add(parts[1] if len(parts) > 1 else "")
            elif node.module:
                out.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
    return out


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_no_import_runs_against_the_data_flow(part):
    bad = {}
    for path in (PKG / part).rglob("*.py"):
        hit = imported_parts(path) & FORBIDDEN[part]
        if hit:
            bad[path.relative_to(PKG).as_posix()] = sorted(hit)
    assert not bad, bad


def test_limit_engines_are_folders():
    limit = PKG / "limit"
    assert {p.name for p in limit.iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        "kernel", "fused", "montecarlo", "exact"}
    flat = sorted(p.name for p in limit.glob("*.py"))
    assert flat == ["__init__.py", "base.py", "options.py", "replicates.py", "result.py",
                    "sampling.py", "select.py", "simulate.py"]
