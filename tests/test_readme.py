"""The README's Python examples run, and its test command is CI's."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
CI = Path(__file__).resolve().parents[1] / ".ci" / "run"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("code", _python_blocks())
def test_readme_example_runs(code, capsys):
    exec(compile(code, "README.md", "exec"), {})


def test_readme_commands_match_ci():
    text = README.read_text()
    setup = re.search(r"## Set-up.*?```bash\n(.*?)```", text, flags=re.S).group(1)
    lines = [ln.strip() for ln in setup.strip().splitlines()]
    assert len(lines) == 2, "the README's set-up is exactly two commands"
    ci = CI.read_text()
    assert 'pip install --quiet -e ".[test]"' in ci and "python -m skgpstruct demo" in ci
    assert lines[1] in ci.splitlines()
