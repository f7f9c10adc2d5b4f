"""Every built-in audit SQLMesh documents is known, with its documented arguments; a missing,
unknown or unusable argument is refused when the project loads, at the model's `audits` line
(their data on Spark: tests/spark/test_builtin_audits_spark.py)."""

from __future__ import annotations

import pytest

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import AuditRef, Model
from mesh_dagster.core.project.audits import BUILTIN_AUDITS, audit_query, check_audit_refs
from mesh_dagster.core.sql.renderer import RenderContext

# The built-in audits of SQLMesh's documentation (concepts/audits), each also `<name>_non_blocking`.
DOCUMENTED = {
    "forall", "number_of_rows", "not_null", "at_least_one", "not_null_proportion", "not_constant", "unique_values",
    "unique_combination_of_columns", "accepted_values", "not_accepted_values", "sequential_values", "accepted_range",
    "mutually_exclusive_ranges", "not_empty_string", "string_length_equal", "string_length_between", "valid_uuid",
    "valid_email", "valid_url", "valid_http_method", "match_regex_pattern_list", "not_match_regex_pattern_list",
    "match_like_pattern_list", "not_match_like_pattern_list", "mean_in_range", "stddev_in_range", "z_score",
    "kl_divergence", "chi_square",
}


def _model(*refs: AuditRef) -> Model:
    return Model(name="db.m", kind=ModelKind(name=KindName.FULL), dialect="duckdb", query="SELECT 1 AS a",
                 audits=list(refs), path="models/m.sql", line=3, property_lines={"audits": 5})


def test_every_documented_built_in_is_known() -> None:
    assert set(BUILTIN_AUDITS) == DOCUMENTED


@pytest.mark.parametrize("ref, sql", [
    (AuditRef(name="accepted_range", args={"column": "price", "min_v": "1", "max_v": "100"}),
     "SELECT * FROM t WHERE price < 1 OR price > 100"),
    (AuditRef(name="accepted_range", args={"column": "price", "min_v": "0", "max_v": "100", "inclusive": "false"}),
     "SELECT * FROM t WHERE price <= 0 OR price >= 100"),
    (AuditRef(name="accepted_range_non_blocking", args={"column": "price", "max_v": "9", "condition": "ok"}),
     "SELECT * FROM t WHERE (price > 9) AND (ok)"),
    (AuditRef(name="number_of_rows", args={"threshold": "10"}),  # "more than 10 rows"
     "SELECT n FROM (SELECT COUNT(*) AS n FROM t) AS a WHERE n <= 10"),
    (AuditRef(name="string_length_between", args={"column": "zip", "min_v": "4", "max_v": "60", "inclusive": "FALSE"}),
     "SELECT * FROM t WHERE LENGTH(zip) <= 4 OR LENGTH(zip) >= 60"),
    (AuditRef(name="match_regex_pattern_list", args={"column": "todo", "patterns": r"('^\d.*', '.*!$')"}),
     r"SELECT * FROM t WHERE NOT todo IS NULL AND (NOT (todo RLIKE '^\\d.*' OR todo RLIKE '.*!$'))"),
])
def test_documented_examples_render_to_spark_sql(ref: AuditRef, sql: str) -> None:
    assert audit_query(ref, _model(ref), {}, RenderContext(this_model="t"), MacroRegistry())[0] == sql


@pytest.mark.parametrize("ref, message", [
    (AuditRef(name="accepted_range", args={"min_v": "1"}), "Audit 'accepted_range' needs the argument `column := ...`"),
    (AuditRef(name="accepted_range", args={"column": "a", "min": "1"}),
     "Audit 'accepted_range' has no argument 'min' (its arguments: column, min_v, max_v, inclusive, condition)"),
    (AuditRef(name="accepted_range", args={"column": "a"}),
     "Audit 'accepted_range': needs `min_v := ...` or `max_v := ...` (or both)"),
    (AuditRef(name="string_length_between", args={"column": "a", "min_v": "1", "inclusive": "a > 1"}),
     "Audit 'string_length_between': the argument `inclusive` must be true or false, got a > 1"),
    (AuditRef(name="chi_square_non_blocking", args={"column": "a", "target_column": "b"}),
     "Audit 'chi_square_non_blocking' needs the argument `critical_value := ...`"),
    (AuditRef(name="valid_uuid", args={"column": "a", "patterns": "('x')"}),
     "Audit 'valid_uuid' has no argument 'patterns' (its arguments: column, condition)"),
    (AuditRef(name="not_null_non_blank", args={"column": "a"}), "Model db.m uses unknown audit 'not_null_non_blank'"),
])
def test_bad_arguments_are_refused_at_load_with_the_models_file_and_line(ref: AuditRef, message: str) -> None:
    with pytest.raises(ModelError) as e:
        check_audit_refs(_model(ref), {}, MacroRegistry(), {})
    assert (e.value.path, e.value.line, e.value.message) == ("models/m.sql", 5, message)
