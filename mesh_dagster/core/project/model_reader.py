"""Turns a parsed definition file into a `Model` (and its inline audits).

Every property is checked here, once, with the file and line it came from, so nothing later has
to wonder whether a model is well-formed. A property is either honoured somewhere or refused here
("accepted means honoured"): tests/unit/test_accepted_keys.py walks the tables below and each
kind's own (core/models/kinds.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from mesh_dagster.core.config.config import ModelDefaults
from mesh_dagster.core.config.names import IDENTIFIER, check_model_name
from mesh_dagster.core.config.types import check_dialect, check_storage_format, to_spark_type
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.depth import def_line_key
from mesh_dagster.core.macros.jinja import JinjaBlock, extract_blocks, is_jinja, line_key
from mesh_dagster.core.macros.syntax import QUERY_MACROS
from mesh_dagster.core.models.definition import (
    DefinitionFile,
    Entry,
    Statement,
    Value,
    read_blocks,
    read_definition,
    read_value,
)
from mesh_dagster.core.models.kinds import KIND_CLASSES, BaseKind, ViewKind
from mesh_dagster.core.models.kinds import kind_class as kind_of
from mesh_dagster.core.models.model import Audit, AuditRef, Model, SignalRef
from mesh_dagster.core.models.property_values import checked, read_bool, read_column
from mesh_dagster.core.models.session_properties import merged, read_session_properties
from mesh_dagster.core.project.standalone_audits import NODE_PROPERTIES, with_node
from mesh_dagster.core.time.cron import IntervalUnit, interval_unit, validate_cron, validate_cron_tz
from mesh_dagster.core.time.dates import to_datetime

SUPPORTED_PROPERTIES = {
    "name", "kind", "dialect", "cron", "start", "end", "grain", "grains", "columns", "audits", "tags",
    "owner", "description", "partitioned_by", "storage_format", "depends_on", "enabled", "stamp",
    "column_descriptions", "cron_tz", "interval_unit", "allow_partials", "signals", "references",
    "ignored_rules", "session_properties",
}
# SQLMesh properties we recognise but do not implement yet: a clear error beats silent ignoring.
UNSUPPORTED_PROPERTIES = {
    "table_format", "clustered_by", "physical_properties", "virtual_properties",
    "physical_version", "gateway", "optimize_query",
    "grants", "project", "formatting", "validate_query",
}
UNSUPPORTED_KINDS = {"MANAGED"}
_ALIASED = re.compile(r"(`[^`]*`|\"[^\"]*\"|[^`\"\s]+)\s+AS\s+(.+)", re.IGNORECASE)  # AS outside quotes
JINJA_MARKERS = {"JINJA_QUERY_BEGIN", "JINJA_STATEMENT_BEGIN", "JINJA_END"}  # SQLMesh's Jinja blocks
QUERY_STARTS = {"SELECT", "WITH", "(", "FROM", "VALUES", "TABLE", "JINJA_QUERY_BEGIN"}
AUDIT_PROPERTIES = {"name", "dialect", "blocking", "defaults", "skip", "standalone", "description"}


def _date_text(value: Value, path: str, what: str) -> str:
    try:
        to_datetime(value.text)
    except ValueError as e:
        raise ModelError(f"Invalid {what} '{value.text}': {e}", path, value.line) from None
    return value.text


# ---------------------------------------------------------------------------------------------
# kind (...): each kind class reads its own properties (core/models/kinds.py)


def _kind(entry: Entry, path: str) -> BaseKind:
    value = entry.value
    assert value is not None
    name = ((value.head or "") if value.kind == "call" else value.text).strip().upper()
    if name in UNSUPPORTED_KINDS:
        raise ModelError(f"Model kind {name} is not supported by mesh_dagster yet", path, value.line)
    try:
        kind_class = kind_of(name)
    except ValueError:
        written = (k for k, cls in KIND_CLASSES.items() if not (cls.is_external or cls.is_standalone_audit))
        known = ", ".join(k.value for k in written)
        raise ModelError(f"Unknown model kind '{name}'. Known kinds: {known}", path, value.line) from None
    return kind_class.read(value.items if value.kind == "call" else [], path, value.line)


# ---------------------------------------------------------------------------------------------
# MODEL properties


def _columns(value: Value, path: str, dialect: str = "spark") -> dict[str, str]:
    """`columns (name TYPE, ...)`, types written in the model's dialect, kept in Spark's spelling."""
    if value.kind != "group":
        raise ModelError("columns is written `columns (name TYPE, ...)`", path, value.line)
    columns: dict[str, str] = {}
    for item in value.items:
        name_token, type_text = _column_and_type(item)
        name = read_column(name_token, path, item.line)
        if not type_text:
            raise ModelError(f"Column '{name}' needs a type, e.g. `{name} INT`", path, item.line)
        if name in columns:
            raise ModelError(f"Column '{name}' is declared twice", path, item.line)
        try:
            columns[name] = to_spark_type(type_text, dialect)
        except ValueError as e:
            raise ModelError(f"Invalid type for column '{name}': {e}", path, item.line) from None
    return columns


def _column_and_type(item: Entry) -> tuple[str, str]:
    """`name TYPE`: the first token is the name (quoted or not), the rest of the item its type."""
    if item.reader is None or len(item.tokens) < 2:
        return item.raw.strip(), ""
    start, end = item.span
    return item.tokens[0].text, item.reader.span_text(start + 1, end).strip()


def _column_descriptions(value: Value, path: str) -> dict[str, str]:
    """`column_descriptions (col = 'comment', ...)` → {column: comment}."""
    if value.kind != "group":
        raise ModelError("column_descriptions is written `(column = 'description', ...)`", path, value.line)
    out: dict[str, str] = {}
    for item in value.items:
        if not item.key or item.value is None or item.value.kind != "string":
            raise ModelError(f"Column descriptions are written `column = 'description'`, got '{item.raw}'",
                             path, item.line)
        out[read_column(item.key, path, item.line)] = item.value.text
    return out


def _audit_refs(value: Value, path: str) -> list[AuditRef]:
    refs = []
    for item in value.items if value.kind == "group" else [Entry(value.text, value.line, [], value=value)]:
        v = item.value
        assert v is not None
        if v.kind == "call":
            args, blocking = {}, None
            for arg in v.items:
                if not arg.key:
                    raise ModelError(f"Audit arguments are written `name := value`, got '{arg.raw}'", path, arg.line)
                assert arg.value is not None  # a `key := value` item always has its value
                if arg.key.lower() == "blocking":
                    blocking = read_bool(arg.value, path)
                else:
                    args[arg.key.lower()] = arg.value.source
            refs.append(AuditRef(name=(v.head or "").lower(), args=args, blocking=blocking))
        elif v.kind in ("scalar", "string") and IDENTIFIER.fullmatch(v.text.strip()):
            refs.append(AuditRef(name=v.text.strip().lower()))
        else:
            raise ModelError(
                f"Audits are written `name` or `name(arg := value, ...)`, got '{item.raw}'", path, item.line
            )
    return refs


@lru_cache(maxsize=64)
def default_audit_refs(entries: tuple[str, ...]) -> tuple[AuditRef, ...]:
    """`model_defaults.audits` entries (`not_null(columns := (id))`, `my_audit`) read exactly like a
    model's `audits (...)`; a ValueError names the entry that cannot be read."""
    where = "model_defaults.audits"
    refs: list[AuditRef] = []
    for entry in entries:
        try:
            value = read_value(entry, where)
            if value.kind == "group":
                raise ModelError("one audit per entry", where)
            refs += [ref.model_copy(update={"default": True}) for ref in _audit_refs(value, where)]
        except ModelError as e:
            raise ValueError(f"cannot read the audit '{entry}': {e.message}") from None
    return tuple(refs)


