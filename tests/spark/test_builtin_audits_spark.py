"""SQLMesh's built-in audits (issue 22) on Spark: a DuckDB-dialect model carrying all of them passes
its apply; each one fails on a small table of bad rows (its query run on a temporary view, in the
same session). Argument checks without Spark: tests/unit/test_builtin_audits.py."""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import AuditRef, Model
from mesh_dagster.core.project.audits import audit_query
from mesh_dagster.core.sql.renderer import RenderContext

pytestmark = pytest.mark.spark

CONFIG = "model_defaults:\n  dialect: duckdb\n  cron: '@daily'\n"

GOOD_ROWS = """
  (1, 0, 10, 'GET', 'jim1', '12345', '123e4567-e89b-12d3-a456-426614174000', 'a.b@c.com', 'https://x.org/p', 'n', 'x', 'u', 'y'),
  (2, 10, 20, 'POST', 'pam2', '12345', '123e4567-e89b-42d3-8456-426614174001', 'd@e.org', 'ftp://f.net', NULL, 'x', 'v', 'x'),
  (3, 20, 30, 'PUT', 'jim3', '12345', '00000000-0000-1000-9000-000000000000', 'x_y@z-w.io', 'http://a.b/c?d', 'n', 'y', 'u', 'x'),
  (4, 30, 40, 'GET', 'pam4', '12345', NULL, NULL, NULL, 'n', 'y', 'v', 'y')
"""
COLUMNS = "id, lo, hi, method, name, zip, uid, email, url, note, a, b, c"

AUDITS = r"""
    forall(criteria := (id > 0, LENGTH(name) > 0)),
    number_of_rows(threshold := 3),
    not_null(columns := (id, name)),
    at_least_one(column := note),
    not_null_proportion(column := note, threshold := 0.5),
    not_constant(column := id),
    unique_values(columns := (id, name)),
    unique_combination_of_columns(columns := (a, b)),
    accepted_values(column := method, is_in := ('GET', 'POST', 'PUT')),
    not_accepted_values(column := method, is_in := ('FOO')),
    sequential_values(column := id, interval := 1),
    accepted_range(column := id, min_v := 1, max_v := 4),
    accepted_range_non_blocking(column := id, min_v := 0, max_v := 5, inclusive := false),
    mutually_exclusive_ranges(lower_bound_column := lo, upper_bound_column := hi),
    not_empty_string(column := name),
    string_length_equal(column := zip, v := 5),
    string_length_between(column := zip, min_v := 5, max_v := 5),
    valid_uuid(column := uid),
    valid_email(column := email),
    valid_url(column := url),
    valid_http_method(column := method),
    match_regex_pattern_list(column := name, patterns := ('^jim\d', '^pam\d')),
    not_match_regex_pattern_list(column := name, patterns := ('^!.*', '.*!$')),
    match_like_pattern_list(column := name, patterns := ('jim%', 'pam%')),
    not_match_like_pattern_list(column := name, patterns := ('%doe', '%smith')),
    mean_in_range(column := id, min_v := 2, max_v := 3),
    stddev_in_range(column := id, min_v := 1, max_v := 2),
    z_score(column := id, threshold := 3),
    kl_divergence(column := a, target_column := c, threshold := 0.1),
    chi_square(column := a, target_column := b, critical_value := 0.5)
"""


@pytest.fixture
def schema(engine):
    name = f"ba_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def test_a_model_with_every_built_in_audit_passes_its_apply(tmp_path, engine, schema) -> None:
    files = {"models/checked.sql": f"MODEL (name {schema}.checked, kind FULL, audits ({AUDITS}));\n"
                                   f"SELECT * FROM (VALUES {GOOD_ROWS}) AS t({COLUMNS})\n"}
    ctx = Context(write_project(tmp_path / "p", files, CONFIG), engine=engine)
    try:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02 00:00:00"))
        assert engine.session.fetchall(f"SELECT COUNT(*) FROM {schema}.checked")[0][0] == 4
    finally:
        ctx.close()


