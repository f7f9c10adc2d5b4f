"""Macro syntax, built-ins, variables and user Python macros, rendered to Spark SQL."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlglot import exp

from mesh_dagster.core.errors import MacroError, ModelError
from mesh_dagster.core.macros.coercion import SQL
from mesh_dagster.core.macros.evaluator import MacroEvaluator
from mesh_dagster.core.macros.syntax import temporal_locals
from mesh_dagster.core.macros.user import MacroRegistry, load_macros, macro
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.renderer import RenderContext, render_sql, render_statements

EMPTY = MacroRegistry()
JAN1 = datetime(2024, 1, 1, tzinfo=UTC)
JAN3 = datetime(2024, 1, 3, tzinfo=UTC)  # exclusive end: the interval is Jan 1 .. Jan 2


def make_model(query: str, dialect: str = "spark", defs: list[str] | None = None, kind: KindName = KindName.FULL,
               name: str = "db.x") -> Model:
    return Model(name=name, kind=ModelKind(name=kind), dialect=dialect, query=query,
                 macro_definitions=defs or [], path="models/x.sql", query_line=10)


def render(query: str, *, dialect: str = "spark", defs: list[str] | None = None, macros: MacroRegistry = EMPTY,
           **ctx) -> str:
    return render_sql(make_model(query, dialect, defs), RenderContext(**ctx), macros)


def projection(expr: str, **ctx) -> str:
    """The rendered projection list of `SELECT <expr>`."""
    sql = render(f"SELECT {expr}", **ctx)
    assert sql.startswith("SELECT ")
    return sql[len("SELECT "):]


# -- temporal variables -------------------------------------------------------------------------

TEMPORAL = [
    ("@start_ds", "'2024-01-01'"),
    ("@end_ds", "'2024-01-02'"),
    ("@start_ts", "'2024-01-01 00:00:00'"),
    ("@end_ts", "'2024-01-02 23:59:59.999999'"),
    ("@start_tstz", "'2024-01-01 00:00:00+00:00'"),
    ("@end_tstz", "'2024-01-02 23:59:59.999999+00:00'"),
    ("@start_date", "CAST('2024-01-01' AS DATE)"),
    ("@end_date", "CAST('2024-01-02' AS DATE)"),
    ("@start_dt", "CAST('2024-01-01 00:00:00+00:00' AS TIMESTAMP)"),
    ("@start_dtntz", "CAST('2024-01-01 00:00:00' AS TIMESTAMP)"),
    ("@end_dtntz", "CAST('2024-01-02 23:59:59.999999' AS TIMESTAMP)"),
    ("@start_hour", "0"),
    ("@end_hour", "23"),
    ("@start_epoch", "1704067200.0"),
    ("@start_millis", "1704067200000"),
    ("@end_millis", "1704239999999"),
    ("@execution_ds", "'2024-01-05'"),
]


@pytest.mark.parametrize(("macro_text", "expected"), TEMPORAL)
def test_temporal_variables_render_like_sqlmesh_on_spark(macro_text: str, expected: str) -> None:
    ctx = dict(start=JAN1, end=JAN3, execution_time=datetime(2024, 1, 5, 3, tzinfo=UTC),
               runtime_stage="evaluating")
    assert projection(macro_text, **ctx) == expected


def test_naive_datetimes_are_utc() -> None:
    assert projection("@start_ts", start=datetime(2024, 1, 1), end=datetime(2024, 1, 2)) == "'2024-01-01 00:00:00'"


def test_without_an_interval_dates_are_epoch() -> None:
    rendered = projection("@start_ds, @end_ds, @execution_ds, @start_date, @end_dtntz")
    assert rendered == ("'1970-01-01', '1970-01-01', '1970-01-01', CAST('1970-01-01' AS DATE), "
                        "CAST('1970-01-01 23:59:59.999999' AS TIMESTAMP)")


def test_temporal_macros_in_a_duckdb_model_are_transpiled() -> None:
    sql = render("SELECT * FROM t WHERE d BETWEEN @start_dt AND @end_dtntz", dialect="duckdb", start=JAN1, end=JAN3)
    assert sql == ("SELECT * FROM t WHERE d BETWEEN CAST('2024-01-01 00:00:00+00:00' AS TIMESTAMP) "
                   "AND CAST('2024-01-02 23:59:59.999999' AS TIMESTAMP_NTZ)")


def test_temporal_locals_for_python_macros() -> None:
    values = temporal_locals(JAN1, JAN3, None)
    assert values["start_ds"] == "2024-01-01"
    assert values["end_ts"] == "2024-01-02 23:59:59.999999"
    assert values["end_millis"] == 1704239999999


# -- runtime variables --------------------------------------------------------------------------


def test_runtime_variables() -> None:
    sql = render("SELECT @runtime_stage AS s, @model_kind_name AS k, @gateway AS g FROM @this_model",
                 runtime_stage="evaluating", gateway="local", this_model="mesh__db.db__x__123")
    assert sql == "SELECT 'evaluating' AS s, 'FULL' AS k, 'local' AS g FROM mesh__db.db__x__123"


def test_this_model_is_the_model_name_while_loading_and_gateway_null() -> None:
    assert render("SELECT @gateway AS g FROM @this_model") == "SELECT NULL AS g FROM db.x"


# -- user variables ----------------------------------------------------------------------------


def test_variables_are_case_insensitive_and_var_takes_defaults() -> None:
    variables = {"My_Var": 5, "name": "abc"}
    assert projection("@my_var, @MY_VAR, @VAR('MY_var'), @VAR('missing', 3), @VAR('missing'), @name",
                      variables=variables) == "5, 5, 5, 3, NULL, 'abc'"


def test_def_takes_precedence_over_config_variables() -> None:
    sql = render("SELECT @x AS a, @VAR('x') AS b", defs=["@DEF(x, 2);"], variables={"x": 1})
    assert sql == "SELECT 2 AS a, 1 AS b"


def test_def_over_temporal_variable_and_def_referring_to_def() -> None:
    sql = render("SELECT @start_ds, @y", defs=["@DEF(start_ds, 'mine')", "@DEF(y, @start_ds || '!')"])
    assert sql == "SELECT 'mine', 'mine' || '!'"


def test_identifier_embedding_and_string_templates() -> None:
    sql = render("SELECT col_@{suffix}, @{suffix}_col, col_@suffix, @'prefix_@{suffix}' AS s, '@suffix' AS raw",
                 defs=["@DEF(suffix, 'abc')"])
    assert sql == "SELECT col_abc, abc_col, col_abc, 'prefix_abc' AS s, '@suffix' AS raw"


def test_string_template_inside_a_lambda() -> None:
    sql = render("SELECT @EACH(['a', 'b'], x -> @'col_@{x}_@{z}' AS @{x})", variables={"z": "Z"})
    assert sql == "SELECT 'col_a_Z' AS a, 'col_b_Z' AS b"


def test_macros_in_comments_are_ignored() -> None:
    assert render("SELECT 1 /* @nope */ -- @nope\n") == "SELECT 1 /* @nope */ /* @nope */"


def test_undefined_variable_names_file_and_line() -> None:
    with pytest.raises(MacroError) as e:
        render("SELECT\n  @nope")
    assert str(e.value) == "models/x.sql:11: Macro variable '@nope' is undefined"


def test_list_variables_from_config() -> None:
    assert projection("@EACH(@cols, c -> @{c}_x)", variables={"cols": ["a", "b"]}) == "a_x, b_x"


# -- @DEF functions -----------------------------------------------------------------------------


def test_def_lambda_called_as_macro() -> None:
    assert projection("@add(1, 2) AS s", defs=["@DEF(add, (x, y) -> x + y)"]) == "1 + 2 AS s"


def test_def_lambda_with_wrong_arity() -> None:
    with pytest.raises(MacroError, match=r"Lambda \(x, y\) takes 2 argument\(s\), got 1"):
        projection("@add(1)", defs=["@DEF(add, (x, y) -> x + y)"])


# -- @EACH / @FILTER / @REDUCE ------------------------------------------------------------------


def test_each_expands_into_several_projections() -> None:
    sql = render("SELECT @EACH([a, b], x -> x + 1 AS col_@x), c FROM t")
    assert sql == "SELECT a + 1 AS col_a, b + 1 AS col_b, c FROM t"


def test_each_with_strings_and_at_reference() -> None:
    sql = render("SELECT @EACH(['x', 'y'], v -> CASE WHEN kind = @v THEN 1 END AS is_@{v}) FROM t")
    assert sql == "SELECT CASE WHEN kind = 'x' THEN 1 END AS is_x, CASE WHEN kind = 'y' THEN 1 END AS is_y FROM t"


def test_each_does_not_touch_qualified_names_functions_or_aliases() -> None:
    sql = render("SELECT @EACH([a], x -> t.x + x(1) + x AS x) FROM t")
    assert sql == "SELECT t.x + X(1) + a AS x FROM t"


def test_each_in_a_where_clause() -> None:
    assert render("SELECT 1 FROM t WHERE k IN (@EACH([1, 2], x -> x * 10))") == "SELECT 1 FROM t WHERE k IN (1 * 10, 2 * 10)"


def test_filter_and_reduce() -> None:
    assert projection("@FILTER([1, 2, 3], x -> x > 1)") == "2, 3"
    sql = render("SELECT * FROM t WHERE @REDUCE(@EACH([a, b], c -> c IS NULL), (l, r) -> l OR r)")
    assert sql == "SELECT * FROM t WHERE (a IS NULL) OR (b IS NULL)"


# -- @IF / @EVAL / @AND / @OR -------------------------------------------------------------------


def test_if_uses_runtime_stage() -> None:
    query = "SELECT @IF(@runtime_stage = 'evaluating', 'yes', 'no') AS v"
    assert render(query) == "SELECT 'no' AS v"
    assert render(query, runtime_stage="evaluating") == "SELECT 'yes' AS v"


def test_if_without_else_removes_the_element_and_its_comma() -> None:
    assert projection("a, @IF(1 > 2, b), c") == "a, c"
    assert projection("@IF(1 > 2, b), c") == "c"
    assert projection("@IF(1 < 2 AND NOT FALSE, b), c") == "b, c"


def test_if_evaluates_only_the_branch_taken() -> None:
    assert projection("@IF(TRUE, 1, @undefined)") == "1"


def test_if_on_a_column_is_an_error() -> None:
    with pytest.raises(MacroError, match=r"models/x\.sql:10: Cannot evaluate `a > 1` at render time: `a` is not a constant"):
        render("SELECT @IF(a > 1, 1)")


def test_eval() -> None:
    assert projection("@EVAL(1 + 2 * 3) AS n, @EVAL('a' || 'b') AS s, @EVAL(5 > 4) AS b") == "7 AS n, 'ab' AS s, TRUE AS b"


def test_and_or_skip_nulls() -> None:
    assert render("SELECT 1 FROM t WHERE @AND(a > 1, NULL, b < 2)") == "SELECT 1 FROM t WHERE (a > 1) AND (b < 2)"
    assert render("SELECT 1 FROM t WHERE @OR(a > 1, b < 2)") == "SELECT 1 FROM t WHERE (a > 1) OR (b < 2)"


def test_safe_arithmetic() -> None:
    assert projection("@SAFE_DIV(a, b) AS r") == "(a) / NULLIF(b, 0) AS r"
    assert projection("@SAFE_ADD(a, b) AS s") == (
        "CASE WHEN (a) IS NULL AND (b) IS NULL THEN NULL ELSE COALESCE(a, 0) + COALESCE(b, 0) END AS s")


# -- @STAR / @GENERATE_SURROGATE_KEY ------------------------------------------------------------

SCHEMAS = {"db.parent": {"id": "INT", "name": "STRING", "secret": "STRING", "ds": None}}


def test_star_with_known_types() -> None:
    sql = render("SELECT @STAR(db.parent, alias := p, exclude := [secret], prefix := 'p_', suffix := '_v') FROM db.parent AS p",
                 schemas=SCHEMAS)
    assert sql == ("SELECT CAST(p.id AS INT) AS p_id_v, CAST(p.name AS STRING) AS p_name_v, p.ds AS p_ds_v "
                   "FROM db.parent AS p")


def test_star_defaults_alias_to_table_name() -> None:
    sql = render("SELECT @STAR(db.parent, exclude := [secret, ds]) FROM db.parent", schemas=SCHEMAS)
    assert sql == "SELECT CAST(parent.id AS INT) AS id, CAST(parent.name AS STRING) AS name FROM db.parent"


def test_star_with_unknown_columns_is_an_error() -> None:
    with pytest.raises(MacroError, match=r"@STAR: the columns of db\.other are not known"):
        render("SELECT @STAR(db.other) FROM db.other")


def test_generate_surrogate_key() -> None:
    assert projection("@GENERATE_SURROGATE_KEY(a, b) AS k") == (
        "MD5(CONCAT(COALESCE(CAST(a AS STRING), '_sqlmesh_surrogate_key_null_'), '|', "
        "COALESCE(CAST(b AS STRING), '_sqlmesh_surrogate_key_null_'))) AS k")
    assert projection("@GENERATE_SURROGATE_KEY(a, hash_function := 'SHA2') AS k").startswith("SHA2(")


# -- malformed calls ----------------------------------------------------------------------------


def test_unknown_macro_names_file_and_line() -> None:
    with pytest.raises(MacroError) as e:
        render("SELECT a,\n  @NOPE(1)\nFROM t")
    assert str(e.value) == (
        "models/x.sql:11: Unknown macro @NOPE: it is not a built-in macro, a @DEF function or a @macro in macros/*.py")


def test_missing_parenthesis() -> None:
    with pytest.raises(MacroError, match=r"models/x\.sql:10: Malformed macro call @EACH\(\.\.\.\): missing closing parenthesis"):
        render("SELECT @EACH([1, 2], x -> x FROM t")


def test_each_needs_a_lambda() -> None:
    with pytest.raises(MacroError, match="Expected a lambda such as `x -> x \\+ 1`, got `1`"):
        render("SELECT @EACH([1, 2], 1)")


def test_builtin_argument_checks() -> None:
    with pytest.raises(MacroError, match="@IF is missing argument 'true'"):
        render("SELECT @IF(TRUE)")
    with pytest.raises(MacroError, match="@EACH has no argument 'bogus'"):
        render("SELECT @EACH([1], x -> x, bogus := 1)")
    with pytest.raises(MacroError, match="empty argument"):
        render("SELECT @EACH([1],, x -> x)")


# -- user Python macros ------------------------------------------------------------------------

USER_MACROS = '''
from mesh_dagster import macro
from sqlglot import exp


@macro()
def add_one(evaluator, column):
    return f"{column.sql()} + 1"


@macro("times")
def multiply(evaluator, column, factor: int):
    return exp.Mul(this=column, expression=exp.Literal.number(factor))


@macro()
def stage(evaluator):
    return exp.Literal.string(evaluator.runtime_stage)


@macro()
def columns(evaluator, names: list[str], prefix: str = ""):
    return [exp.column(prefix + n) for n in names]


@macro()
def parent_info(evaluator, table: str):
    cols = evaluator.columns_to_types(table) or {}
    return f"'{evaluator.resolve_table(table)}:{','.join(cols)}:{evaluator.locals['start_ds']}:{evaluator.var('v')}'"


@macro()
def optional(evaluator, flag: bool):
    return "1" if flag else None


@macro()
def boom(evaluator):
    raise RuntimeError("kaboom")


@macro(metadata_only=True)
def comment_only(evaluator):
    return None
'''


@pytest.fixture
def user_macros(tmp_path: Path) -> MacroRegistry:
    macros_dir = tmp_path / "macros"
    macros_dir.mkdir()
    (macros_dir / "helpers.py").write_text(USER_MACROS)
    return load_macros(macros_dir)


def test_user_macros_are_loaded_by_lower_case_name(user_macros: MacroRegistry) -> None:
    assert user_macros.names() == ["add_one", "boom", "columns", "comment_only", "optional", "parent_info",
                                   "stage", "times"]
    assert "ADD_ONE" in user_macros
    assert user_macros.is_metadata_only("comment_only") and not user_macros.is_metadata_only("add_one")
    assert "def add_one(evaluator, column):" in user_macros.source("add_one")


def test_used_by(user_macros: MacroRegistry) -> None:
    text = "SELECT @ADD_ONE(a), @EACH([1], x -> @times(x, 2)), @start_ds, @unknown(1) -- @stage"
    assert user_macros.used_by(text) == ["add_one", "times"]


def test_user_macros_render(user_macros: MacroRegistry) -> None:
    sql = render("SELECT @add_one(a) AS a1, @times(b, 3) AS b3, @stage() AS s, @columns([x, y], prefix := 'p_'), "
                 "@optional(FALSE), @optional(TRUE) AS o FROM t", macros=user_macros)
    assert sql == "SELECT a + 1 AS a1, b * 3 AS b3, 'loading' AS s, p_x, p_y, 1 AS o FROM t"


def test_user_macro_sees_the_evaluator(user_macros: MacroRegistry) -> None:
    sql = render("SELECT @parent_info('db.p') AS i", macros=user_macros, start=JAN1, end=JAN3,
                 schemas={"db.p": {"a": "INT", "b": None}}, table_mapping={"db.p": "mesh__db.db__p__1"},
                 variables={"V": 7})
    assert sql == "SELECT 'mesh__db.db__p__1:a,b:2024-01-01:7' AS i"


def test_user_macro_argument_coercion_error(user_macros: MacroRegistry) -> None:
    with pytest.raises(MacroError, match=r"models/x\.sql:10: Macro @times: argument 'factor' expected int, got `'x'`"):
        render("SELECT @times(a, 'x')", macros=user_macros)


def test_user_macro_exception(user_macros: MacroRegistry) -> None:
    with pytest.raises(MacroError, match=r"models/x\.sql:10: Macro @boom failed: RuntimeError: kaboom"):
        render("SELECT @boom()", macros=user_macros)


def test_macro_file_import_error_names_file_and_line(tmp_path: Path) -> None:
    macros_dir = tmp_path / "macros"
    macros_dir.mkdir()
    (macros_dir / "bad.py").write_text("import math\n\nx = 1 / 0\n")
    with pytest.raises(ModelError) as e:
        load_macros(macros_dir)
    assert str(e.value) == "macros/bad.py:3: Cannot import macros: ZeroDivisionError: division by zero"


def test_macro_file_syntax_error(tmp_path: Path) -> None:
    macros_dir = tmp_path / "macros"
    macros_dir.mkdir()
    (macros_dir / "bad.py").write_text("def f(:\n    pass\n")
    with pytest.raises(ModelError, match=r"^macros/bad\.py:1: Cannot import macros: SyntaxError"):
        load_macros(macros_dir)


def test_duplicate_macro_names(tmp_path: Path) -> None:
    macros_dir = tmp_path / "macros"
    macros_dir.mkdir()
    body = "from mesh_dagster import macro\n\n@macro()\ndef same(evaluator):\n    return '1'\n"
    (macros_dir / "a.py").write_text(body)
    (macros_dir / "b.py").write_text(body)
    with pytest.raises(ModelError, match=r"macros/b\.py:3: Macro 'same' is defined twice \(also in macros/a\.py\)"):
        load_macros(macros_dir)


def test_missing_macros_dir_gives_empty_registry(tmp_path: Path) -> None:
    assert len(load_macros(tmp_path / "macros")) == 0


def test_bare_decorator_and_registry_register() -> None:
    @macro
    def Shout(evaluator, text: str):
        return exp.Literal.string(text.upper())

    registry = MacroRegistry()
    registry.register(Shout)
    assert MacroEvaluator(registry=registry).expand("SELECT @shout('hi')") == "SELECT 'HI'"


def test_sql_annotation_receives_text() -> None:
    def raw(evaluator, value: SQL):
        assert isinstance(value, SQL)
        return f"'{value}'"

    registry = MacroRegistry()
    registry.register(raw, "raw")
    assert MacroEvaluator("duckdb", registry=registry).expand("SELECT @raw(a + 1)") == "SELECT 'a + 1'"


# -- statements -----------------------------------------------------------------------------------


def test_if_as_a_statement_is_dropped_or_kept() -> None:
    model = make_model("SELECT 1")
    statements = ["@IF(@runtime_stage = 'evaluating', CACHE TABLE db.parent)", "SET spark.sql.shuffle.partitions = 4"]
    assert render_statements(statements, model, RenderContext(), EMPTY) == ["SET spark.sql.shuffle.partitions = 4"]
    evaluated = render_statements(statements, model, RenderContext(runtime_stage="evaluating",
                                                                   table_mapping={"db.parent": "mesh__db.p__1"}), EMPTY)
    assert evaluated[0] == "CACHE TABLE mesh__db.p__1"


def test_statement_syntax_error() -> None:
    model = Model(name="db.x", kind=ModelKind(name=KindName.FULL), query="SELECT 1", path="models/x.sql", line=3)
    with pytest.raises(ModelError, match=r"^models/x\.sql:3: Cannot parse statement"):
        render_statements(["SELECT (1"], model, RenderContext(), EMPTY)


def test_import_mesh_dagster_stays_cheap_and_exports_macro() -> None:
    import subprocess
    import sys

    code = ("import sys, mesh_dagster; assert 'sqlglot' not in sys.modules; "
            "from mesh_dagster import macro; from mesh_dagster.core.macros.user import macro as m; assert macro is m")
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT @EACH(x -> x, [1])", "Expected a lambda such as `x -> x \\+ 1`, got `\\[1\\]`"),
    ("SELECT @EACH(func := x -> x, [1])", "Malformed macro call @EACH\\(\\.\\.\\.\\): positional argument after keyword"),
    ("SELECT @EACH([1], x -> x, 3)", "@EACH takes at most 2 arguments, got 3"),
    ("SELECT @EACH([1], x -> x, items := [2])", "@EACH got argument 'items' twice"),
    ("SELECT @EACH((1 +), x -> x)", "Cannot parse macro argument `\\(1 \\+\\)`"),
    ("SELECT @DEF(a)", "@DEF takes a name and a value"),
    ("SELECT @DEF(a + b, 1)", "@DEF: invalid name `a \\+ b`"),
    ("SELECT @VAR(1)", "@VAR needs the variable name as a string"),
    ("SELECT @EVAL(1 / 0)", "Cannot evaluate `1 / 0`: division by zero"),
    ("SELECT @GENERATE_SURROGATE_KEY()", "@GENERATE_SURROGATE_KEY takes columns"),
    ("SELECT @AND(a, b := 1)", "@AND takes conditions only"),
    ("SELECT @SAFE_ADD(a)", "@SAFE_ADD takes two or more operands"),
    ("SELECT @STAR(db.parent, alias := 1 + 1)", "@STAR: expected a name, got `1 \\+ 1`"),
])
def test_macro_error_messages(query: str, message: str) -> None:
    with pytest.raises(MacroError, match=r"^models/x\.sql:10: " + message):
        render(query, schemas=SCHEMAS)


def test_lambda_used_as_a_value() -> None:
    with pytest.raises(MacroError, match="A lambda cannot be used as a value"):
        render("SELECT @f", defs=["@DEF(f, x -> x)"])


# -- macros/__init__.py and loading a real project ------------------------------------------------


def test_package_init_is_imported_and_files_are_not_run_twice(tmp_path: Path) -> None:
    """The scaffold writes macros/__init__.py: macros defined there exist, and a file that
    __init__.py imports is run once (its side effects are not repeated)."""
    macros_dir = tmp_path / "macros"
    macros_dir.mkdir()
    runs = tmp_path / "runs.txt"
    (macros_dir / "__init__.py").write_text(
        "from mesh_dagster import macro\nfrom .helpers import twice\n\n@macro()\ndef one(evaluator):\n    return '1'\n")
    (macros_dir / "helpers.py").write_text(
        f"from pathlib import Path\nfrom mesh_dagster import macro\n\nwith Path({str(runs)!r}).open('a') as f:\n"
        "    f.write('run\\n')\n\n@macro()\ndef twice(evaluator, x):\n    return f'{x.sql()} * 2'\n")
    registry = load_macros(macros_dir)
    assert registry.names() == ["one", "twice"]
    assert runs.read_text() == "run\n"
    assert render("SELECT @one() AS a, @twice(b) AS c", macros=registry) == "SELECT 1 AS a, b * 2 AS c"


def test_macros_of_one_project_do_not_leak_into_the_next(tmp_path: Path) -> None:
    for name in ("first", "second"):
        macros_dir = tmp_path / name / "macros"
        macros_dir.mkdir(parents=True)
        (macros_dir / "__init__.py").write_text(f"from mesh_dagster import macro\n\n@macro()\ndef {name}(evaluator):\n"
                                                "    return '1'\n")
        assert load_macros(macros_dir).names() == [name]


def test_star_over_a_parent_with_declared_columns_loads_in_a_project(tmp_path: Path) -> None:
    """Dependencies are found before any model's columns are known: @STAR must not fail then."""
    from project_builder import write_project

    from mesh_dagster.core.project.project import load_project
    from mesh_dagster.core.sql.renderer import RenderContext, render_sql

    root = write_project(tmp_path / "p", {
        "models/parent.sql": "MODEL (name s.parent, kind FULL, columns (id INT, name STRING));\n"
                             "SELECT 1 AS id, 'a' AS name\n",
        "models/child.sql": "MODEL (name s.child, kind VIEW);\nSELECT @STAR(s.parent, exclude := [name]) FROM s.parent\n",
    })
    project = load_project(root, use_cache=False)
    assert project.parents("s.child") == ["s.parent"]
    assert project.columns("s.child") == {"id": "INT"}
    ctx = RenderContext(schemas=project.parent_schemas("s.child"))
    assert render_sql(project.models["s.child"], ctx, project.macros) == "SELECT CAST(parent.id AS INT) AS id FROM s.parent"