def _attach_default_audits(own: list[AuditRef], defaults: ModelDefaults, kind: BaseKind) -> list[AuditRef]:
    """The model's audits, then the defaults it does not attach itself (its own attachment of an
    audit wins, with its own arguments). Kinds without data of their own (symbolic) get none."""
    if not defaults.audits or kind.is_symbolic:
        return own
    names = {ref.name for ref in own}
    return own + [ref for ref in default_audit_refs(tuple(defaults.audits)) if ref.name not in names]


def _names(v: Value, path: str) -> list[str]:
    """Column names (`grain`, `partitioned_by`): plain identifiers, not expressions."""
    if v.kind == "call":
        raise ModelError(f"Expected column names, got the expression '{v.text}'", path, v.line)
    return [read_column(x, path, v.line) for x in v.as_list()]


def _keys(v: Value, path: str) -> list[tuple[str, str | None]]:
    """`grain`, `grains`, `references`: (column, alias) pairs, the alias (`column AS alias`: the name
    another model joins it by) None where none is written; split by `_split_keys`."""
    if v.kind == "call":
        raise ModelError(f"Expected column names, got the expression '{v.text}'", path, v.line)
    keys: list[tuple[str, str | None]] = []
    for text in v.as_list():
        aliased = _ALIASED.fullmatch(text.strip())
        column = read_column(aliased[1] if aliased else text, path, v.line)
        keys.append((column, read_column(aliased[2], path, v.line, "Alias") if aliased else None))
    return keys


