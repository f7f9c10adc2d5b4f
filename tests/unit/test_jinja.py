"""SQLMesh's Jinja (issue 22): `JINJA_QUERY_BEGIN; ... JINJA_END;` and `JINJA_STATEMENT_BEGIN; ...
JINJA_END;` blocks mixed with SQL statements, the `{% macro %}`s of `macros/*.sql`, SQLMesh's Jinja
variables; dependencies from the query rendered at load, fingerprints that follow a macro edit, and
errors at the file and line (core/macros/jinja.py). The data on Spark: tests/spark/test_jinja_spark.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.audits import audit_query
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.snapshots.snapshot import ChangeCategory
from mesh_dagster.core.sql.renderer import RenderContext, render_sql, render_statements
from mesh_dagster.state.store import StateStore

CONFIG = """model_defaults:
  dialect: spark
  start: 2024-01-01
variables:
  region: eu
"""
MACROS = """\
{% macro source_table() %}s.raw{% endmacro %}

{% macro scaled(col) -%}
  {{ col }} * {{ factor() }}
{%- endmacro %}

{% macro factor() %}2{% endmacro %}
{% macro unused() %}0{% endmacro %}
"""
RAW = "MODEL (name s.raw, kind FULL);\nSELECT 1 AS id, CAST('2024-01-01' AS DATE) AS ds\n"
JINJA_MODEL = """\
MODEL (name s.j, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));

SET spark.sql.ansi.enabled = true;

JINJA_STATEMENT_BEGIN;
SET mesh.first = '{{ start_ds }}';
SET mesh.table = '{{ this_model }}';
JINJA_END;

