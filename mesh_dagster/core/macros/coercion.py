"""Typed macro arguments: a Python macro's annotations say what its arguments become.

Every argument of a Python macro is parsed by sqlglot. Without an annotation the macro receives
that expression; with one, the expression is converted first, like SQLMesh does: `count: int`
receives 3, `names: list[str]` a list of strings, `column: exp.Column` a Column even when the
call wrote the string `'a'`, `d: date` a `datetime.date` from `'2024-01-01'` or `@start_date`.

SQLMesh logs a warning and passes the expression on when a value does not convert; we refuse it
(`CoercionError`, which the evaluator turns into an error naming the macro, the parameter and the
line of the call), so a wrong argument is reported where it is written, not as a surprise inside
the macro.
"""

from __future__ import annotations

import inspect
import types
import typing
from datetime import date, datetime
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.parser import Parser


class SQL(str):
    """SQL text produced by a macro; also an annotation asking for an argument as SQL text."""


class CoercionError(TypeError):
    """A value that cannot become the annotated type; the message reads `expected X, got `v``."""


class UnsupportedAnnotation(TypeError):
    """An annotation no argument could ever be converted to (a mistake in the macro, not the call)."""


SUPPORTED = ("int, float, str, bool, date, datetime, SQL, a sqlglot expression type (exp.Column, ...), "
             "list[...] / tuple[...] of those, unions and X | None")
_DATE_CASTS = (exp.Cast, exp.TryCast, exp.DateStrToDate, exp.TimeStrToTime, exp.TsOrDsToDate, exp.StrToDate)


def coerce(value: exp.Expr, annotation: Any, dialect: str) -> Any:
    """`value` converted to `annotation`; raises CoercionError (or UnsupportedAnnotation)."""
    if annotation in (Any, object, inspect.Parameter.empty, None):
        return value
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return _union(value, typing.get_args(annotation), annotation, dialect)
    if origin in (list, tuple) or annotation in (list, tuple):
        return _sequence(value, annotation, dialect)
    converter = _CONVERTERS.get(annotation)
    if converter is not None:
        return converter(value, dialect)
    if isinstance(annotation, type) and issubclass(annotation, exp.Expr):
        return _expression(value, annotation, dialect)
    raise UnsupportedAnnotation(f"cannot be converted to {type_name(annotation)}; supported: {SUPPORTED}")


def resolved_annotations(fn: Any) -> dict[str, Any]:
    """A user function's annotations as types, also under `from __future__ import annotations`
    (where they are strings); a string that cannot be resolved falls back to its simple name
    (`int`, `date`, ...) or to no conversion at all."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable string annotations: fall back to the simple names
        return {k: _SIMPLE_HINTS.get(v, Any) if isinstance(v, str) else v
                for k, v in getattr(fn, "__annotations__", {}).items()}


def type_name(annotation: Any) -> str:
    """How an annotation reads in a message: `int`, `list[str]`, `exp.Column | None`."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and issubclass(annotation, exp.Expr):
        return f"exp.{annotation.__name__}"
    return getattr(annotation, "__name__", str(annotation))


def _refuse(value: exp.Expr, annotation: Any, dialect: str, hint: str = "") -> CoercionError:
    return CoercionError(f"expected {type_name(annotation)}{hint}, got `{value.sql(dialect=dialect)}`")


def _union(value: exp.Expr, options: tuple[Any, ...], annotation: Any, dialect: str) -> Any:
    if isinstance(value, exp.Null) and type(None) in options:
        return None
    for option in options:
        if option is type(None):
            continue
        try:
            return coerce(value, option, dialect)
        except CoercionError:
            continue
    raise _refuse(value, annotation, dialect)


def _sequence(value: exp.Expr, annotation: Any, dialect: str) -> list[Any] | tuple[Any, ...]:
    kind = typing.get_origin(annotation) or annotation
    args = typing.get_args(annotation)
    if isinstance(value, (exp.Array, exp.Tuple)):
        elements = list(value.expressions)
    elif isinstance(value, exp.Paren):
        elements = [value.this]
    else:
        elements = [value]
    if kind is tuple and args and args[-1] is not Ellipsis:  # tuple[int, str]: fixed length
        if len(args) != len(elements):
            raise _refuse(value, annotation, dialect, f" ({len(args)} elements)")
        element_types = list(args)
    else:
        element_types = [args[0] if args else Any] * len(elements)
    converted = []
    for position, (element, element_type) in enumerate(zip(elements, element_types), start=1):
        try:
            converted.append(coerce(element, element_type, dialect))
        except CoercionError as e:
            raise CoercionError(f"{e} (element {position} of `{value.sql(dialect=dialect)}`)") from None
    return tuple(converted) if kind is tuple else converted