def _split_keys(props: dict[str, Any]) -> None:
    """The columns of `grain` and `references` into their fields, their aliases into `key_aliases`."""
    aliases: dict[str, str] = {}
    for field in ("grain", "references"):
        if field in props:
            aliases.update({column: alias for column, alias in props[field] if alias})
            props[field] = [column for column, _ in props[field]]
    if aliases:
        props["key_aliases"] = aliases


def _list(v: Value, path: str) -> list[str]:
    return [x.strip("`\"").lower() if v.kind != "string" else x for x in v.as_list()]


def _signal_refs(value: Value, path: str) -> list[SignalRef]:
    """`signals (name, other(arg := value, ...))`: readiness checks defined in `signals/*.py`."""
    refs: list[SignalRef] = []
    for item in value.items if value.kind == "group" else [Entry(value.text, value.line, [], value=value)]:
        v = item.value
        assert v is not None
        if v.kind == "call" and IDENTIFIER.fullmatch((v.head or "").strip()):
            args: dict[str, str] = {}
            for arg in v.items:
                if not arg.key or arg.value is None:
                    raise ModelError(f"Signal arguments are written `name := value`, got '{arg.raw}'", path, arg.line)
                args[arg.key.lower()] = arg.value.source
            refs.append(SignalRef(name=(v.head or "").strip().lower(), args=args, line=item.line))
        elif v.kind in ("scalar", "string") and IDENTIFIER.fullmatch(v.text.strip()):
            refs.append(SignalRef(name=v.text.strip().lower(), line=item.line))
        else:
            raise ModelError(f"Signals are written `name` or `name(arg := value, ...)`, got '{item.raw}'",
                             path, item.line)
    return refs


def _cron(v: Value, path: str) -> str:
    return checked(validate_cron, v.text, path, v.line)


def _model_name(v: Value, path: str) -> str:
    return checked(check_model_name, v.text, path, v.line)


_PROPERTY_HANDLERS: dict[str, Callable[[Value, str], Any]] = {
    "name": _model_name,
    "dialect": lambda v, p: checked(check_dialect, v.text, p, v.line),
    "cron": _cron,
    "start": lambda v, p: _date_text(v, p, "start"),
    "end": lambda v, p: _date_text(v, p, "end"),
    "grain": _keys,
    "grains": _keys,
    "references": _keys,
    "audits": _audit_refs,
    "tags": _list,
    "owner": lambda v, p: v.text,
    "description": lambda v, p: v.text,
    "partitioned_by": _names,
    "storage_format": lambda v, p: checked(check_storage_format, v.text, p, v.line),
    "depends_on": lambda v, p: [_model_name(Value(x, v.line, "scalar"), p) for x in v.as_list()],
    "enabled": read_bool,
    "stamp": lambda v, p: v.text,
    "column_descriptions": _column_descriptions,
    "cron_tz": lambda v, p: checked(validate_cron_tz, v.text, p, v.line),
    "interval_unit": lambda v, p: checked(IntervalUnit.parse, v.text, p, v.line),
    "allow_partials": read_bool,
    "signals": _signal_refs,
    "ignored_rules": lambda v, p: [x.strip("`\"'").lower() for x in v.as_list()],  # core/project/linter.py
    "session_properties": read_session_properties,
}
_PROPERTY_FIELDS = {"grains": "grain", "interval_unit": "declared_unit"}


# ---------------------------------------------------------------------------------------------
# Statements and audits


