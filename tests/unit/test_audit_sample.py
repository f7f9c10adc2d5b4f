"""Some of a failed audit's rows (core/models/audit_sample.py): bounded, stored as JSON with its
verdict, shown as a Markdown table whose cells no value can break or disguise."""

from __future__ import annotations

from mesh_dagster.core.models.audit_sample import SAMPLE_ROWS, VALUE_CHARS, AuditSample


def test_a_sample_keeps_at_most_its_rows_and_cuts_long_values() -> None:
    sample = AuditSample.of(["id", "doc"], [(i, "x" * (VALUE_CHARS + 50)) for i in range(SAMPLE_ROWS + 5)])
    assert len(sample.rows) == SAMPLE_ROWS
    assert sample.rows[0] == ("0", "x" * VALUE_CHARS + "…")
    assert sample.markdown(15).startswith(f"{SAMPLE_ROWS} of 15 failing row(s):")


def test_nulls_pipes_newlines_and_hidden_characters_cannot_break_the_table() -> None:
    sample = AuditSample.of(["a|b", "v"], [(None, "x|y\nz"), (float("nan"), "\u202eevil <b>bold</b>")])
    lines = sample.markdown(2).splitlines()
    assert lines[0] == "2 failing row(s):"
    assert lines[2:] == ["| `a\\|b` | `v` |", "|---|---|", "| NULL | `x\\|y\\nz` |",
                         "| NULL | `\\u202eevil <b>bold</b>` |"]  # a code span: no HTML or Markdown rendered


def test_a_sample_round_trips_through_its_stored_text_and_bad_text_is_none() -> None:
    sample = AuditSample.of(["id"], [(1,), (None,)])
    assert AuditSample.from_json(sample.to_json()) == sample
    assert AuditSample.from_json(None) is None and AuditSample.from_json("{not json") is None