BAD_ROWS = """
  (1, 0, 10, 7, 'GET', 'abc', '1234', 'not-a-uuid', 'a@b', 'htp://x', NULL, 'x', 'u'),
  (3, 5, 20, 7, 'FOO', '', '12345', NULL, NULL, NULL, NULL, 'x', 'u'),
  (3, 30, 40, 7, 'GET', 'abd', '12345', NULL, NULL, NULL, 'n', 'y', 'v'),
  (200, 50, 60, 7, 'GET', 'abe', '12345', NULL, NULL, NULL, 'n', 'y', 'v')
"""
FAILING = [
    ("forall", {"criteria": "(id < 100)"}),
    ("number_of_rows", {"threshold": "4"}),  # 4 rows do not exceed 4
    ("not_null", {"columns": "(note)"}),
    ("at_least_one", {"column": "url", "condition": "id > 1"}),
    ("not_null_proportion", {"column": "note", "threshold": "0.3"}),
    ("not_constant", {"column": "k"}),
    ("unique_values", {"columns": "(id)"}),
    ("unique_combination_of_columns", {"columns": "(id, k)"}),
    ("accepted_values", {"column": "method", "is_in": "('GET')"}),
    ("not_accepted_values", {"column": "method", "is_in": "('FOO')"}),
    ("sequential_values", {"column": "id"}),
    ("accepted_range", {"column": "id", "min_v": "1", "max_v": "100"}),
    ("accepted_range", {"column": "id", "min_v": "1", "max_v": "200", "inclusive": "false"}),
    ("mutually_exclusive_ranges", {"lower_bound_column": "lo", "upper_bound_column": "hi"}),
    ("not_empty_string", {"column": "name"}),
    ("string_length_equal", {"column": "zip", "v": "5"}),
    ("string_length_between", {"column": "zip", "min_v": "5", "max_v": "6"}),
    ("valid_uuid", {"column": "uid"}),
    ("valid_email", {"column": "email"}),
    ("valid_url", {"column": "url"}),
    ("valid_http_method", {"column": "method"}),
    ("match_regex_pattern_list", {"column": "name", "patterns": r"('^\d.*', '^ab[cd]$')"}),
    ("not_match_regex_pattern_list", {"column": "name", "patterns": "('^abe$')"}),
    ("match_like_pattern_list", {"column": "name", "patterns": "('abc', 'abd')"}),
    ("not_match_like_pattern_list", {"column": "name", "patterns": "('%e')"}),
    ("mean_in_range", {"column": "id", "min_v": "0", "max_v": "10"}),
    ("stddev_in_range", {"column": "id", "min_v": "0", "max_v": "50"}),
    ("z_score", {"column": "id", "threshold": "1.2"}),
    ("kl_divergence", {"column": "a", "target_column": "b", "threshold": "0.1"}),
    ("chi_square", {"column": "a", "target_column": "b", "critical_value": "3.84"}),
]


def test_each_built_in_audit_fails_on_bad_rows(engine) -> None:
    view = f"bad_{uuid.uuid4().hex[:8]}"
    engine.session.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {view} AS SELECT * FROM VALUES {BAD_ROWS} "
                     "AS t(id, lo, hi, k, method, name, zip, uid, email, url, note, a, b)")
    model = Model(name="db.bad", kind=ModelKind(name=KindName.FULL), dialect="duckdb", query="SELECT 1",
                  path="models/bad.sql", line=1)
    passed = []
    try:
        for name, args in FAILING:
            ref = AuditRef(name=name, args=args)
            sql = audit_query(ref, model, {}, RenderContext(this_model=view), MacroRegistry())[0]
            if engine.session.fetchall(f"SELECT COUNT(*) FROM ({sql}) AS audit")[0][0] == 0:
                passed.append(name)
    finally:
        engine.session.spark.catalog.dropTempView(view)  # the session is shared: other tests count its temp views
    assert passed == []