def _split_statements(
    statements: list[Statement], path: str, jinja: list[JinjaBlock] | None = None
) -> tuple[list[Statement], list[str], Statement | None, list[str], list[Audit]]:
    """Macro definitions, pre-statements, the main query, post-statements and inline audits
    (a Jinja block, a placeholder in `statements`, is its text as written: core/macros/jinja.py)."""
    macro_defs: list[Statement] = []
    body: list[Statement] = []
    audits: list[Audit] = []
    i = 0
    while i < len(statements):
        st = _written(statements[i], jinja)
        word = st.first_word
        if word == "AUDIT" and len(st.tokens) > 1 and st.tokens[1].text == "(":
            file = read_blocks(st.text + ";" + (statements[i + 1].text if i + 1 < len(statements) else ""), path)
            (block, _), = file
            query = _written(statements[i + 1], jinja) if i + 1 < len(statements) else None
            audits.append(_audit(block, query, path, st.line))
            i += 2
            continue
        if word == "@" and len(st.tokens) > 1 and st.tokens[1].text.upper() == "DEF":
            macro_defs.append(st)
        else:
            body.append(st)
        i += 1
    query_index = max((j for j, st in enumerate(body) if _is_query(st)), default=None)
    if query_index is None:
        return macro_defs, [s.text for s in body], None, [], audits
    return (macro_defs, [s.text for s in body[:query_index]], body[query_index],
            [s.text for s in body[query_index + 1:]], audits)


VIRTUAL_UPDATE_BEGIN, VIRTUAL_UPDATE_END = "ON_VIRTUAL_UPDATE_BEGIN", "ON_VIRTUAL_UPDATE_END"


def virtual_update_statements(statements: list[Statement], path: str) -> tuple[list[Statement], list[Statement]]:
    """The statements outside `ON_VIRTUAL_UPDATE_BEGIN; ... ON_VIRTUAL_UPDATE_END;` blocks, and those
    inside (SQLMesh runs them when the model's view is created or updated, not with the model)."""
    outside: list[Statement] = []
    inside: list[Statement] = []
    begin: Statement | None = None
    for st in statements:
        word = st.first_word
        if word == VIRTUAL_UPDATE_BEGIN:
            if begin is not None:
                raise ModelError(f"{VIRTUAL_UPDATE_BEGIN} inside the block opened at line {begin.line} "
                                 f"(close it with {VIRTUAL_UPDATE_END};)", path, st.line)
            begin = st
        elif word == VIRTUAL_UPDATE_END:
            if begin is None:
                raise ModelError(f"{VIRTUAL_UPDATE_END} without {VIRTUAL_UPDATE_BEGIN} before it", path, st.line)
            begin = None
        else:
            (inside if begin is not None else outside).append(st)
    if begin is not None:
        unended = any(st.text.rstrip().upper().endswith(VIRTUAL_UPDATE_END) for st in inside)
        hint = f" (a `;` is missing before {VIRTUAL_UPDATE_END})" if unended else ""
        raise ModelError(f"{VIRTUAL_UPDATE_BEGIN} is never closed with {VIRTUAL_UPDATE_END};{hint}", path, begin.line)
    return outside, inside


def _written(statement: Statement, jinja: list[JinjaBlock] | None) -> Statement:
    """The Jinja block a placeholder statement of `extract_blocks` stands for; others as they are."""
    tokens = statement.tokens
    if statement.first_word not in JINJA_MARKERS or not jinja or len(tokens) < 2 or not tokens[1].text.isdigit():
        return statement
    block = jinja[int(statement.tokens[1].text)]
    return Statement(block.text, block.line, statement.tokens)


def _is_query(statement: Statement) -> bool:
    """A query: `SELECT ...`, `WITH ...`, ..., a macro whose value is a query (`@UNION(...)`) or a
    Jinja query block."""
    if statement.first_word == "@":
        return len(statement.tokens) > 1 and statement.tokens[1].text.upper() in QUERY_MACROS
    return statement.first_word in QUERY_STARTS


def _audit_defaults(value: Value, path: str) -> dict[str, str]:
    """`defaults (name := value, ...)`: argument text as written, handed to sqlglot later."""
    if value.kind != "group":
        raise ModelError("Audit defaults are written `defaults (name := value, ...)`", path, value.line)
    out = {}
    for item in value.items:
        if not item.key or item.value is None:
            raise ModelError(f"Audit defaults are written `name := value`, got '{item.raw}'", path, item.line)
        out[item.key.lower()] = item.value.source
    return out


