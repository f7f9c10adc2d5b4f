"""Project YAML that PyYAML would read wrongly or endlessly: refused at load, in one line naming the
file, the line and the key, before anything is written.

- A key given twice: YAML keeps the last one silently, so a second `protected_environments: {}`
  would unprotect prod without a word.
- Aliases that expand to billions of values ("billion laughs"): they used to end after minutes at
  gigabytes of memory ("Unexpected MemoryError ... This is a bug"), or made `mesh info` print
  hundreds of megabytes.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from bad_input.harness import EXAMPLE, assert_refused, copy_example, mesh, nothing_written

CONFIG_LINES = len((EXAMPLE / "config.yaml").read_text().splitlines())


def _append_config(project: Path, text: str) -> int:
    """Append `text` to config.yaml after a blank line; the line number of its first line."""
    path = project / "config.yaml"
    path.write_text(path.read_text() + "\n" + textwrap.dedent(text).lstrip())
    return CONFIG_LINES + 2


def _bomb(indent: str, levels: int = 9) -> str:
    """Nine aliases of nine aliases of ...: 9**levels values once expanded, a few lines of text."""
    lines = [f'{indent}l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"{indent}l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_example(tmp_path / "p")


def test_duplicate_protected_environments_is_refused(project: Path) -> None:
    first = _append_config(project, """\
        protected_environments:
          prod:
            approvers: [alice@example.com]
        protected_environments: {}
        """)
    with nothing_written(project):
        result = mesh(project, "plan", "--explain")
    assert_refused(result, f"config.yaml:{first + 3}:", "duplicate key 'protected_environments'", f"line {first}")


def test_duplicate_nested_config_key_is_refused(project: Path) -> None:
    path = project / "config.yaml"
    lines = path.read_text().splitlines()
    first = next(i for i, text in enumerate(lines) if text.startswith("      master: local[*]")) + 1
    lines.insert(first, "      master: local[2]")
    path.write_text("\n".join(lines) + "\n")
    line = first + 1
    with nothing_written(project):
        result = mesh(project, "info")
    assert_refused(result, f"config.yaml:{line}:", "duplicate key 'master'", f"line {line - 1}")


def test_duplicate_key_in_external_models_is_refused(project: Path) -> None:
    (project / "external_models.yaml").write_text("- name: raw.events\n  columns:\n    a: int\n    a: string\n")
    with nothing_written(project):
        result = mesh(project, "plan", "--explain")
    assert_refused(result, "external_models.yaml:4:", "duplicate key 'a'", "line 3")


def test_duplicate_key_in_a_unit_test_is_refused(project: Path) -> None:
    path = project / "tests" / "test_full_model.yaml"
    lines = path.read_text().splitlines()
    assert lines[1] == "  model: sqlmesh_example.full_model"
    lines.insert(2, "  model: sqlmesh_example.incremental_model")
    path.write_text("\n".join(lines) + "\n")
    with nothing_written(project):
        result = mesh(project, "test")
    assert_refused(result, "tests/test_full_model.yaml:3:", "duplicate key 'model'", "line 2")


def test_merge_keys_and_small_aliases_still_load(project: Path) -> None:
    """`<<: *defaults` with an override and a reused list are ordinary YAML, not duplicates or bombs."""
    (project / "external_models.yaml").write_text(textwrap.dedent("""\
        - &events
          name: raw.events
          columns: &cols
            a: int
            b: string
        - <<: *events
          name: raw.events_copy
          columns: *cols
        """))
    result = mesh(project, "plan", "--explain")
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("where", ["variables", "connection.config"])
def test_alias_bomb_is_refused_fast(project: Path, where: str) -> None:
    if where == "variables":
        first = _append_config(project, "variables:\n" + _bomb("  ")) + 1  # the line of l0
    else:
        path = project / "config.yaml"
        text = path.read_text()
        anchor = "      master: local[*]           # <-- or a cluster master, e.g. spark://host:7077, yarn\n"
        assert anchor in text
        path.write_text(text.replace(anchor, anchor + "      config:\n" + _bomb("        "), 1))
        first = text.splitlines().index(anchor.rstrip("\n")) + 3  # the line of l0
    started = time.monotonic()
    with nothing_written(project):
        result = mesh(project, "info")
    elapsed = time.monotonic() - started
    # The budget (100,000 values) is passed by the first alias of l5 (*l4, 66,430 values).
    assert_refused(result, f"config.yaml:{first + 5}:", "alias bomb", "*l4")
    assert elapsed < 5, f"took {elapsed:.1f} s"
    assert len(result.stdout) < 1000


def test_recursive_alias_is_refused(project: Path) -> None:
    first = _append_config(project, "variables:\n  loop: &loop\n    - a\n    - *loop\n")
    with nothing_written(project):
        result = mesh(project, "plan", "--explain")
    assert_refused(result, f"config.yaml:{first + 3}:", "alias *loop is used inside the node it names")
