"""Audit arguments are parsed with sqlglot, checked when the project loads, rendered to Spark SQL."""

from __future__ import annotations

import pytest

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Audit, AuditRef, Model
from mesh_dagster.core.project.audits import audit_query, check_audit_refs
from mesh_dagster.core.sql.renderer import RenderContext

EMPTY = MacroRegistry()
CTX = RenderContext(this_model="mesh__db.db__m__1")


def _model(*refs: AuditRef, dialect: str = "spark") -> Model:
    return Model(name="db.m", kind=ModelKind(name=KindName.FULL), dialect=dialect, query="SELECT 1 AS a",
                 audits=list(refs), path="models/m.sql", line=3, property_lines={"audits": 4})


def _sql(ref: AuditRef, dialect: str = "spark", audits: dict[str, Audit] | None = None, ctx=CTX) -> str:
    return audit_query(ref, _model(ref, dialect=dialect), audits or {}, ctx, EMPTY)[0]


def test_commas_inside_quoted_values_stay_in_their_value() -> None:
    ref = AuditRef(name="accepted_values", args={"column": "x", "is_in": "('a,b','c')"})
    assert _sql(ref) == "SELECT * FROM mesh__db.db__m__1 WHERE NOT x IN ('a,b', 'c')"


def test_nested_parentheses_and_commas_in_criteria() -> None:
    ref = AuditRef(name="forall", args={"criteria": "(a IN (1, 2), COALESCE(b, 0) > 0, c = 'x,y')"})
    assert _sql(ref) == ("SELECT * FROM mesh__db.db__m__1 "
                         "WHERE NOT ((a IN (1, 2)) AND (COALESCE(b, 0) > 0) AND (c = 'x,y'))")


@pytest.mark.parametrize("dialect, written", [("spark", r"('it\'s', 'b')"), ("duckdb", "('it''s', 'b')")])
def test_escaped_quotes_in_the_models_dialect(dialect: str, written: str) -> None:
    ref = AuditRef(name="accepted_values", args={"column": "x", "is_in": written})
    assert _sql(ref, dialect) == r"SELECT * FROM mesh__db.db__m__1 WHERE NOT x IN ('it\'s', 'b')"


def test_columns_list_and_condition() -> None:
    ref = AuditRef(name="not_null", args={"columns": "[a, b]", "condition": "a > 0"})
    assert _sql(ref) == "SELECT * FROM mesh__db.db__m__1 WHERE (a IS NULL OR b IS NULL) AND (a > 0)"


def test_macros_in_arguments_are_expanded_before_parsing() -> None:
    ref = AuditRef(name="number_of_rows", args={"threshold": "@min_rows"})
    ctx = RenderContext(this_model="t", variables={"min_rows": 5})
    assert _sql(ref, ctx=ctx) == "SELECT n FROM (SELECT COUNT(*) AS n FROM t) AS a WHERE n <= 5"


def test_user_audit_arguments_are_transpiled_to_the_audits_dialect() -> None:
    audit = Audit(name="in_set", query="SELECT * FROM @this_model WHERE @column NOT IN @values",
                  defaults={"column": "a"}, path="audits/in_set.sql", line=1)
    ref = AuditRef(name="in_set", args={"values": "('x,y', 'it''s')"})
    assert _sql(ref, "duckdb", {"in_set": audit}) == r"SELECT * FROM mesh__db.db__m__1 WHERE NOT a IN ('x,y', 'it\'s')"


# -- checked at load ------------------------------------------------------------------------------

USER = Audit(name="positive", query="SELECT * FROM @this_model WHERE @column < 0", path="audits/positive.sql", line=1)


@pytest.mark.parametrize("ref, message", [
    (AuditRef(name="not_nul"), "Model db.m uses unknown audit 'not_nul'"),
    (AuditRef(name="not_null", args={"colums": "(a)"}),
     "Audit 'not_null' has no argument 'colums' (its arguments: columns, condition)"),
    (AuditRef(name="accepted_values", args={"column": "a"}), "Audit 'accepted_values' needs the argument `is_in := ...`"),
    (AuditRef(name="accepted_values_non_blocking", args={"is_in": "(1)"}),
     "Audit 'accepted_values_non_blocking' needs the argument `column := ...`"),
    (AuditRef(name="not_null", args={"columns": "(a, "}), "Cannot parse argument `columns := (a, ` of audit 'not_null'"),
    (AuditRef(name="accepted_values", args={"column": "a", "is_in": "('x)"}),
     "Cannot parse argument `is_in := ('x)` of audit 'accepted_values': a string or quoted name is not closed"),
    (AuditRef(name="positive"), "Audit 'positive' needs the argument `column := ...`"),
    (AuditRef(name="positive", args={"column": "a", "colum": "b"}),
     "Audit 'positive' has no argument 'colum' (its query in audits/positive.sql:1 never uses @colum)"),
    (AuditRef(name="number_of_rows", args={"threshold": "@nope"}), "Macro variable '@nope' is undefined"),
])
def test_bad_attachments_are_refused_at_load_naming_the_model_file(ref: AuditRef, message: str) -> None:
    with pytest.raises(ModelError) as e:
        check_audit_refs(_model(ref), {"positive": USER}, EMPTY, {})
    assert e.value.path == "models/m.sql" and e.value.line == 4  # where `audits (...)` is written
    assert message in e.value.message


def test_good_attachments_pass_the_load_check() -> None:
    refs = [AuditRef(name="positive", args={"column": "a"}), AuditRef(name="not_null", args={"columns": "(a)"}),
            AuditRef(name="number_of_rows", args={"threshold": "@min_rows"})]
    check_audit_refs(_model(*refs), {"positive": USER}, EMPTY, {"min_rows": 1})


def test_a_single_string_argument_keeps_its_escapes_from_the_model_file() -> None:
    from pathlib import Path

    from mesh_dagster.core.config.config import ModelDefaults
    from mesh_dagster.core.project.model_reader import read_model_file

    text = ("MODEL (name db.m, kind FULL,\n"
            "  audits (accepted_values(column := x, is_in := 'it\\'s')));\n"
            "SELECT 'a' AS x\n")
    model = read_model_file(text, "models/m.sql", Path("models/m.sql"), ModelDefaults())
    assert audit_query(model.audits[0], model, {}, CTX, EMPTY)[0] == \
        r"SELECT * FROM mesh__db.db__m__1 WHERE NOT x IN ('it\'s')"


def test_audit_defaults_keep_string_escapes_and_refuse_unnamed_items() -> None:
    from mesh_dagster.core.project.model_reader import read_audit_file

    [audit] = read_audit_file("AUDIT (name no_value, defaults (bad := 'it\\'s'));\n"
                              "SELECT * FROM @this_model WHERE x = @bad", "audits/a.sql")
    assert audit.defaults == {"bad": r"'it\'s'"}
    with pytest.raises(ModelError, match=r"audits/a.sql:1: Audit defaults are written `name := value`, got "
                                         r"'oops'"):
        read_audit_file("AUDIT (name no_value, defaults ('oops'));\nSELECT 1", "audits/a.sql")