def _audit(block: DefinitionFile, query: Statement | None, path: str, line: int) -> Audit:
    props: dict[str, Any] = {"path": path, "line": line}
    node: list[Entry] = []  # a standalone audit's node properties (core/project/standalone_audits.py)
    for entry in block.properties:
        key = (entry.key or "").lower()
        if key in NODE_PROPERTIES:
            node.append(entry)
            continue
        if key not in AUDIT_PROPERTIES:
            raise ModelError(f"Unknown audit property '{entry.key}'", path, entry.line)
        v = entry.value
        assert v is not None  # a property always has its value
        if key == "name":
            props["name"] = read_column(v.text, path, v.line, "Audit name")
        elif key == "dialect":
            props["dialect"] = checked(check_dialect, v.text, path, v.line)
        elif key == "blocking":
            props["blocking"] = read_bool(v, path)
        elif key == "description":
            props["description"] = v.text
        elif key == "skip" and read_bool(v, path):
            raise ModelError("skip true is not supported by mesh_dagster yet (remove the audit from the models' "
                             "audits instead)", path, v.line)
        elif key == "standalone":
            props["standalone"] = read_bool(v, path)
        elif key == "defaults":
            props["defaults"] = _audit_defaults(v, path)
    if "name" not in props:
        raise ModelError("An AUDIT block needs a name", path, line)
    if query is None or not _is_query(query):
        raise ModelError(f"Audit '{props['name']}' has no query after its AUDIT block", path, line)
    # A Jinja query keeps the lines between it and the AUDIT block: its errors count from the block's line.
    text = "\n" * (query.line - line) + query.text if is_jinja(query.text) else query.text
    return with_node(Audit(query=text, **props), node, block.properties, read_model_properties)


def read_audit_file(text: str, path: str) -> list[Audit]:
    text, jinja = extract_blocks(text, path)
    return [_audit(block, query and _written(query, jinja), path, block.block_line)
            for block, query in read_blocks(text, path)]


# ---------------------------------------------------------------------------------------------
# A model file


def project_root_of(file: Path, path: str) -> Path:
    """The folder of the repository holding `file`, from that file's `path` as shown: relative to
    it, or (another repository of a multi-repo project) leading there from the first repository
    (`../repo_2/models/c.sql`): the folder holding the path's first `models/`."""
    parts = Path(path).parts
    inside = [part for part in parts if part != ".."]
    depth = len(inside) - inside.index("models") if parts[0] == ".." and "models" in inside else len(parts)
    return file.resolve().parents[depth - 1]


def read_model_file(text: str, path: str, file_path: Path, defaults: ModelDefaults) -> Model:
    """Parse one `models/*.sql` file into a Model (not yet checked against other models)."""
    text, jinja = extract_blocks(text, path)
    definition = read_definition(text, path)
    if definition.block_kind != "MODEL":
        raise ModelError("A model file must start with a MODEL (...) block", path, 1)
    props, lines, deferred = read_model_properties(definition.properties, path, definition.block_line, defaults)
    if "name" not in props:
        raise ModelError("The MODEL block needs a name, e.g. `name my_schema.my_model`", path, definition.block_line)
    columns_entry = deferred.get("columns")
    if columns_entry is not None and columns_entry.value is not None:
        props["columns"] = _columns(columns_entry.value, path, props["dialect"])
    kind = complete_model_properties(props, lines, deferred.get("kind"), ViewKind(), path, definition.block_line,
                                     defaults, project_root_of(file_path, path))
    statements, on_virtual_update = virtual_update_statements(definition.statements, path)
    macro_defs, pre, query, post, audits = _split_statements(statements, path, jinja)
    if not kind.has_query:
        if query is not None or pre or post:
            raise ModelError(f"{kind.name.value} models have no query: only the MODEL block", path,
                             query.line if query else definition.block_line)
        props["query"] = None
    else:
        if query is None:
            raise ModelError(f"Model {props['name']} has no query after its MODEL block", path, definition.block_line)
        props.update(query=query.text, query_line=query.line)
    lines.update({def_line_key(i): d.line for i, d in enumerate(macro_defs)})
    lines.update({line_key(block.text): block.line for block in jinja if not block.is_query})
    props.update(macro_definitions=[d.text for d in macro_defs], pre_statements=pre, post_statements=post,
                 on_virtual_update=[_written(st, jinja).text for st in on_virtual_update], inline_audits=audits,
                 property_lines=lines)
    return Model(**props)


# Properties whose reading needs others first (the kind needs the cron; columns need the dialect).
DEFERRED_PROPERTIES = ("kind", "columns")


