"""Audit queries: user audits from `audits/` or inline, and the built-in ones.

An audit fails when its query returns rows. Built-ins are plain SQL templates over
`@this_model`, so they go through the same renderer (and interval filter) as user audits.

Arguments (`accepted_values(column := x, is_in := ('a,b', 'c'))`) are SQL written in the model's
dialect. They are parsed with sqlglot, never split by hand: a comma inside a string or a nested
call is part of one value. Every attachment is checked when the project loads
(`check_audit_refs`): unknown audit, unknown or missing argument, unparseable value; so a bad
attachment is refused before anything is built, not after the model's table was written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from mesh_dagster.core.config.parse_errors import describe
from mesh_dagster.core.config.types import get_dialect
from mesh_dagster.core.errors import MacroError, ModelError
from mesh_dagster.core.macros.evaluator import MacroEvaluator
from mesh_dagster.core.macros.syntax import temporal_locals
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.model import Audit, AuditRef, Model
from mesh_dagster.core.project import builtin_audit_stats as stats
from mesh_dagster.core.project import builtin_audits as rows
from mesh_dagster.core.project.builtin_audits import Arguments, BuiltinArgumentError, BuiltinAudit
from mesh_dagster.core.sql.renderer import RenderContext, audit_jinja, model_evaluator, render_audit

# ---------------------------------------------------------------------------------------------
# Built-in audits (SQL in builtin_audits.py and builtin_audit_stats.py)


B = BuiltinAudit
_RANGE = ("min_v", "max_v", "inclusive")
BUILTIN_AUDITS: dict[str, BuiltinAudit] = {
    "forall": B(("criteria",), rows.forall),
    "number_of_rows": B(("threshold",), stats.number_of_rows),
    "not_null": B(("columns",), rows.not_null),
    "at_least_one": B(("column",), stats.at_least_one),
    "not_null_proportion": B(("column", "threshold"), stats.not_null_proportion),
    "not_constant": B(("column",), stats.not_constant),
    "unique_values": B(("columns",), rows.unique_values),
    "unique_combination_of_columns": B(("columns",), rows.unique_combination_of_columns),
    "accepted_values": B(("column", "is_in"), rows.accepted_values),
    "not_accepted_values": B(("column", "is_in"), rows.not_accepted_values),
    "sequential_values": B(("column",), rows.sequential_values, ("interval",)),
    "accepted_range": B(("column",), rows.accepted_range, _RANGE),
    "mutually_exclusive_ranges": B(("lower_bound_column", "upper_bound_column"), rows.mutually_exclusive_ranges),
    "not_empty_string": B(("column",), rows.not_empty_string),
    "string_length_equal": B(("column", "v"), rows.string_length_equal),
    "string_length_between": B(("column",), rows.string_length_between, _RANGE),
    "valid_uuid": B(("column",), rows.pattern_audit(regex=True, match=True, fixed=(rows.UUID,))),
    "valid_email": B(("column",), rows.pattern_audit(regex=True, match=True, fixed=(rows.EMAIL,))),
    "valid_url": B(("column",), rows.pattern_audit(regex=True, match=True, fixed=(rows.URL,))),
    "valid_http_method": B(("column",), rows.valid_http_method),
    "match_regex_pattern_list": B(("column", "patterns"), rows.pattern_audit(regex=True, match=True)),
    "not_match_regex_pattern_list": B(("column", "patterns"), rows.pattern_audit(regex=True, match=False)),
    "match_like_pattern_list": B(("column", "patterns"), rows.pattern_audit(regex=False, match=True)),
    "not_match_like_pattern_list": B(("column", "patterns"), rows.pattern_audit(regex=False, match=False)),
    "mean_in_range": B(("column",), stats.mean_in_range, _RANGE),
    "stddev_in_range": B(("column",), stats.stddev_in_range, _RANGE),
    "z_score": B(("column", "threshold"), stats.z_score),
    "kl_divergence": B(("column", "target_column", "threshold"), stats.kl_divergence),
    "chi_square": B(("column", "target_column", "critical_value"), stats.chi_square),
}


def builtin_audit(name: str) -> BuiltinAudit | None:
    """`not_null` and `not_null_non_blocking` are the same audit (the suffix only sets blocking)."""
    return BUILTIN_AUDITS.get(name.removesuffix("_non_blocking"))


def is_known_audit(name: str, audits: dict[str, Audit]) -> bool:
    return name in audits or builtin_audit(name) is not None


# ---------------------------------------------------------------------------------------------
# Arguments


def _line(model: Model) -> int:
    """Errors point at the model's `audits` property, where the attachment is written."""
    return model.line_of("audits")


