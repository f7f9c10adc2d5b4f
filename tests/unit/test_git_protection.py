"""Git protection cannot be bypassed by configuration: a `git.protected` branch deploys prod through
a reviewed plan only, so a config.yaml where prod is not a protected environment is refused, at its
line, naming both keys; the README's example is safe as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mesh_dagster.core.errors import ConfigError
from mesh_dagster.core.project.config_file import load_config

README = Path(__file__).resolve().parents[2] / "README.md"


def _load(tmp_path: Path, text: str):
    (tmp_path / "config.yaml").write_text(text)
    return load_config(tmp_path)


@pytest.mark.parametrize("git, line", [
    ("git:\n  repo: ../w.git\n  protected: [main]\n", 3),
    ("git:\n  repo: ../w.git\n", 1),  # `protected` defaults to [main]: the same promise
])
def test_a_protected_branch_without_a_protected_prod_is_refused_naming_both_keys(tmp_path, git, line):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, git)
    message = str(e.value)
    assert f"config.yaml:{line}:" in message
    assert "pushes to main plan prod for review, but protected_environments does not list prod" in message
    assert "git.protected" in message and "protected_environments" in message


def test_a_protected_prod_or_no_protected_branch_is_accepted(tmp_path):
    config = _load(tmp_path, "protected_environments:\n  prod:\n    approvers: [bob@example.com]\n"
                             "git:\n  repo: ../w.git\n  protected: [main]\n")
    assert config.protection("prod") is not None and config.git is not None
    assert _load(tmp_path, "git:\n  repo: ../w.git\n  protected: []\n").git.protected == []  # explicit: no review


def test_the_readme_example_is_safe_as_written(tmp_path):
    text = README.read_text()
    block = re.search(r"```yaml\n(protected_environments:\n.*?git:\n.*?)```", text, re.S)
    assert block is not None, "the README's git example"
    config = _load(tmp_path, block.group(1))
    assert config.git is not None and config.git.protected == ["main"]
    assert config.protection("prod") is not None  # a push to main records a pending plan