def read_model_properties(entries: list[Entry], path: str, line: int, defaults: ModelDefaults
                          ) -> tuple[dict[str, Any], dict[str, int], dict[str, Entry]]:
    """The model properties written as `entries` (a MODEL block's, or a Python model's decorator
    arguments) with the project's defaults: `Model` fields, each property's line, and the
    `DEFERRED_PROPERTIES` entries, unread. Unknown, unsupported and repeated properties are refused."""
    props: dict[str, Any] = {"path": path, "line": line, "dialect": defaults.dialect, "cron": defaults.cron,
                             "start": defaults.start, "owner": defaults.owner,
                             "storage_format": defaults.storage_format, "cron_tz": defaults.cron_tz,
                             "declared_unit": defaults.interval_unit, "allow_partials": defaults.allow_partials}
    lines: dict[str, int] = {}
    deferred: dict[str, Entry] = {}
    for entry in entries:  # first, so that a feature we lack is named before what it would change (`@name`)
        if (entry.key or "").lower() in UNSUPPORTED_PROPERTIES:
            raise ModelError(f"Property '{entry.key}' is not supported by mesh_dagster yet", path, entry.line)
    for entry in entries:
        key = (entry.key or "").lower()
        v = entry.value
        assert v is not None
        if key in lines:
            raise ModelError(f"Property '{entry.key}' is set twice", path, entry.line)
        lines[key] = entry.line
        if key not in SUPPORTED_PROPERTIES:
            raise ModelError(f"Unknown model property '{entry.key}'", path, entry.line)
        if key in DEFERRED_PROPERTIES:
            deferred[key] = entry
        else:
            props[_PROPERTY_FIELDS.get(key, key)] = _PROPERTY_HANDLERS[key](v, path)
    props["session_properties"] = merged(defaults.session_properties, props.get("session_properties", {}))
    return props, lines, deferred


def complete_model_properties(props: dict[str, Any], lines: dict[str, int], kind_entry: Entry | None,
                              default_kind: BaseKind, path: str, line: int, defaults: ModelDefaults,
                              root: Path) -> BaseKind:
    """Read the kind (`default_kind` when none is written) into `props`, with what depends on it
    (its defaults, the audits `model_defaults` attaches) and the checks across properties; the kind.
    `root`: the project's folder, of which `path` is a file."""
    kind = _kind(kind_entry, path) if kind_entry else default_kind
    kind_line = kind_entry.line if kind_entry else line
    unit = _interval_unit(props, lines, path, line)
    kind.check_interval_unit(unit, path, kind_line)
    kind = kind.checked(props, path, kind_line)
    _check_start_before_end(props, lines, path)
    _check_allow_partials(props, lines, kind, path)
    kind = kind.with_policy_defaults(defaults.on_destructive_change, defaults.on_additive_change)
    props["kind"] = kind.located(root / Path(path).parent, root)
    props["audits"] = _attach_default_audits(props.get("audits", []), defaults, kind)
    _split_keys(props)
    return kind


def _interval_unit(props: dict[str, Any], lines: dict[str, int], path: str, line: int) -> IntervalUnit:
    """The model's interval unit; a written one (or `model_defaults.interval_unit`) longer than the
    cron's period is refused: the cron would be due before any interval is complete."""
    try:
        return interval_unit(props["cron"], props.get("declared_unit"))
    except ValueError as e:
        where = lines.get("interval_unit", lines.get("cron", line))
        raise ModelError(str(e), path, where) from None


def _check_allow_partials(props: dict[str, Any], lines: dict[str, int], kind: BaseKind, path: str) -> None:
    """Kinds built once (seeds, views) have no intervals, and kinds folding each batch into their
    history would fold a partial interval's rows twice when it is completed: for them it is refused
    when written, and `model_defaults.allow_partials` does not reach them. (A FULL model with it is
    rebuilt at every run: its latest interval is never complete.)"""
    if not props.get("allow_partials") or not (kind.is_timeless or kind.restates_full_history):
        return
    if "allow_partials" not in lines:
        props["allow_partials"] = False
        return
    why = "it is built once" if kind.is_timeless else "each batch folds into its history"
    raise ModelError(f"allow_partials does not apply to {kind.name.value} models: {why}", path,
                     lines["allow_partials"])


def _check_start_before_end(props: dict[str, Any], lines: dict[str, int], path: str) -> None:
    start, end = props.get("start"), props.get("end")
    if start and end and to_datetime(end) < to_datetime(start):
        raise ModelError(f"end '{end}' is before start '{start}'", path, lines.get("end"))
