"""Typed arguments of user macros (`macros/*.py`): each annotation converts what the call wrote,
keyword arguments and defaults bind like Python's, and every argument that does not fit is an
error naming the macro, the parameter, the file and the line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from mesh_dagster.core.errors import MacroError
from mesh_dagster.core.macros.user import MacroRegistry, load_macros
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.renderer import RenderContext, render_sql

# `from __future__ import annotations` makes every annotation a string: they must still resolve.
TYPED_MACROS = '''
from __future__ import annotations

from datetime import date, datetime
from typing import Optional, Union

from sqlglot import exp

from mesh_dagster import SQL, macro


def shown(value):
    if isinstance(value, exp.Expr):
        return f"{type(value).__name__}({value.sql()})"
    if isinstance(value, (list, tuple)):
        return type(value).__name__ + "[" + ",".join(shown(v) for v in value) + "]"
    return f"{type(value).__name__}({value!r})"


def out(*values):
    return exp.Literal.string(" ".join(shown(v) for v in values))


@macro()
def m_untyped(evaluator, value):
    return out(value)


@macro()
def m_int(evaluator, n: int):
    return out(n)


@macro()
def m_float(evaluator, x: float):
    return out(x)


@macro()
def m_str(evaluator, s: str):
    return out(s)


@macro()
def m_bool(evaluator, flag: bool):
    return out(flag)


@macro()
def m_sql(evaluator, text: SQL):
    return out(text)


@macro()
def m_column(evaluator, c: exp.Column):
    return out(c)


@macro()
def m_table(evaluator, t: exp.Table):
    return out(t)


@macro()
def m_identifier(evaluator, i: exp.Identifier):
    return out(i)


@macro()
def m_select(evaluator, q: exp.Select):
    return out(q)


@macro()
def m_literal(evaluator, v: exp.Literal):
    return out(v)


@macro()
def m_expr(evaluator, e: exp.Expr):
    return out(e)


@macro()
def m_ints(evaluator, ns: list[int]):
    return out(ns)


@macro()
def m_strs(evaluator, names: list[str]):
    return out(names)


@macro()
def m_pair(evaluator, pair: tuple[int, str]):
    return out(pair)


@macro()
def m_optional(evaluator, n: int | None):
    return out(n)


@macro()
def m_old_optional(evaluator, n: Optional[int]):
    return out(n)


@macro()
def m_union(evaluator, v: Union[int, str]):
    return out(v)


@macro()
def m_date(evaluator, d: date):
    return out(d)


@macro()
def m_datetime(evaluator, d: datetime):
    return out(d)


@macro()
def m_sum(evaluator, *numbers: int):
    return exp.Literal.number(sum(numbers))


@macro()
def m_kw(evaluator, a: int, b: int = 10, *, c: str = "z"):
    return out(a, b, c)


@macro()
def m_camel(evaluator, MyArg: int = 0):
    return out(MyArg)


@macro()
def m_options(evaluator, first: str, **options: int):
    return out(first, *(f"{k}={v}" for k, v in sorted(options.items())))


@macro()
def m_dict(evaluator, d: dict):
    return out(d)
'''


@pytest.fixture(scope="module")
def macros(tmp_path_factory: pytest.TempPathFactory) -> MacroRegistry:
    macros_dir = tmp_path_factory.mktemp("project") / "macros"
    macros_dir.mkdir()
    (macros_dir / "typed.py").write_text(TYPED_MACROS)
    return load_macros(macros_dir)


def render(query: str, macros: MacroRegistry, **ctx) -> str:
    model = Model(name="db.x", kind=ModelKind(name=KindName.FULL), dialect="spark", query=query,
                  path="models/x.sql", query_line=10)
    return render_sql(model, RenderContext(**ctx), macros)


def value(call: str, macros: MacroRegistry, **ctx) -> str:
    """What the macro received, as it reported it in a string literal."""
    sql = render(f"SELECT {call} AS v", macros, **ctx)
    assert sql.startswith("SELECT '") and sql.endswith("' AS v"), sql
    return sql[len("SELECT '"):-len("' AS v")].replace("\\'", "'")


@pytest.mark.parametrize(("call", "received"), [
    ("@m_untyped(1)", "Literal(1)"),
    ("@m_int(3)", "int(3)"),
    ("@m_int(-2)", "int(-2)"),
    ("@m_int(4.0)", "int(4)"),
    ("@m_float(1)", "float(1.0)"),
    ("@m_float(-2.5)", "float(-2.5)"),
    ("@m_str('a b')", "str('a b')"),
    ("@m_str(col)", "str('col')"),
    ("@m_str(db.t)", "str('db.t')"),
    ("@m_str(5)", "str('5')"),
    ("@m_bool(TRUE)", "bool(True)"),
    ("@m_bool(false)", "bool(False)"),
    ("@m_bool('true')", "bool(True)"),
    ("@m_bool(0)", "bool(False)"),
    ("@m_sql(a + 1)", "SQL('a + 1')"),
    ("@m_column(a)", "Column(a)"),
    ("@m_column(t.a)", "Column(t.a)"),
    ("@m_column('a')", "Column(a)"),
    ("@m_table(db.t)", "Table(db.t)"),
    ("@m_table('db.t')", "Table(db.t)"),
    ("@m_identifier(a)", "Identifier(a)"),
    ("@m_identifier('a')", "Identifier(a)"),
    ("@m_select('SELECT a FROM t')", "Select(SELECT a FROM t)"),
    ("@m_select((SELECT 1 AS one))", "Select(SELECT 1 AS one)"),
    ("@m_literal('x')", "Literal('x')"),
    ("@m_expr(a + 1)", "Add(a + 1)"),
    ("@m_ints([1, 2])", "list[int(1),int(2)]"),
    ("@m_ints(7)", "list[int(7)]"),
    ("@m_ints([])", "list[]"),
    ("@m_strs([a, 'b'])", "list[str('a'),str('b')]"),
    ("@m_pair((1, 'x'))", "tuple[int(1),str('x')]"),
    ("@m_optional(NULL)", "NoneType(None)"),
    ("@m_optional(3)", "int(3)"),
    ("@m_old_optional(NULL)", "NoneType(None)"),
    ("@m_union(5)", "int(5)"),
    ("@m_union('five')", "str('five')"),
    ("@m_date('2024-01-02')", "date(datetime.date(2024, 1, 2))"),
    ("@m_date(CAST('2024-01-02' AS DATE))", "date(datetime.date(2024, 1, 2))"),
    ("@m_datetime('2024-01-02 03:04:05')", "datetime(datetime.datetime(2024, 1, 2, 3, 4, 5))"),
    ("@m_sum(1, 2, 3)", None),
])
def test_annotations_convert_the_argument(call: str, received: str | None, macros: MacroRegistry) -> None:
    if received is None:  # @m_sum returns a number
        assert render(f"SELECT {call} AS v", macros) == "SELECT 6 AS v"
    else:
        assert value(call, macros) == received


def test_values_of_variables_and_date_macros_are_converted(macros: MacroRegistry) -> None:
    ctx = dict(variables={"n": 4, "ids": [1, 2], "name": "abc"}, start=datetime(2024, 3, 1, tzinfo=UTC),
               end=datetime(2024, 3, 2, tzinfo=UTC))
    assert value("@m_int(@n)", macros, **ctx) == "int(4)"
    assert value("@m_ints(@ids)", macros, **ctx) == "list[int(1),int(2)]"
    assert value("@m_str(@name)", macros, **ctx) == "str('abc')"
    assert value("@m_date(@start_date)", macros, **ctx) == "date(datetime.date(2024, 3, 1))"
    assert value("@m_date(@start_ds)", macros, **ctx) == "date(datetime.date(2024, 3, 1))"
    assert value("@m_datetime(@start_dtntz)", macros, **ctx) == "datetime(datetime.datetime(2024, 3, 1, 0, 0))"


def test_keyword_arguments_and_defaults(macros: MacroRegistry) -> None:
    assert value("@m_kw(1)", macros) == "int(1) int(10) str('z')"
    assert value("@m_kw(1, 2)", macros) == "int(1) int(2) str('z')"
    assert value("@m_kw(1, c := 'q')", macros) == "int(1) int(10) str('q')"
    assert value("@m_kw(b := 2, a := 1)", macros) == "int(1) int(2) str('z')"
    assert value("@m_camel(myarg := 3)", macros) == "int(3)"
    assert value("@m_camel()", macros) == "int(0)"
    assert value("@m_options('f', y := 2, x := 1)", macros) == "str('f') str('x=1') str('y=2')"


def test_sql_is_importable_from_the_package() -> None:
    from mesh_dagster import SQL
    from mesh_dagster.core.macros.coercion import SQL as CoreSQL

    assert SQL is CoreSQL


@pytest.mark.parametrize(("call", "message"), [
    ("@m_int('x')", "Macro @m_int: argument 'n' expected int, got `'x'`"),
    ("@m_int(1.5)", "Macro @m_int: argument 'n' expected int, got `1.5`"),
    ("@m_int(NULL)", "Macro @m_int: argument 'n' expected int, got `NULL`"),
    ("@m_float(a)", "Macro @m_float: argument 'x' expected float, got `a`"),
    ("@m_bool(2)", "Macro @m_bool: argument 'flag' expected bool, got `2`"),
    ("@m_str(a + 1)", "Macro @m_str: argument 's' expected str \\(a string or a name\\), got `a \\+ 1`"),
    ("@m_column(1 + 1)", "Macro @m_column: argument 'c' expected exp.Column, got `1 \\+ 1`"),
    ("@m_table(1)", "Macro @m_table: argument 't' expected exp.Table, got `1`"),
    ("@m_select('SELECT (')", "Macro @m_select: argument 'q' expected exp.Select, got `'SELECT \\('`"),
    ("@m_literal(a)", "Macro @m_literal: argument 'v' expected exp.Literal, got `a`"),
    ("@m_ints([1, 'a'])",
     "Macro @m_ints: argument 'ns' expected int, got `'a'` \\(element 2 of `ARRAY\\(1, 'a'\\)`\\)"),
    ("@m_pair((1, 2, 3))", "Macro @m_pair: argument 'pair' expected tuple\\[int, str\\] \\(2 elements\\), got "),
    ("@m_pair(('a', 'b'))", "Macro @m_pair: argument 'pair' expected int, got `'a'` \\(element 1 of `\\('a', 'b'\\)`"),
    ("@m_union(a + 1)", "Macro @m_union: argument 'v' expected int \\| str, got `a \\+ 1`"),
    ("@m_optional('x')", "Macro @m_optional: argument 'n' expected int \\| None, got `'x'`"),
    ("@m_date('2024-13-01')", "Macro @m_date: argument 'd' expected date \\('YYYY-MM-DD'\\), got `'2024-13-01'`"),
    ("@m_date(a)", "Macro @m_date: argument 'd' expected date \\('YYYY-MM-DD'\\), got `a`"),
    ("@m_datetime('soon')", "Macro @m_datetime: argument 'd' expected datetime"),
    ("@m_sum(1, 'two')", "Macro @m_sum: argument 'numbers' expected int, got `'two'`"),
    ("@m_options('f', x := 'one')", "Macro @m_options: argument 'options' expected int, got `'one'`"),
    ("@m_dict(1)", "Macro @m_dict: parameter 'd' cannot be converted to dict; supported: int, float, str"),
    ("@m_int(1, 2)", "Macro @m_int takes at most 1 argument\\(s\\), got 2"),
    ("@m_int(n := 1, z := 2)", "Macro @m_int has no argument 'z'"),
    ("@m_kw(1, a := 2)", "Macro @m_kw got argument 'a' twice"),
    ("@m_kw()", "Macro @m_kw is missing argument 'a'"),
    ("@m_kw(b := 1)", "Macro @m_kw is missing argument 'a'"),
    ("@m_options()", "Macro @m_options is missing argument 'first'"),
])
def test_arguments_that_do_not_fit_name_macro_parameter_file_and_line(call: str, message: str,
                                                                        macros: MacroRegistry) -> None:
    with pytest.raises(MacroError, match=r"^models/x\.sql:10: " + message):
        render(f"SELECT {call}", macros)


def test_the_error_points_at_the_line_of_the_argument(macros: MacroRegistry) -> None:
    with pytest.raises(MacroError) as e:
        render("SELECT a,\n  @m_kw(\n    1,\n    'x')\nFROM t", macros)
    assert str(e.value) == "models/x.sql:13: Macro @m_kw: argument 'b' expected int, got `'x'`"


def test_a_macro_without_an_evaluator_parameter_is_refused() -> None:
    def no_evaluator(*, x: int = 1):
        return str(x)

    registry = MacroRegistry()
    registry.register(no_evaluator, "no_evaluator")
    with pytest.raises(MacroError, match=r"^models/x\.sql:10: Macro @no_evaluator cannot be called: its first "
                                         r"parameter must receive the evaluator"):
        render("SELECT @no_evaluator()", registry)


def test_string_annotations_that_do_not_resolve_fall_back_to_the_simple_names(tmp_path: Path) -> None:
    macros_dir = tmp_path / "macros"
    macros_dir.mkdir()
    (macros_dir / "loose.py").write_text(
        "from __future__ import annotations\nfrom mesh_dagster import macro\n\n"
        "@macro()\ndef twice(evaluator, n: int, other: Undefined = None):\n    return str(n * 2)\n")
    registry = load_macros(macros_dir)
    assert render("SELECT @twice(21) AS v", registry) == "SELECT 42 AS v"
    with pytest.raises(MacroError, match="argument 'n' expected int, got `'x'`"):
        render("SELECT @twice('x')", registry)
