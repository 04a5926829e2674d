"""Every example notebook runs from top to bottom (a broken notebook fails CI)."""
import json
from pathlib import Path

import nbformat
import pytest
from conftest import child_env
from nbclient import NotebookClient

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.ipynb"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        f"{path.name}: outputs must be stripped in git"
    # nbformat 4.5 makes cell ids required (a missing one will become an error); read the
    # file itself, since nbformat.read fills them in
    raw = json.loads(path.read_text(encoding="utf-8"))["cells"]
    assert all("id" in c for c in raw), f"{path.name}: a cell without an id"
    env = child_env()
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute(
                       **({} if env is None else {"env": env}))