def test_a_macro_module_imported_by_its_project_name_too_is_one_definition(tmp_path: Path) -> None:
    """SQLMesh projects import one macro file from another by the project-root name
    (`from macros.utils import between` in macros/macros.py): the function reached both ways is
    the one macro of macros/utils.py, not a second definition."""
    from project_builder import write_project

    from mesh_dagster.core.project.project import load_project

    root = write_project(tmp_path / "p", {
        "macros/__init__.py": "",
        "macros/utils.py": "from sqlmesh import macro\n\n\n@macro()\ndef between(evaluator, low, high):\n"
                           "    return f'BETWEEN {low} AND {high}'\n",
        "macros/macros.py": "from sqlmesh import macro\n\nfrom macros.utils import between\n\n\n@macro()\n"
                            "def in_range(evaluator, column):\n    return f'{column} ' + between(evaluator, 1, 9)\n",
        "models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT id FROM VALUES (1), (20) AS t(id) WHERE @in_range(id)\n",
    })
    project = load_project(root, use_cache=False)
    assert project.macros.names() == ["between", "in_range"]
    assert list(project.output("s.m").columns or {}) == ["id"]  # the query rendered with both macros


def test_a_projects_macros_folder_without_init_does_not_answer_the_next_projects_imports(tmp_path: Path) -> None:
    """`macros/` without `__init__.py` is a namespace package, a module with no file: the next
    project loaded in this process (a code server, a test run) imports its own `macros.utils`."""
    import sys

    from project_builder import write_project

    from mesh_dagster.core.project.project import load_project

    model = "MODEL (name s.m, kind FULL);\nSELECT @pick() AS v\n"
    for name, init, value in (("a", False, 1), ("b", True, 2)):
        files = {"macros/utils.py": f"VALUE = {value}\n",
                 "macros/m.py": "from sqlmesh import macro\nfrom macros.utils import VALUE\n\n\n@macro()\n"
                                "def pick(evaluator):\n    return VALUE\n", "models/m.sql": model}
        root = write_project(tmp_path / name, {**files, **({"macros/__init__.py": ""} if init else {})})
        load_project(root, use_cache=False)
        assert sys.modules["macros.utils"].VALUE == value
