"""Turns a parsed definition file into a `Model` (and its inline audits).

Every property is checked here, once, with the file and line it came from, so nothing later has
to wonder whether a model is well-formed. A property is either honoured somewhere or refused here
("accepted means honoured"): tests/unit/test_accepted_keys.py walks the tables below.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from mesh_dagster.core.config import ModelDefaults
from mesh_dagster.core.cron import IntervalUnit, interval_unit, validate_cron
from mesh_dagster.core.dates import to_datetime
from mesh_dagster.core.definition import DefinitionFile, Entry, Statement, Value, read_blocks, read_definition, read_value
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.model import Audit, AuditRef, KindName, Model, ModelKind, check_storage_format
from mesh_dagster.core.names import IDENTIFIER, check_identifier, check_model_name
from mesh_dagster.core.types import check_dialect, to_spark_type

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
# Kind properties SQLMesh has and we parse, but do not implement yet (issue 10: forward-only
# models and schema-change policies). `partition_by_time_column true` is what we always do.
UNSUPPORTED_KIND_PROPERTIES = {
    "forward_only": "forward-only models are",
    "on_destructive_change": "schema change policies are",
    "on_additive_change": "schema change policies are",
}
# The CSV settings the seed reader honours (pandas.read_csv arguments of the same name).
CSV_SETTINGS = {"delimiter": "char", "quotechar": "char", "escapechar": "char", "encoding": "string",
                "na_values": "strings", "keep_default_na": "bool"}
QUERY_STARTS = {"SELECT", "WITH", "(", "FROM", "VALUES", "TABLE"}
AUDIT_PROPERTIES = {"name", "dialect", "blocking", "defaults", "skip", "standalone", "description"}
# Kinds without data of their own: model_defaults.audits are not attached to them.
KINDS_WITHOUT_DATA = {KindName.EMBEDDED, KindName.EXTERNAL}


def _bool(value: Value, path: str) -> bool:
    text = value.text.strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ModelError(f"Expected true or false, got '{value.text}'", path, value.line)


def _int(value: Value, path: str, what: str, minimum: int | None = None) -> int:
    try:
        number = int(value.text)
    except ValueError:
        raise ModelError(f"{what} must be an integer, got '{value.text}'", path, value.line) from None
    if minimum is not None and number < minimum:
        raise ModelError(f"{what} must be at least {minimum}, got {number}", path, value.line)
    return number


def _date_text(value: Value, path: str, what: str) -> str:
    try:
        to_datetime(value.text)
    except ValueError as e:
        raise ModelError(f"Invalid {what} '{value.text}': {e}", path, value.line) from None
    return value.text


def _checked(check: Callable[[str], str], text: str, path: str, line: int) -> str:
    """Run a name/value check that raises ValueError, as a ModelError at `path:line`."""
    try:
        return check(text)
    except ValueError as e:
        raise ModelError(str(e), path, line) from None


def _column(text: str, path: str, line: int, what: str = "Column name") -> str:
    return _checked(lambda t: check_identifier(t, what), text, path, line)


# ---------------------------------------------------------------------------------------------
# kind (...)


def _kind(entry: Entry, path: str) -> ModelKind:
    value = entry.value
    assert value is not None
    name = (value.head if value.kind == "call" else value.text).strip().upper()
    if name in UNSUPPORTED_KINDS:
        raise ModelError(f"Model kind {name} is not supported by mesh_dagster yet", path, value.line)
    try:
        kind_name = KindName(name)
    except ValueError:
        known = ", ".join(k.value for k in KindName if k != KindName.EXTERNAL)
        raise ModelError(f"Unknown model kind '{name}'. Known kinds: {known}", path, value.line) from None
    if kind_name == KindName.EXTERNAL:
        raise ModelError("EXTERNAL models are declared in external_models.yaml (`- name: schema.table`), not in "
                         "models/", path, value.line)
    props: dict[str, Any] = {"name": kind_name}
    allowed = KIND_PROPERTIES.get(kind_name, set())
    for item in (value.items if value.kind == "call" else []):
        prop = item.as_property()
        key = (prop.key or "").lower()
        if key not in allowed:
            raise ModelError(f"Unknown property '{prop.key}' for kind {name}", path, prop.line)
        pv = prop.value
        assert pv is not None
        _KIND_HANDLERS[key](props, kind_name, pv, path)
    if kind_name == KindName.INCREMENTAL_BY_TIME_RANGE and not props.get("time_column"):
        raise ModelError("INCREMENTAL_BY_TIME_RANGE models need a time_column, e.g. "
                         "`kind INCREMENTAL_BY_TIME_RANGE (time_column event_date)`", path, value.line)
    if kind_name == KindName.SEED and not props.get("path"):
        raise ModelError("SEED models need a path, e.g. `kind SEED (path '../seeds/data.csv')`", path, value.line)
    return ModelKind(**props)


def _time_column(props: dict, kind: KindName, v: Value, path: str) -> None:
    parts = v.as_list()
    if not 1 <= len(parts) <= 2:
        raise ModelError("time_column is written `time_column col` or `time_column (col, '%Y-%m-%d')`", path, v.line)
    props["time_column"] = _column(parts[0], path, v.line, "time_column")
    if len(parts) > 1:
        props["time_column_format"] = parts[1]


def _batch_size(props: dict, kind: KindName, v: Value, path: str) -> None:
    if kind == KindName.SEED:
        raise ModelError("batch_size for SEED models is not supported by mesh_dagster yet (a seed is loaded "
                         "in one write)", path, v.line)
    props["batch_size"] = _int(v, path, "batch_size", minimum=1)


def _unsupported_kind_property(key: str) -> Callable[[dict, KindName, Value, str], None]:
    def refuse(props: dict, kind: KindName, v: Value, path: str) -> None:
        raise ModelError(f"{key} is not supported by mesh_dagster yet ({UNSUPPORTED_KIND_PROPERTIES[key]} "
                         "planned)", path, v.line)

    return refuse


def _partition_by_time_column(props: dict, kind: KindName, v: Value, path: str) -> None:
    if not _bool(v, path):
        raise ModelError("partition_by_time_column false is not supported by mesh_dagster yet: incremental "
                         "tables are always partitioned by their time column", path, v.line)


def _csv_settings(props: dict, kind: KindName, v: Value, path: str) -> None:
    if v.kind != "group":
        raise ModelError("csv_settings is written `csv_settings (delimiter = ';', ...)`", path, v.line)
    settings: dict[str, Any] = {}
    for item in v.items:
        key = (item.key or "").lower()
        if key not in CSV_SETTINGS or item.value is None:
            raise ModelError(f"Unsupported csv_settings entry '{item.raw}'. Supported: "
                             f"{', '.join(f'{k} = ...' for k in CSV_SETTINGS)}", path, item.line)
        settings[key] = _csv_value(key, item.value, path)
    props["csv_settings"] = settings


def _csv_value(key: str, v: Value, path: str) -> Any:
    """A CSV setting as the Python value pandas expects (`keep_default_na = false` is False, not
    the truthy string 'false')."""
    shape = CSV_SETTINGS[key]
    if shape == "bool":
        return _bool(v, path)
    if shape == "strings":
        return v.as_list()
    if v.kind not in ("string", "scalar", "number"):
        raise ModelError(f"csv_settings {key} must be a string", path, v.line)
    if shape == "char" and len(v.text) != 1:
        raise ModelError(f"csv_settings {key} must be one character, got '{v.text}'", path, v.line)
    if key == "encoding":
        import codecs

        try:
            codecs.lookup(v.text)
        except LookupError:
            raise ModelError(f"Unknown csv_settings encoding '{v.text}'", path, v.line) from None
    return v.text


_KIND_HANDLERS: dict[str, Callable[[dict, KindName, Value, str], None]] = {
    "time_column": _time_column,
    "batch_size": _batch_size,
    "lookback": lambda props, kind, v, path: props.update(lookback=_int(v, path, "lookback", minimum=0)),
    "batch_concurrency": lambda props, kind, v, path: props.update(
        batch_concurrency=_int(v, path, "batch_concurrency", minimum=1)),
    "materialized": lambda props, kind, v, path: props.update(materialized=_bool(v, path)),
    "path": lambda props, kind, v, path: props.update(path=v.text),
    "csv_settings": _csv_settings,
    "partition_by_time_column": _partition_by_time_column,
    **{key: _unsupported_kind_property(key) for key in UNSUPPORTED_KIND_PROPERTIES},
}


def _check_time_format(kind: ModelKind, cron: str, path: str, line: int) -> None:
    """A custom time_column format must tell the model's intervals apart: with `'%Y-%m'` on a
    daily model every day of a month would bound the same rows."""
    unit = interval_unit(cron)
    sample = {IntervalUnit.YEAR: datetime(2021, 1, 1), IntervalUnit.MONTH: datetime(2021, 3, 1),
              IntervalUnit.DAY: datetime(2021, 3, 4), IntervalUnit.HOUR: datetime(2021, 3, 4, 5)}.get(
        unit, datetime(2021, 3, 4, 5, 30))
    fmt = kind.time_column_format
    try:
        same = datetime.strptime(sample.strftime(fmt), fmt) == sample
    except ValueError:
        same = False
    if not same:
        raise ModelError(f"time_column format '{fmt}' cannot tell the {unit.value} intervals of this model apart "
                         "(it must hold every part down to the interval, e.g. '%Y-%m-%d' or '%Y%m%d')", path, line)


# ---------------------------------------------------------------------------------------------
# MODEL properties


def _columns(value: Value, path: str, dialect: str = "spark") -> dict[str, str]:
    """`columns (name TYPE, ...)`, types written in the model's dialect, kept in Spark's spelling."""
    if value.kind != "group":
        raise ModelError("columns is written `columns (name TYPE, ...)`", path, value.line)
    columns: dict[str, str] = {}
    for item in value.items:
        name_token, type_text = _column_and_type(item)
        name = _column(name_token, path, item.line)
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
        out[_column(item.key, path, item.line)] = item.value.text
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
        elif v.kind in ("scalar", "string") and IDENTIFIER.fullmatch(v.text.strip()):
            refs.append(AuditRef(name=v.text.strip().lower()))
        else:
            raise ModelError(f"Audits are written `name` or `name(arg := value, ...)`, got '{item.raw}'", path, item.line)
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


def _attach_default_audits(own: list[AuditRef], defaults: ModelDefaults, kind: ModelKind) -> list[AuditRef]:
    """The model's audits, then the defaults it does not attach itself (its own attachment of an
    audit wins, with its own arguments). Kinds without data of their own get none."""
    if not defaults.audits or kind.name in KINDS_WITHOUT_DATA:
        return own
    names = {ref.name for ref in own}
    return own + [ref for ref in default_audit_refs(tuple(defaults.audits)) if ref.name not in names]


def _names(v: Value, path: str) -> list[str]:
    """Column names (`grain`, `partitioned_by`): plain identifiers, not expressions."""
    if v.kind == "call":
        raise ModelError(f"Expected column names, got the expression '{v.text}'", path, v.line)
    return [_column(x, path, v.line) for x in v.as_list()]


def _list(v: Value, path: str) -> list[str]:
    return [x.strip("`\"").lower() if v.kind != "string" else x for x in v.as_list()]


def _cron(v: Value, path: str) -> str:
    return _checked(validate_cron, v.text, path, v.line)


def _model_name(v: Value, path: str) -> str:
    return _checked(check_model_name, v.text, path, v.line)


_PROPERTY_HANDLERS: dict[str, Callable[[Value, str], Any]] = {
    "name": _model_name,
    "dialect": lambda v, p: _checked(check_dialect, v.text, p, v.line),
    "cron": _cron,
    "start": lambda v, p: _date_text(v, p, "start"),
    "end": lambda v, p: _date_text(v, p, "end"),
    "grain": _names,
    "grains": _names,
    "audits": _audit_refs,
    "tags": _list,
    "owner": lambda v, p: v.text,
    "description": lambda v, p: v.text,
    "partitioned_by": _names,
    "storage_format": lambda v, p: _checked(check_storage_format, v.text, p, v.line),
    "depends_on": lambda v, p: [_model_name(Value(x, v.line, "scalar"), p) for x in v.as_list()],
    "enabled": _bool,
    "stamp": lambda v, p: v.text,
    "column_descriptions": _column_descriptions,
}
_PROPERTY_FIELDS = {"grains": "grain"}


# ---------------------------------------------------------------------------------------------
# Statements and audits


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
            props["name"] = _column(v.text, path, v.line, "Audit name")
        elif key == "dialect":
            props["dialect"] = _checked(check_dialect, v.text, path, v.line)
        elif key == "blocking":
            props["blocking"] = _bool(v, path)
        elif key == "description":
            props["description"] = v.text
        elif key == "skip" and _bool(v, path):
            raise ModelError("skip true is not supported by mesh_dagster yet (remove the audit from the models' "
                             "audits instead)", path, v.line)
        elif key == "standalone" and _bool(v, path):
            raise ModelError("Standalone audits are not supported by mesh_dagster yet", path, v.line)
        elif key == "defaults":
            props["defaults"] = {i.key.lower(): i.value.text if i.value.kind != "string" else f"'{i.value.text}'"
                                 for i in v.items if i.key}
    if "name" not in props:
        raise ModelError("An AUDIT block needs a name", path, line)
    if query is None or query.first_word not in QUERY_STARTS:
        raise ModelError(f"Audit '{props['name']}' has no query after its AUDIT block", path, line)
    return Audit(query=query.text, **props)


def read_audit_file(text: str, path: str) -> list[Audit]:
    return [_audit(block, query, path, block.block_line) for block, query in read_blocks(text, path)]


# ---------------------------------------------------------------------------------------------
# A model file


def read_model_file(text: str, path: str, file_path: Path, defaults: ModelDefaults) -> Model:
    """Parse one `models/*.sql` file into a Model (not yet checked against other models)."""
    definition = read_definition(text, path)
    if definition.block_kind != "MODEL":
        raise ModelError("A model file must start with a MODEL (...) block", path, 1)
    props: dict[str, Any] = {"path": path, "line": definition.block_line, "dialect": defaults.dialect,
                             "cron": defaults.cron, "start": defaults.start, "owner": defaults.owner,
                             "storage_format": defaults.storage_format}
    lines: dict[str, int] = {}
    kind_entry = columns_entry = None
    for entry in definition.properties:
        key = (entry.key or "").lower()
        v = entry.value
        assert v is not None
        if key in lines:
            raise ModelError(f"Property '{entry.key}' is set twice", path, entry.line)
        lines[key] = entry.line
        if key in UNSUPPORTED_PROPERTIES:
            raise ModelError(f"Property '{entry.key}' is not supported by mesh_dagster yet", path, entry.line)
        if key not in SUPPORTED_PROPERTIES:
            raise ModelError(f"Unknown model property '{entry.key}'", path, entry.line)
        if key == "kind":
            kind_entry = entry
        elif key == "columns":
            columns_entry = entry  # read once the dialect is known (it may come later)
        else:
            props[_PROPERTY_FIELDS.get(key, key)] = _PROPERTY_HANDLERS[key](v, path)
    if "name" not in props:
        raise ModelError("The MODEL block needs a name, e.g. `name my_schema.my_model`", path, definition.block_line)
    if columns_entry is not None:
        props["columns"] = _columns(columns_entry.value, path, props["dialect"])
    kind = _kind(kind_entry, path) if kind_entry else ModelKind(name=KindName.VIEW)
    if "time_column_format" in kind.model_fields_set:
        _check_time_format(kind, props["cron"], path, kind_entry.line if kind_entry else definition.block_line)
    _check_start_before_end(props, lines, path)
    props["kind"] = kind
    props["audits"] = _attach_default_audits(props.get("audits", []), defaults, kind)
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
    props.update(macro_definitions=macro_defs, pre_statements=pre, post_statements=post, inline_audits=audits,
                 property_lines=lines)
    return Model(**props)


def _check_start_before_end(props: dict[str, Any], lines: dict[str, int], path: str) -> None:
    start, end = props.get("start"), props.get("end")
    if start and end and to_datetime(end) < to_datetime(start):
        raise ModelError(f"end '{end}' is before start '{start}'", path, lines.get("end"))
