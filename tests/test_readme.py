"""README.md stays true: its Python blocks run, its commands exist in .ci/run."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_blocks_run():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 3
    namespace = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)   # noqa: S102
    assert namespace["k"].regime == "feature_learning"
    assert -0.7 < namespace["study"].exponent < -0.3


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"`(python -m pytest[^`]*)`", readme).group(1)
    assert command in (ROOT / ".ci" / "run").read_text()
