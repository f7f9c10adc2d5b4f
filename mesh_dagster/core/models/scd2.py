"""SCD type 2 history: the query computing a table's next history from its current one and a new
snapshot of its source.

Plain Parquet has no MERGE, so an SCD type 2 write is a rewrite of the whole table: the versions
already closed, the current versions (closed where the source changed or lost them), and the new
versions, as one query over the table itself. The engine lands that query in a staging table
before overwriting the table (Spark cannot overwrite what it reads).

The semantics are SQLMesh's:
- `valid_to` NULL marks the current version of a key;
- a first load (an empty table) opens every row from 1970-01-01 00:00:00 (or from its `updated_at`
  / the execution time, as the kind says);
- a changed row (a newer `updated_at`, or a different value in one of the checked `columns`)
  closes its current version and opens a new one, both at the change's stamp (the row's
  `updated_at`, or the execution time);
- a key the source no longer holds is closed at the execution time with `invalidate_hard_deletes`,
  else stays current; a key coming back after being closed opens again from its stamp, never
  before its last version ended.

The query is a fixed point: run again with the same source and execution time it returns the
table as it is, so a repeated run changes nothing. A source holding a key twice fails the query
(which version would be current is undecidable), naming the model.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlglot import exp

from mesh_dagster.core.config.names import COLUMN
from mesh_dagster.core.models.kinds_scd_type_2 import ScdType2Kind

EPOCH = "1970-01-01 00:00:00"

# Our helper columns, next to the model's own in the same relations: a prefix no model column has
# in practice.
_PRESENT = "`__mesh_present`"
_LAST_TO = "`__mesh_last_to`"
_FIRST_LOAD = "`__mesh_first_load`"
_ROWS = "`__mesh_rows`"


def _q(name: str) -> str:
    if not COLUMN.fullmatch(name):
        raise ValueError(f"Invalid column name {name!r}")
    return f"`{name}`"


def _table(name: str) -> str:
    return ".".join(_q(part) for part in name.split("."))


def _string(text: str) -> str:
    return exp.Literal.string(text).sql(dialect="spark")


def with_validity_columns(query_sql: str, kind: ScdType2Kind) -> str:
    """The query with the kind's `valid_from`/`valid_to` columns after its own (NULL): what the
    table is created from, its types taken from the query's analysis."""
    added = ", ".join(f"CAST(NULL AS {kind_type}) AS {_q(name)}" for name, kind_type in kind.added_columns().items())
    return f"SELECT _q.*, {added} FROM (\n{_strip(query_sql)}\n) AS _q"


def history_query(kind: ScdType2Kind, table: str, query_sql: str, columns: list[str], execution_time: datetime,
                  model: str) -> str:
    """The table's next content: every column of `columns` (the query's, in table order), then
    `valid_from` and `valid_to`. `table` is read, never written; `model` names the model (and its
    file) in the error a duplicate key raises."""
    time_type = kind.time_data_type
    valid_from, valid_to = _q(kind.valid_from_name), _q(kind.valid_to_name)
    keys = [_q(k) for k in kind.unique_key]
    cols = [_q(c) for c in columns]

    def on(left: str, right: str) -> str:
        return " AND ".join(f"{left}.{k} <=> {right}.{k}" for k in keys)

    def cast(value: str) -> str:
        return f"CAST({value} AS {time_type})"

    now = cast(_string(f"{execution_time:%Y-%m-%d %H:%M:%S.%f}"))
    stamp = cast(f"s.{_q(kind.stamp_column)}") if kind.stamp_column else now
    first = {"epoch": cast(_string(EPOCH)), "updated_at": stamp, "execution_time": now}[kind.first_valid_from]
    changed = _changed(kind, columns, cast)
    deleted_to = now if kind.invalidate_hard_deletes else cast("NULL")
    duplicate = _duplicate_key_error(kind, model)
    listed = ", ".join(cols)
    return f"""WITH mesh_source AS (
  SELECT {listed}, TRUE AS {_PRESENT} FROM (
    SELECT _q.*, COUNT(*) OVER (PARTITION BY {', '.join(f'_q.{k}' for k in keys)}) AS {_ROWS}
    FROM (
{_strip(query_sql)}
    ) AS _q
  ) AS _counted
  WHERE CASE WHEN {_ROWS} > 1 THEN raise_error({duplicate}) ELSE TRUE END
),
mesh_history AS (SELECT {listed}, {valid_from}, {valid_to} FROM {_table(table)}),
mesh_current AS (SELECT *, TRUE AS {_PRESENT} FROM mesh_history WHERE {valid_to} IS NULL),
mesh_closed AS (
  SELECT {', '.join(keys)}, MAX({valid_to}) AS {_LAST_TO} FROM mesh_history WHERE {valid_to} IS NOT NULL
  GROUP BY {', '.join(keys)}
),
mesh_state AS (SELECT COUNT(*) = 0 AS {_FIRST_LOAD} FROM mesh_history)
SELECT {listed}, {valid_from}, {valid_to} FROM mesh_history WHERE {valid_to} IS NOT NULL
UNION ALL
SELECT {', '.join(f'c.{c}' for c in cols)}, c.{valid_from},
  CASE WHEN s.{_PRESENT} IS NULL THEN {deleted_to} WHEN {changed} THEN {stamp} END AS {valid_to}
FROM mesh_current AS c LEFT JOIN mesh_source AS s ON {on('c', 's')}
UNION ALL
SELECT {', '.join(f's.{c}' for c in cols)},
  CASE WHEN c.{_PRESENT} IS NOT NULL THEN {stamp}
       WHEN st.{_FIRST_LOAD} THEN {first}
       WHEN h.{_LAST_TO} IS NOT NULL THEN GREATEST({stamp}, h.{_LAST_TO})
       ELSE {stamp} END AS {valid_from},
  {cast('NULL')} AS {valid_to}
FROM mesh_source AS s
LEFT JOIN mesh_current AS c ON {on('c', 's')}
LEFT JOIN mesh_closed AS h ON {on('h', 's')}
CROSS JOIN mesh_state AS st
WHERE c.{_PRESENT} IS NULL OR {changed}"""


def _changed(kind: ScdType2Kind, columns: list[str], cast: Callable[[str], str]) -> str:
    """The condition, over the current version `c` and the source row `s` of a key, under which
    the row changed: a newer stamp, or a difference in one of the kind's change columns."""
    change_columns = kind.change_columns(list(columns))
    if change_columns is None:
        assert kind.stamp_column is not None  # a kind not comparing columns compares its stamps
        updated = _q(kind.stamp_column)
        return f"COALESCE({cast(f's.{updated}')} > {cast(f'c.{updated}')}, FALSE)"
    if change_columns:
        return "NOT (" + " AND ".join(f"c.{_q(c)} <=> s.{_q(c)}" for c in change_columns) + ")"
    return "FALSE"


def _duplicate_key_error(kind: ScdType2Kind, model: str) -> str:
    """The message (a Spark SQL string) the query raises when the source holds a key twice."""
    return _string(
        f"{model}: the query returned more than one row for one unique_key ({', '.join(kind.unique_key)}); an "
        f"{kind.name.value} model needs one row per key in each batch (a source holding several snapshots of "
        "each key is replayed with batch_size 1)")


def _strip(sql: str) -> str:
    return sql.strip().rstrip(";").strip()
