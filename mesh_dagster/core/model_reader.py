"""Turns a parsed definition file into a `Model` (and its inline audits).

Every property is checked here, once, with the file and line it came from, so nothing later has
to wonder whether a model is well-formed.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Callable

from mesh_dagster.core.config import ModelDefaults
from mesh_dagster.core.cron import validate_cron
from mesh_dagster.core.dates import to_datetime
from mesh_dagster.core.definition import DefinitionFile, Entry, Statement, Value, read_blocks, read_definition
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.model import Audit, AuditRef, KindName, Model, ModelKind

SUPPORTED_PROPERTIES = {
    "name", "kind", "dialect", "cron", "start", "end", "grain", "grains", "columns", "audits", "tags",
    "owner", "description", "partitioned_by", "storage_format", "depends_on", "enabled", "stamp",
    "column_descriptions",
}
# SQLMesh properties we recognise but do not implement yet: a clear error beats silent ignoring.
UNSUPPORTED_PROPERTIES = {
    "cron_tz", "interval_unit", "table_format", "clustered_by", "physical_properties", "virtual_properties",
    "session_properties", "allow_partials", "physical_version", "gateway", "optimize_query", "signals",
    "blueprints", "references", "grants", "project", "formatting", "ignored_rules", "validate_query",
}
UNSUPPORTED_KINDS = {
    "INCREMENTAL_BY_UNIQUE_KEY", "INCREMENTAL_BY_PARTITION", "INCREMENTAL_UNMANAGED", "SCD_TYPE_2",
    "SCD_TYPE_2_BY_TIME", "SCD_TYPE_2_BY_COLUMN", "MANAGED", "CUSTOM",
}
KIND_PROPERTIES = {
    KindName.INCREMENTAL_BY_TIME_RANGE: {"time_column", "batch_size", "lookback", "batch_concurrency", "forward_only",
                                         "on_destructive_change", "on_additive_change", "partition_by_time_column"},
    KindName.SEED: {"path", "batch_size", "csv_settings"},
    KindName.VIEW: {"materialized"},
}
QUERY_STARTS = {"SELECT", "WITH", "(", "FROM", "VALUES", "TABLE"}
AUDIT_PROPERTIES = {"name", "dialect", "blocking", "defaults", "skip", "standalone", "description"}


def _bool(value: Value, path: str) -> bool:
    text = value.text.strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ModelError(f"Expected true or false, got '{value.text}'", path, value.line)


def _int(value: Value, path: str, what: str) -> int:
    try:
        return int(value.text)
    except ValueError:
        raise ModelError(f"{what} must be an integer, got '{value.text}'", path, value.line) from None


def _date_text(value: Value, path: str, what: str) -> str:
    try:
        to_datetime(value.text)
    except ValueError as e:
        raise ModelError(f"Invalid {what} '{value.text}': {e}", path, value.line) from None
    return value.text


def _kind(entry: Entry, path: str) -> ModelKind:
    value = entry.value
    assert value is not None
    name = (value.head if value.kind == "call" else value.text).strip().upper()
    if name in UNSUPPORTED_KINDS:
        raise ModelError(f"Model kind {name} is not supported by mesh_dagster yet", path, value.line)
    try:
        kind_name = KindName(name)
    except ValueError:
        known = ", ".join(k.value for k in KindName)
        raise ModelError(f"Unknown model kind '{name}'. Known kinds: {known}", path, value.line) from None
    props: dict[str, Any] = {"name": kind_name}
    allowed = KIND_PROPERTIES.get(kind_name, set())
    for item in (value.items if value.kind == "call" else []):
        prop = item.as_property()
        key = (prop.key or "").lower()
        if key not in allowed:
            raise ModelError(f"Unknown property '{prop.key}' for kind {name}", path, prop.line)
        pv = prop.value
        assert pv is not None
        if key == "time_column":
            parts = pv.as_list()
            props["time_column"] = parts[0].lower()
            if len(parts) > 1:
                props["time_column_format"] = parts[1]
        elif key == "batch_size":
            props["batch_size"] = _int(pv, path, "batch_size")
        elif key == "lookback":
            props["lookback"] = _int(pv, path, "lookback")
        elif key == "batch_concurrency":
            props["batch_concurrency"] = _int(pv, path, "batch_concurrency")
            if props["batch_concurrency"] < 1:
                raise ModelError("batch_concurrency must be at least 1", path, pv.line)
        elif key == "materialized":
            props["materialized"] = _bool(pv, path)
        elif key == "path":
            props["path"] = pv.text
        elif key == "csv_settings":
            props["csv_settings"] = {i.key: i.value.text for i in pv.items if i.key and i.value}
    if kind_name == KindName.INCREMENTAL_BY_TIME_RANGE and not props.get("time_column"):
        raise ModelError("INCREMENTAL_BY_TIME_RANGE models need a time_column, e.g. "
                         "`kind INCREMENTAL_BY_TIME_RANGE (time_column event_date)`", path, value.line)
    if kind_name == KindName.SEED and not props.get("path"):
        raise ModelError("SEED models need a path, e.g. `kind SEED (path '../seeds/data.csv')`", path, value.line)
    return ModelKind(**props)


def _columns(value: Value, path: str) -> dict[str, str]:
    from mesh_dagster.core.types import to_spark_type

    columns: dict[str, str] = {}
    for item in value.items:
        name, _, type_text = item.raw.strip().partition(" ")
        if not type_text.strip():
            raise ModelError(f"Column '{name}' needs a type, e.g. `{name} INT`", path, item.line)
        try:
            columns[name.strip("`\"").lower()] = to_spark_type(type_text.strip(), "spark")
        except ValueError as e:
            raise ModelError(f"Invalid type for column '{name}': {e}", path, item.line) from None
    return columns


def _column_descriptions(value: Value, path: str) -> dict[str, str]:
    """`column_descriptions (col = 'comment', ...)` → {column: comment}."""
    if value.kind != "group":
        raise ModelError("column_descriptions is written `(column = 'description', ...)`", path, value.line)
    out: dict[str, str] = {}
    for item in value.items:
        if not item.key or item.value is None or item.value.kind != "string":
            raise ModelError(f"Column descriptions are written `column = 'description'`, got '{item.raw}'",
                             path, item.line)
        out[item.key.strip("`\"").lower()] = item.value.text
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
                if arg.key.lower() == "blocking":
                    blocking = _bool(arg.value, path)
                else:
                    args[arg.key.lower()] = arg.value.text if arg.value.kind != "string" else f"'{arg.value.text}'"
            refs.append(AuditRef(name=v.head.lower(), args=args, blocking=blocking))
        else:
            refs.append(AuditRef(name=v.text.strip().lower()))
    return refs


def _name(text: str) -> str:
    return ".".join(p.strip("`\"") for p in text.strip().split(".")).lower()


def _split_statements(statements: list[Statement], path: str) -> tuple[list[str], list[str], Statement | None, list[str], list[Audit]]:
    """Macro definitions, pre-statements, the main query, post-statements and inline audits."""
    macro_defs: list[str] = []
    body: list[Statement] = []
    audits: list[Audit] = []
    i = 0
    while i < len(statements):
        st = statements[i]
        word = st.first_word
        if word == "AUDIT" and len(st.tokens) > 1 and st.tokens[1].text == "(":
            file = read_blocks(st.text + ";" + (statements[i + 1].text if i + 1 < len(statements) else ""), path)
            (block, _), = file
            query = statements[i + 1] if i + 1 < len(statements) else None
            audits.append(_audit(block, query, path, st.line))
            i += 2
            continue
        if word == "@" and len(st.tokens) > 1 and st.tokens[1].text.upper() == "DEF":
            macro_defs.append(st.text)
        else:
            body.append(st)
        i += 1
    query_index = max((j for j, st in enumerate(body) if st.first_word in QUERY_STARTS), default=None)
    if query_index is None:
        return macro_defs, [s.text for s in body], None, [], audits
    return (macro_defs, [s.text for s in body[:query_index]], body[query_index],
            [s.text for s in body[query_index + 1:]], audits)


def _audit(block: DefinitionFile, query: Statement | None, path: str, line: int) -> Audit:
    props: dict[str, Any] = {"path": path, "line": line}
    for entry in block.properties:
        key = (entry.key or "").lower()
        if key not in AUDIT_PROPERTIES:
            raise ModelError(f"Unknown audit property '{entry.key}'", path, entry.line)
        v = entry.value
        if key == "name":
            props["name"] = v.text.lower()
        elif key == "dialect":
            props["dialect"] = v.text.lower()
        elif key in ("blocking", "skip"):
            props[key] = _bool(v, path)
        elif key == "defaults":
            props["defaults"] = {i.key.lower(): i.value.text if i.value.kind != "string" else f"'{i.value.text}'"
                                 for i in v.items if i.key}
    if "name" not in props:
        raise ModelError("An AUDIT block needs a name", path, line)
    if query is None or query.first_word not in QUERY_STARTS:
        raise ModelError(f"Audit '{props['name']}' has no query after its AUDIT block", path, line)
    return Audit(query=query.text, **props)


def read_model_file(text: str, path: str, file_path: Path, defaults: ModelDefaults) -> Model:
    """Parse one `models/*.sql` file into a Model (not yet checked against other models)."""
    definition = read_definition(text, path)
    if definition.block_kind != "MODEL":
        raise ModelError("A model file must start with a MODEL (...) block", path, 1)
    props: dict[str, Any] = {"path": path, "line": definition.block_line, "dialect": defaults.dialect,
                             "cron": defaults.cron, "start": defaults.start, "owner": defaults.owner,
                             "storage_format": defaults.storage_format}
    seen: set[str] = set()
    kind_entry = None
    for entry in definition.properties:
        key = (entry.key or "").lower()
        v = entry.value
        assert v is not None
        if key in seen:
            raise ModelError(f"Property '{entry.key}' is set twice", path, entry.line)
        seen.add(key)
        if key in UNSUPPORTED_PROPERTIES:
            raise ModelError(f"Property '{entry.key}' is not supported by mesh_dagster yet", path, entry.line)
        if key not in SUPPORTED_PROPERTIES:
            raise ModelError(f"Unknown model property '{entry.key}'", path, entry.line)
        handler = _PROPERTY_HANDLERS.get(key)
        if key == "kind":
            kind_entry = entry
        elif handler:
            props[_PROPERTY_FIELDS.get(key, key)] = handler(v, path)
    if "name" not in props:
        raise ModelError("The MODEL block needs a name, e.g. `name my_schema.my_model`", path, definition.block_line)
    kind = _kind(kind_entry, path) if kind_entry else ModelKind(name=KindName.VIEW)
    props["kind"] = kind
    macro_defs, pre, query, post, audits = _split_statements(definition.statements, path)
    if kind.name == KindName.SEED:
        if query is not None or pre or post:
            raise ModelError("SEED models have no query: only the MODEL block", path, query.line if query else definition.block_line)
        props["kind"] = kind.model_copy(update={"path": str((file_path.parent / kind.path).resolve())})
        props["query"] = None
    else:
        if query is None:
            raise ModelError(f"Model {props['name']} has no query after its MODEL block", path, definition.block_line)
        props.update(query=query.text, query_line=query.line)
    props.update(macro_definitions=macro_defs, pre_statements=pre, post_statements=post, inline_audits=audits)
    return Model(**props)


def _string(v: Value, path: str) -> str:
    return v.text


def _list(v: Value, path: str) -> list[str]:
    return [x.strip("`\"").lower() if v.kind != "string" else x for x in v.as_list()]


def _cron(v: Value, path: str) -> str:
    try:
        return validate_cron(v.text)
    except ValueError as e:
        raise ModelError(str(e), path, v.line) from None


_PROPERTY_HANDLERS: dict[str, Callable[[Value, str], Any]] = {
    "name": lambda v, p: _name(v.text),
    "dialect": lambda v, p: v.text.lower(),
    "cron": _cron,
    "start": lambda v, p: _date_text(v, p, "start"),
    "end": lambda v, p: _date_text(v, p, "end"),
    "grain": _list,
    "grains": _list,
    "columns": _columns,
    "audits": _audit_refs,
    "tags": _list,
    "owner": _string,
    "description": _string,
    "partitioned_by": _list,
    "storage_format": lambda v, p: v.text.lower(),
    "depends_on": lambda v, p: [_name(x) for x in v.as_list()],
    "enabled": _bool,
    "stamp": _string,
    "column_descriptions": _column_descriptions,
}
_PROPERTY_FIELDS = {"grains": "grain"}


def read_audit_file(text: str, path: str) -> list[Audit]:
    return [_audit(block, query, path, block.block_line) for block, query in read_blocks(text, path)]


def seed_header(model: Model) -> list[str]:
    """Column names of a seed CSV, checked against the declared `columns`."""
    csv_path = Path(model.kind.path or "")
    if not csv_path.is_file():
        raise ModelError(f"Seed file not found: {csv_path}", model.path, model.line)
    delimiter = str(model.kind.csv_settings.get("delimiter", ","))
    with csv_path.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader(f, delimiter=delimiter), None)
    if not header:
        raise ModelError("Seed CSV is empty: it needs a header row", str(csv_path), 1)
    header = [h.strip().lower() for h in header]
    if model.columns is not None and set(header) != set(model.columns):
        missing = [c for c in model.columns if c not in header]
        extra = [c for c in header if c not in model.columns]
        detail = "; ".join(filter(None, [missing and f"missing in CSV: {', '.join(missing)}",
                                         extra and f"not declared in columns: {', '.join(extra)}"]))
        raise ModelError(f"Seed CSV header does not match the columns of {model.name} ({model.path}:{model.line}): {detail}",
                         str(csv_path), 1)
    return header