@lru_cache(maxsize=4096)
def _parse(text: str, dialect: str) -> exp.Expr | None:
    return sqlglot.parse_one(text, read=get_dialect(dialect))


def parse_argument(name: str, text: str, dialect: str, audit: str, model: Model) -> exp.Expr:
    """One argument's SQL as a tree of the caller's own (the parse is cached, the tree copied)."""
    try:
        parsed = _parse(text, dialect)
    except (ParseError, TokenError) as e:
        raise ModelError(f"Cannot parse argument `{name} := {text}` of audit '{audit}': {_problem(e)}",
                         model.path, _line(model)) from None
    if parsed is None:
        raise ModelError(f"Argument `{name}` of audit '{audit}' is empty", model.path, _line(model))
    return parsed.copy()


def _problem(error: ParseError | TokenError) -> str:
    """What is wrong, in words (sqlglot's own text names its internal classes)."""
    if isinstance(error, TokenError):
        return "a string or quoted name is not closed"
    found = error.errors[0] if error.errors else {}
    description = describe(error)
    column = found.get("col")
    return f"{description} (column {column})" if column else description


def _expand(name: str, text: str, evaluator: Callable[[], MacroEvaluator], audit: str, model: Model) -> str:
    """An argument's macros expanded in the model's context (`threshold := @min_rows`)."""
    if "@" not in text:
        return text
    try:
        return evaluator().expand(text)
    except MacroError as e:
        raise ModelError(f"Argument `{name} := {text}` of audit '{audit}': {e.message}", model.path,
                         _line(model)) from None


def audit_arguments(ref: AuditRef, model: Model, audits: dict[str, Audit],
                    evaluator: Callable[[], MacroEvaluator]) -> Arguments:
    """The attachment's arguments (with the audit's defaults), checked and parsed.

    `evaluator` makes the model's macro evaluator, only when an argument uses a macro.
    """
    audit = audits.get(ref.name)
    builtin = builtin_audit(ref.name) if audit is None else None
    if audit is None and builtin is None:
        raise ModelError(f"Model {model.name} uses unknown audit '{ref.name}'", model.path, _line(model))
    if builtin is not None:
        _check_builtin_names(ref, builtin, model)
    elif audit is not None:
        _check_user_names(ref, audit, model)
    parsed: Arguments = {}
    if audit is not None:
        for name, text in audit.defaults.items():
            parsed[name] = parse_argument(name, text, audit.dialect, ref.name, model)
    for name, text in ref.args.items():
        parsed[name] = parse_argument(name, _expand(name, text, evaluator, ref.name, model), model.dialect, ref.name,
                                      model)
    return parsed


def _check_builtin_names(ref: AuditRef, builtin: BuiltinAudit, model: Model) -> None:
    unknown = sorted(set(ref.args) - set(builtin.parameters))
    if unknown:
        raise ModelError(f"Audit '{ref.name}' has no argument '{unknown[0]}' "
                         f"(its arguments: {', '.join(builtin.parameters)})", model.path, _line(model))
    missing = [p for p in builtin.required if p not in ref.args]
    if missing:
        raise ModelError(f"Audit '{ref.name}' needs the argument `{missing[0]} := ...`", model.path, _line(model))


_MACRO_NAME = re.compile(r"@\{?\s*([A-Za-z_]\w*)")


