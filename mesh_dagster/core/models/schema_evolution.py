"""Schema diffs: how a kept table's columns must change to hold a changed query's output.

A forward-only change keeps the model's table, so its schema is migrated in place instead of
rebuilt. Adding a column or widening a type loses nothing (additive); dropping a column or
narrowing a type does (destructive). Each model's `on_additive_change` / `on_destructive_change`
policy decides what is allowed, at plan time (from what the project knows of the columns) and
again at run time (against the real table, whose types are exact).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from mesh_dagster.core.config.config import SchemaChangePolicy

# Integral and floating types by width: a column may move to a wider one without losing values.
_WIDTHS = {"tinyint": 1, "byte": 1, "smallint": 2, "short": 2, "int": 3, "integer": 3, "bigint": 4, "long": 4}
_FLOATS = {"float": 1, "real": 1, "double": 2}
_DECIMAL = re.compile(r"decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def _norm(type_text: str | None) -> str | None:
    return None if type_text is None else re.sub(r"\s+", "", type_text.strip().lower())


def is_widening(old: str, new: str) -> bool:
    """Whether every value of type `old` is exactly a value of type `new`."""
    a, b = _norm(old), _norm(new)
    if a is None or b is None or a == b:
        return a == b
    if a in _WIDTHS and b in _WIDTHS:
        return _WIDTHS[a] < _WIDTHS[b]
    if a in _FLOATS and b in _FLOATS:
        return _FLOATS[a] < _FLOATS[b]
    if a in _WIDTHS and b in _FLOATS:
        return _WIDTHS[a] <= (3 if b == "double" else 2)  # the float's mantissa holds every value
    if a in _WIDTHS and (d := _DECIMAL.fullmatch(b)):
        digits = {1: 3, 2: 5, 3: 10, 4: 20}[_WIDTHS[a]]
        precision, scale = int(d.group(1)), int(d.group(2))
        return precision - scale >= digits
    if (x := _DECIMAL.fullmatch(a)) and (y := _DECIMAL.fullmatch(b)):
        p1, s1, p2, s2 = (int(v) for v in (*x.groups(), *y.groups()))
        return s2 >= s1 and p2 - s2 >= p1 - s1
    return a == "date" and b == "timestamp"


@dataclass(frozen=True)
class SchemaDiff:
    """Columns added, dropped and retyped (old type, new type) from a kept table to a new output."""

    added: dict[str, str | None] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    widened: dict[str, tuple[str, str]] = field(default_factory=dict)
    narrowed: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def is_additive(self) -> bool:
        return bool(self.added or self.widened)

    @property
    def is_destructive(self) -> bool:
        return bool(self.dropped or self.narrowed)

    @property
    def is_empty(self) -> bool:
        return not (self.is_additive or self.is_destructive)

    def describe_destructive(self) -> str:
        parts = [f"drops column {c}" for c in self.dropped]
        parts += [f"changes column {c} from {a} to {b}" for c, (a, b) in self.narrowed.items()]
        return ", ".join(parts)

    def describe_additive(self) -> str:
        parts = [f"adds column {c}" + (f" {t}" if t else "") for c, t in self.added.items()]
        parts += [f"widens column {c} from {a} to {b}" for c, (a, b) in self.widened.items()]
        return ", ".join(parts)


def diff_schemas(old: Mapping[str, str | None], new: Mapping[str, str | None]) -> SchemaDiff:
    """The diff from `old` columns to `new` (names compared case-insensitively, as Spark does).

    A type unknown on either side is not compared: the run-time check against the real table,
    whose types are exact, catches what the plan could not see.
    """
    old_by = {c.lower(): (c, t) for c, t in old.items()}
    new_by = {c.lower(): (c, t) for c, t in new.items()}
    added = {new_by[k][0]: new_by[k][1] for k in new_by if k not in old_by}
    dropped = [old_by[k][0] for k in old_by if k not in new_by]
    widened: dict[str, tuple[str, str]] = {}
    narrowed: dict[str, tuple[str, str]] = {}
    for key, (name, old_type) in old_by.items():
        new_type = new_by.get(key, (name, None))[1]
        if old_type is None or new_type is None or _norm(old_type) == _norm(new_type):
            continue
        (widened if is_widening(old_type, new_type) else narrowed)[name] = (old_type, new_type)
    return SchemaDiff(added, dropped, widened, narrowed)


@dataclass(frozen=True)
class PolicyVerdict:
    """What the policies say of one model's schema diff."""

    errors: list[str]  # refused: the plan or run stops
    warnings: list[str]  # allowed, but said
    apply_additive: bool  # migrate added/widened columns (False when `ignore`d)
    apply_destructive: bool  # migrate dropped/narrowed columns (False when `ignore`d)


def judge(model: str, diff: SchemaDiff, destructive: SchemaChangePolicy, additive: SchemaChangePolicy, *,
          allow_destructive: bool = False, allow_additive: bool = False) -> PolicyVerdict:
    """Apply a model's policies (or a plan's `--allow-*-model` overrides) to its diff."""
    errors: list[str] = []
    warnings: list[str] = []
    if allow_destructive and destructive in (SchemaChangePolicy.ERROR, SchemaChangePolicy.WARN):
        destructive = SchemaChangePolicy.ALLOW
    if allow_additive and additive in (SchemaChangePolicy.ERROR, SchemaChangePolicy.WARN):
        additive = SchemaChangePolicy.ALLOW
    for is_change, policy, what, flag, key in (
        (diff.is_destructive, destructive, diff.describe_destructive, "--allow-destructive-model",
         "on_destructive_change"),
        (diff.is_additive, additive, diff.describe_additive, "--allow-additive-model", "on_additive_change"),
    ):
        if not is_change:
            continue
        if policy == SchemaChangePolicy.ERROR:
            errors.append(f"{model}: the change {what()}, which {key} 'error' refuses. Allow it with "
                          f"{flag} {model} or set {key} in the model")
        elif policy == SchemaChangePolicy.WARN:
            warnings.append(f"{model}: the change {what()} ({key} 'warn')")
    return PolicyVerdict(errors, warnings, additive != SchemaChangePolicy.IGNORE,
                         destructive != SchemaChangePolicy.IGNORE)
