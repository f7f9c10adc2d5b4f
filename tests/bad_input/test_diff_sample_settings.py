"""`plan.data_diff` settings that say what a diff's rows may show, misspelled: refused in one line
naming the setting and its line in config.yaml before anything is written. A mask pattern is a
column name's words (no wildcards); a `no_samples` selector must select a model (a typo would
otherwise show the rows it meant to hide)."""

from __future__ import annotations

from pathlib import Path

from project_builder import CONFIG, write_project

from bad_input.harness import assert_refused, mesh, nothing_written

FILES = {"models/people.sql": "MODEL (name s.people, kind FULL, grain (id), tags [pii]);\n"
                              "SELECT 1 AS id, 'a' AS ssn\n"}
LINE = CONFIG.count("\n") + 4  # the list's first item (after plan:, data_diff:, the key)


def _refused(tmp_path: Path, data_diff: str, *fragments: str) -> str:
    root = write_project(tmp_path / "p", FILES, CONFIG + f"plan:\n  data_diff:\n{data_diff}")
    with nothing_written(root):
        result = mesh(root, "plan", "dev", "--explain")
    return assert_refused(result, *fragments)


def test_a_mask_pattern_with_a_wildcard_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, "    masked_columns:\n      - '*_hash'\n",
             f"config.yaml:{LINE}: plan.data_diff.masked_columns.0: '*_hash' is not a column name pattern: write "
             "the words of a name (`tax_id`, `iban`), without wildcards")


def test_a_no_samples_selector_that_selects_nothing_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, "    no_samples:\n      - 'tag:piii'\n",
             f"config.yaml:{LINE}: plan.data_diff.no_samples 'tag:piii' matches no model. Did you mean: tag:pii?")


def test_an_empty_no_samples_selector_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, "    no_samples: ['tag:pii', ' ']\n",
             f"config.yaml:{LINE - 1}: plan.data_diff.no_samples.1: a selector cannot be empty")
