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


def test_two_command_lines_and_ci_runs_exactly_the_second():
    readme = (ROOT / "README.md").read_text()
    setup = re.search(r"## Set up and run.*?```bash\n(.*?)```", readme, flags=re.S).group(1)
    lines = [l for l in setup.splitlines() if l.strip()]
    assert len(lines) == 2
    assert lines[0].startswith("pip install") and "tp-limits demo" in lines[0]
    assert lines[1].startswith("pip install") and "pytest" in lines[1]
    run = (ROOT / ".ci" / "run").read_text().splitlines()
    assert lines[1] in [l.strip() for l in run if not l.startswith("#")]