def _sql(value: exp.Expr, dialect: str) -> SQL:
    return SQL(value.sql(dialect=dialect))


def _str(value: exp.Expr, dialect: str) -> str:
    """String literals and names; SQLMesh's `str` coerces nothing more complicated either."""
    if isinstance(value, exp.Literal):
        return str(value.this)
    if isinstance(value, exp.Column) and not isinstance(value.this, exp.Star):
        return ".".join(part.name for part in value.parts)
    if isinstance(value, exp.Table):
        return ".".join(part.name for part in value.parts)
    if isinstance(value, (exp.Identifier, exp.Var)):
        return value.name
    raise _refuse(value, str, dialect, " (a string or a name)")


def _bool(value: exp.Expr, dialect: str) -> bool:
    if isinstance(value, exp.Boolean):
        return bool(value.this)
    if isinstance(value, exp.Literal) and str(value.this).lower() in ("true", "false", "1", "0"):
        return str(value.this).lower() in ("true", "1")
    raise _refuse(value, bool, dialect)


def _int(value: exp.Expr, dialect: str) -> int:
    number = _number(value)
    if number is None or float(number) != int(number):
        raise _refuse(value, int, dialect)
    return int(number)


def _float(value: exp.Expr, dialect: str) -> float:
    number = _number(value)
    if number is None:
        raise _refuse(value, float, dialect)
    return float(number)


def _number(value: exp.Expr) -> float | int | None:
    if isinstance(value, exp.Literal) and not value.is_string:
        text = str(value.this)
        try:
            return float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:
            return None
    if isinstance(value, exp.Neg):
        inner = _number(value.this)
        return -inner if inner is not None else None
    if isinstance(value, exp.Paren):
        return _number(value.this)
    return None


def _date_text(value: exp.Expr) -> str | None:
    """The text of `'2024-01-01'`, `CAST('2024-01-01' AS DATE)` and the like."""
    while isinstance(value, _DATE_CASTS):
        value = value.this
    if isinstance(value, exp.Literal) and value.is_string:
        return str(value.this)
    return None


def _date(value: exp.Expr, dialect: str) -> date:
    text = _date_text(value)
    try:
        if text is not None:
            return date.fromisoformat(text.strip())
    except ValueError:
        pass
    raise _refuse(value, date, dialect, " ('YYYY-MM-DD')")


def _datetime(value: exp.Expr, dialect: str) -> datetime:
    text = _date_text(value)
    try:
        if text is not None:
            return datetime.fromisoformat(text.strip())
    except ValueError:
        pass
    raise _refuse(value, datetime, dialect, " ('YYYY-MM-DD[ HH:MM:SS]')")


_SIMPLE_HINTS: dict[str, Any] = {"int": int, "str": str, "float": float, "bool": bool, "list": list, "SQL": SQL,
                                 "date": date, "datetime": datetime}
_CONVERTERS: dict[Any, Any] = {
    SQL: _sql, str: _str, bool: _bool, int: _int, float: _float, date: _date, datetime: _datetime,
}


def _expression(value: exp.Expr, annotation: type[exp.Expr], dialect: str) -> exp.Expr:
    """A node of the annotated sqlglot type: as written, unwrapped from parentheses, a name made
    into an identifier or a table, or a string literal parsed (`'SELECT 1'` for `exp.Select`)."""
    if isinstance(value, annotation):
        return value
    if isinstance(value, (exp.Paren, exp.Subquery)) and isinstance(value.this, annotation):
        return value.this
    if annotation is exp.Identifier and isinstance(value, (exp.Column, exp.Literal)) and value.name:
        return exp.to_identifier(value.name)
    if annotation is exp.Table and isinstance(value, exp.Column) and not isinstance(value.this, exp.Star):
        return exp.to_table(".".join(part.sql(dialect=dialect) for part in value.parts), dialect=dialect)
    if isinstance(value, exp.Literal) and value.is_string:
        parsed = _parse_into(str(value.this), annotation, dialect)
        if parsed is not None:
            return parsed
    raise _refuse(value, annotation, dialect)


def _parse_into(text: str, annotation: type[exp.Expr], dialect: str) -> exp.Expr | None:
    try:
        if annotation in Parser.EXPRESSION_PARSERS:
            parsed = sqlglot.parse_one(text, read=dialect, into=annotation)
        else:
            parsed = sqlglot.parse_one(text, read=dialect)
    except (ParseError, TokenError):
        return None
    if isinstance(parsed, (exp.Paren, exp.Subquery)) and isinstance(parsed.this, annotation):
        parsed = parsed.this
    return parsed if isinstance(parsed, annotation) else None
