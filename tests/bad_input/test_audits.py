"""Bad audit attachments are refused when the project loads: one line naming the model file and
line, before anything is created (they used to fail during an apply, after tables were built)."""

import pytest

from bad_input.harness import assert_refused, copy_example, mesh, nothing_written

FULL = "models/full_model.sql"
ATTACHED = "audits (assert_positive_order_ids),"

CASES = [
    # (what replaces the full model's audits, fragments of the one-line message)
    ("audits (not_nul(columns := (item_id))),", ["Model sqlmesh_example.full_model uses unknown audit 'not_nul'"]),
    ("audits (not_null(colums := (item_id))),",
     ["Audit 'not_null' has no argument 'colums' (its arguments: columns, condition)"]),
    ("audits (accepted_values(column := item_id)),", ["Audit 'accepted_values' needs the argument `is_in := ...`"]),
    ("audits (number_of_rows_non_blocking()),",
     ["Audit 'number_of_rows_non_blocking' needs the argument `threshold := ...`"]),
    ("audits (accepted_values(column := item_id, is_in := (1, 2 +))),",
     ["Cannot parse argument `is_in := (1, 2 +)` of audit 'accepted_values': the expression is incomplete (column 8)"]),
    ("audits (forall(criteria := (item_id >))),",
     ["Cannot parse argument `criteria := (item_id >)` of audit 'forall': the expression is incomplete"]),
    ("audits (number_of_rows(threshold := @min_rows)),", ["Macro variable '@min_rows' is undefined"]),
    ("audits (positive_column),", ["Audit 'positive_column' needs the argument `column := ...`"]),
    ("audits (positive_column(column := item_id, colum := num_orders)),",
     ["Audit 'positive_column' has no argument 'colum'", "audits/positive_column.sql:1 never uses @colum"]),
    ("audits (accepted_range(column := item_id, max_v := 1, inclusive := maybe)),",
     ["Audit 'accepted_range': the argument `inclusive` must be true or false, got maybe"]),
    ("audits (mutually_exclusive_ranges(lower_bound_column := item_id, upper_bound_column := upper)),",
     ["Audit mutually_exclusive_ranges: column 'upper' is not an output column of sqlmesh_example.full_model"]),
]


@pytest.fixture
def project(tmp_path):
    root = copy_example(tmp_path / "p")
    (root / ".mesh").mkdir()
    (root / "audits" / "positive_column.sql").write_text(
        "AUDIT (name positive_column);\nSELECT * FROM @this_model WHERE @column < 0\n")
    return root


@pytest.mark.parametrize("audits, fragments", CASES, ids=[a[:60] for a, _ in CASES])
def test_bad_audit_attachment_is_refused_at_load(project, audits, fragments):
    model = project / FULL
    model.write_text(model.read_text().replace(ATTACHED, audits))
    with nothing_written(project):
        outcome = mesh(project, "plan", "--auto-apply")
    assert_refused(outcome, f"{FULL}:6:", *fragments)  # the line of `audits (...)`