def _check_user_names(ref: AuditRef, audit: Audit, model: Model) -> None:
    """An argument the audit's query never mentions (as `@name`) is a typo, not a parameter."""
    used = {m.lower() for m in _MACRO_NAME.findall(audit.query)} | set(audit.defaults)
    unknown = sorted(set(ref.args) - used)
    if unknown:
        where = f"{audit.path}:{audit.line}" if audit.path else "its definition"
        raise ModelError(f"Audit '{ref.name}' has no argument '{unknown[0]}' (its query in {where} "
                         f"never uses @{unknown[0]})", model.path, _line(model))


class _LoadingAuditEvaluator(MacroEvaluator):
    """Expands an audit's query when the project loads: there, an undefined variable can only be an
    argument the attachment forgot (temporal variables exist, with 1970 values, as for models)."""

    def __init__(self, *args: Any, audit: str, model: Model, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._audit = audit
        self._model = model

    def variable(self, name: str, line: int) -> Any:
        key = name.lower()
        if key not in self.locals and key not in self.variables:
            raise ModelError(f"Audit '{self._audit}' needs the argument `{key} := ...`",
                             self._model.path, _line(self._model))
        return super().variable(name, line)


def check_audit_refs(model: Model, audits: dict[str, Audit], macros: MacroRegistry,
                     variables: dict[str, Any]) -> None:
    """Refuse, at load time, any audit attachment of `model` that could only fail during an apply."""
    def evaluator() -> MacroEvaluator:
        return model_evaluator(model, RenderContext(variables=variables), macros)

    for ref in model.audits:
        args = audit_arguments(ref, model, audits, evaluator)
        audit = audits.get(ref.name)
        if audit is not None:
            _expand_at_load(audit, args, model, macros, variables)
        else:
            _build_builtin(ref, args, model)


def _build_builtin(ref: AuditRef, args: Arguments, model: Model) -> str:
    """A built-in's SQL; an argument it cannot use is refused at the model's `audits` line."""
    builtin = builtin_audit(ref.name)
    assert builtin is not None  # audit_arguments refused unknown audits
    try:
        return builtin.build(args)
    except BuiltinArgumentError as e:
        raise ModelError(f"Audit '{ref.name}': {e}", model.path, _line(model)) from None


def _expand_at_load(audit: Audit, args: Arguments, model: Model, macros: MacroRegistry,
                    variables: dict[str, Any]) -> None:
    loading = _LoadingAuditEvaluator(
        audit.dialect, registry=macros, variables=variables, locals=temporal_locals(None, None, None),
        this_model=model.name, model_kind_name=model.kind.name.value, path=audit.path, line=audit.line or 1,
        audit=audit.name, model=model,
    )
    loading.locals.update(args)
    try:
        text = audit_jinja(audit.query, model, RenderContext(variables=variables), macros, audit.path, audit.line or 1)
        loading.expand(text, audit.line or 1)
    except MacroError as e:
        raise ModelError(f"Audit '{audit.name}' ({e.path}:{e.line}): {e.message}", model.path, _line(model)) from None


# ---------------------------------------------------------------------------------------------
# Rendering


def is_blocking(ref: AuditRef, audits: dict[str, Audit]) -> bool:
    """The attachment wins, then the audit's own setting, then the built-in's name."""
    if ref.blocking is not None:
        return ref.blocking
    audit = audits.get(ref.name)
    if audit is not None:
        return audit.blocking
    return not ref.name.endswith("_non_blocking")


def audit_query(ref: AuditRef, model: Model, audits: dict[str, Audit], ctx, macros) -> tuple[str, bool]:
    """Rendered Spark SQL of an audit attached to a model, and whether it blocks."""
    args = audit_arguments(ref, model, audits, lambda: model_evaluator(model, ctx, macros))
    blocking = is_blocking(ref, audits)
    audit = audits.get(ref.name)
    if audit is not None:
        return render_audit(audit.query, audit.dialect, args, model, ctx, macros,
                            path=audit.path, line=audit.line or 1), blocking
    return render_audit(_build_builtin(ref, args, model), "spark", {}, model, ctx, macros), blocking