JINJA_QUERY_BEGIN;
{# a comment; it's not SQL #}
{% set columns = ['id', 'ds'] %}
SELECT
  {% for c in columns %}{{ c }}, {% endfor %}
  {{ scaled('id') }} AS doubled,
  '{{ var('region') }}' AS region,
  '{{ var('missing', 'none') }}' AS fallback,
  {{ start_epoch }} AS start_epoch,
  @end_ds AS end_ds,
FROM {{ source_table() }}
WHERE ds BETWEEN '{{ start_ds }}' AND '{{ end_ds }}';
JINJA_END;

SET mesh.after = 1;
"""
JAN2 = datetime(2024, 1, 2, tzinfo=UTC)
JAN3 = datetime(2024, 1, 3, tzinfo=UTC)


def project_files(**extra: str) -> dict[str, str]:
    return {"macros/helpers.sql": MACROS, "models/raw.sql": RAW, "models/j.sql": JINJA_MODEL, **extra}


def load(root: Path):
    return load_project(root, use_cache=False)


def test_a_jinja_model_loads_with_its_statements_and_depends_on_what_its_query_renders_to(tmp_path: Path) -> None:
    project = load(write_project(tmp_path / "p", project_files(), CONFIG))
    model = project.models["s.j"]
    assert model.query is not None and model.query.startswith("JINJA_QUERY_BEGIN;")  # as written: hashed, diffed
    assert model.query_line == 10
    assert model.pre_statements[0] == "SET spark.sql.ansi.enabled = true"
    assert model.pre_statements[1].startswith("JINJA_STATEMENT_BEGIN;") and model.post_statements == ["SET mesh.after = 1"]
    # `FROM {{ source_table() }}`: the parent is found in the query rendered at load (placeholder times)
    assert project.parents("s.j") == ["s.raw"]
    assert list(project.columns("s.j") or {}) == ["id", "ds", "doubled", "region", "fallback", "start_epoch", "end_ds"]


def test_the_query_is_rendered_per_interval_with_sqlmesh_jinja_variables(tmp_path: Path) -> None:
    project = load(write_project(tmp_path / "p", project_files(), CONFIG))
    model = project.models["s.j"]
    ctx = RenderContext(start=JAN2, end=JAN3, variables=project.variables, this_model="mesh__s.s__j__123",
                        table_mapping={"s.raw": "mesh__s.s__raw__9"})
    assert render_sql(model, ctx, project.macros) == (
        "SELECT id, ds, id * 2 AS doubled, 'eu' AS region, 'none' AS fallback, 1704153600.0 AS start_epoch, "
        "'2024-01-02' AS end_ds FROM mesh__s.s__raw__9 AS raw WHERE ds BETWEEN '2024-01-02' AND '2024-01-02'")
    assert render_statements(model.pre_statements, model, ctx, project.macros) == [
        "SET spark.sql.ansi.enabled = TRUE", "SET mesh.first = '2024-01-02'", "SET mesh.table = 'mesh__s.s__j__123'"]


def test_resolve_table_and_the_documented_examples(tmp_path: Path) -> None:
    files = {"models/raw.sql": RAW, "models/d.sql": """\
        MODEL (name s.d, kind FULL);
        JINJA_QUERY_BEGIN;
        SELECT {{ 1 + 1 }} AS two, '{{ start_date }}' AS d, id FROM {{ resolve_table('s.raw') }};
        JINJA_END;
        """}
    project = load(write_project(tmp_path / "p", files, CONFIG))
    assert project.parents("s.d") == ["s.raw"]
    ctx = RenderContext(table_mapping={"s.raw": "mesh__s.s__raw__9"})
    assert render_sql(project.models["s.d"], ctx, project.macros) == (
        "SELECT 2 AS two, '1970-01-01' AS d, id FROM mesh__s.s__raw__9")  # loading: epoch


def test_a_jinja_macro_edit_changes_the_models_that_use_it_and_only_them(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", project_files(), CONFIG)
    before = build_snapshots(load(root))
    assert sorted(before["s.j"].capture.jinja_macros) == ["factor", "scaled", "source_table"]  # transitive, not `unused`
    assert before["s.raw"].capture.jinja_macros == {}
    (root / "macros" / "helpers.sql").write_text(MACROS.replace("{% macro unused() %}0", "{% macro unused() %}1"))
    assert build_snapshots(load(root))["s.j"].fingerprint == before["s.j"].fingerprint
    (root / "macros" / "helpers.sql").write_text(MACROS.replace("%}2{%", "%}3{%"))
    after = build_snapshots(load(root))
    assert after["s.j"].fingerprint.data_hash != before["s.j"].fingerprint.data_hash
    assert after["s.raw"].fingerprint == before["s.raw"].fingerprint


def test_a_plan_calls_a_changed_jinja_macro_breaking_and_evaluates_the_captured_one(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", project_files(), CONFIG)
    state = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:
        record_plan(build_plan(load(root), state, execution_time="2024-01-03"), state)
        (root / "macros" / "helpers.sql").write_text(MACROS.replace("%}2{%", "%}3{%"))
        plan = build_plan(load(root), state, "dev", execution_time="2024-01-03")
    finally:
        state.close()
    assert plan.directly_modified == ["s.j"] and plan.category("s.j") == ChangeCategory.BREAKING
    (root / "macros" / "helpers.sql").write_text(MACROS.replace("%}2{%", "%}4{%"))  # edited after the plan
    snapshot = plan.snapshots["s.j"]
    sql = render_sql(snapshot.model, RenderContext(start=JAN2, end=JAN3, variables=snapshot.capture.variable_values()),
                     snapshot.capture.macro_registry(root))
    assert "id * 3 AS doubled" in sql and "'eu' AS region" in sql


def test_audits_written_in_jinja_inline_and_in_audits_sql(tmp_path: Path) -> None:
    files = {"models/raw.sql": RAW, "macros/helpers.sql": MACROS,
             "audits/small.sql": "AUDIT (name small);\nJINJA_QUERY_BEGIN;\n"
                                 "SELECT * FROM {{ this_model }} WHERE id > {{ factor() }}\nJINJA_END;\n",
             "models/a.sql": """\
        MODEL (name s.a, kind FULL, audits (small, positive));
        SELECT id FROM s.raw;

        AUDIT (name positive);
        JINJA_QUERY_BEGIN;
        SELECT * FROM {{ this_model }} WHERE id <= 0 AND '{{ start_ds }}' <> ''
        JINJA_END;
        """}
    project = load(write_project(tmp_path / "p", files, CONFIG))
    model = project.models["s.a"]
    ctx = RenderContext(start=JAN2, end=JAN3, this_model="mesh__s.s__a__1")
    assert [audit_query(ref, model, project.audits, ctx, project.macros)[0] for ref in model.audits] == [
        "SELECT * FROM mesh__s.s__a__1 WHERE id > 2",
        "SELECT * FROM mesh__s.s__a__1 WHERE id <= 0 AND '2024-01-02' <> ''"]
    assert sorted(build_snapshots(project)["s.a"].capture.jinja_macros) == ["factor"]  # an audit's macros count


BROKEN = [
    ("syntax error in a block",
     {"models/j.sql": "MODEL (name s.j, kind FULL);\n\nJINJA_QUERY_BEGIN;\nSELECT 1 AS x\n{% if %}\nJINJA_END;\n"},
     "models/j.sql:5:", "Jinja syntax error"),
    ("undefined variable",
     {"models/j.sql": "MODEL (name s.j, kind FULL);\nJINJA_QUERY_BEGIN;\nSELECT 1 AS x,\n  {{ nope }} AS y\nJINJA_END;\n"},
     "models/j.sql:4:", "'nope' is undefined"),
    ("undefined macro",
     {"models/j.sql": "MODEL (name s.j, kind FULL);\nJINJA_QUERY_BEGIN;\nSELECT {{ nope(1) }} AS y\nJINJA_END;\n"},
     "models/j.sql:3:", "'nope' is undefined"),
    ("undefined name inside a macro of macros/*.sql",
     {"macros/m.sql": "{% macro a() %}\n1 + {{ b() }}\n{% endmacro %}\n{% macro b() %}\n\n{{ gone }}\n{% endmacro %}\n",
      "models/j.sql": "MODEL (name s.j, kind FULL);\nJINJA_QUERY_BEGIN;\nSELECT {{ a() }} AS x\nJINJA_END;\n"},
     "macros/m.sql:6:", "'gone' is undefined"),
    ("undefined variable in a statement block",
     {"models/j.sql": "MODEL (name s.j, kind FULL);\nSELECT 1 AS x;\nJINJA_STATEMENT_BEGIN;\nSET a = 1;\n"
                      "SET b = {{ bad }};\nJINJA_END;\n"},
     "models/j.sql:5:", "'bad' is undefined"),
    ("undefined name in an audit of audits/*.sql",
     {"audits/a.sql": "AUDIT (name a);\n\nJINJA_QUERY_BEGIN;\nSELECT * FROM {{ this_model }}\nWHERE {{ nope }}\nJINJA_END;\n",
      "models/j.sql": "MODEL (name s.j, kind FULL, audits (a));\nSELECT 1 AS x\n"},
     "audits/a.sql:5:", "'nope' is undefined"),
    ("syntax error in macros/*.sql",
     {"macros/m.sql": "{% macro a() %}\n{{ 1 + }}\n{% endmacro %}\n"}, "macros/m.sql:2:", "Jinja syntax error"),
    ("macro defined twice",
     {"macros/m.sql": "{% macro a() %}1{% endmacro %}\n", "macros/n.sql": "\n\n{% macro a() %}2{% endmacro %}\n"},
     "macros/n.sql:", "'a' is defined twice (also in macros/m.sql:1)"),
    ("block never closed",
     {"models/j.sql": "MODEL (name s.j, kind FULL);\n\nJINJA_QUERY_BEGIN;\nSELECT 1 AS x\n"},
     "models/j.sql:3:", "never closed by JINJA_END"),
    ("JINJA_END alone",
     {"models/j.sql": "MODEL (name s.j, kind FULL);\nSELECT 1 AS x;\nJINJA_END;\n"}, "models/j.sql:3:", "without a"),
    ("marker without ;",
     {"models/j.sql": "MODEL (name s.j, kind FULL);\nJINJA_QUERY_BEGIN\nSELECT 1 AS x;\nJINJA_END;\n"},
     "models/j.sql:2:", "must be followed by ';'"),
    ("error raised by an expression",
     {"models/j.sql": "MODEL (name s.j, kind FULL);\n\nJINJA_QUERY_BEGIN;\nSELECT {{ 1 + 'a' }} AS x\nJINJA_END;\n"},
     "models/j.sql:4:", "TypeError"),
]


@pytest.mark.parametrize(("files", "where", "message"), [case[1:] for case in BROKEN], ids=[c[0] for c in BROKEN])
def test_broken_jinja_is_refused_at_its_file_and_line(tmp_path: Path, files: dict[str, str], where: str,
                                                      message: str) -> None:
    root = write_project(tmp_path / "p", {"models/raw.sql": RAW, **files}, CONFIG)
    with pytest.raises(ModelError) as e:
        load(root)
    assert str(e.value).startswith(where) and message in str(e.value), str(e.value)


def test_markers_in_strings_comments_and_names_are_sql(tmp_path: Path) -> None:
    files = {"models/q.sql": "MODEL (name s.q, kind FULL);\n-- JINJA_QUERY_BEGIN; is a comment here\n"
                             "SELECT 'JINJA_END;' AS x, 1 AS jinja_end FROM s.raw AS jinja_query_begin\n",
             "models/raw.sql": RAW}
    model = load(write_project(tmp_path / "p", files, CONFIG)).models["s.q"]
    assert model.query == "SELECT 'JINJA_END;' AS x, 1 AS jinja_end FROM s.raw AS jinja_query_begin"
