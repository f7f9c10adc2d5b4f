"""The state tables.

Payloads are JSON text of the pydantic domain objects, so adding a field to `Snapshot` or
`Environment` needs no migration; only the columns we filter, join or lock on are real columns.
Timestamps are epoch milliseconds (UTC); intervals are half-open `[start_ts, end_ts)`.

Bump `SCHEMA_VERSION` (and add a step to `migrations.py`) whenever a table here changes.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

SCHEMA_VERSION = 8

# SQLite only auto-increments an `INTEGER PRIMARY KEY`; elsewhere the id is a BIGINT identity.
_AutoId = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

snapshots = Table(
    "mesh_snapshots",
    metadata,
    Column("name", String(512), nullable=False),
    Column("identifier", String(64), nullable=False),
    Column("version", String(64)),
    Column("payload", Text, nullable=False),
    Column("created_ts", BigInteger, nullable=False),
    Column("updated_ts", BigInteger, nullable=False),
    PrimaryKeyConstraint("name", "identifier", name="pk_mesh_snapshots"),
    Index("ix_mesh_snapshots_name_version", "name", "version"),
)

environments = Table(
    "mesh_environments",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("payload", Text, nullable=False),
    Column("plan_id", String(64), nullable=False),
    Column("previous_plan_id", String(64)),
    Column("expiration_ts", BigInteger),
    Column("finalized_ts", BigInteger),
    # v2. While unfinalized: the records replaced since the last finalized one (JSON of an
    # `Environment`), whose views may still be live — repaired by the next apply, kept by the janitor.
    Column("replaced_payload", Text),
)

intervals = Table(
    "mesh_intervals",
    metadata,
    Column("id", _AutoId, primary_key=True, autoincrement=True),
    Column("name", String(512), nullable=False),
    Column("version", String(64), nullable=False),
    Column("start_ts", BigInteger, nullable=False),
    Column("end_ts", BigInteger, nullable=False),
    Column("is_removed", Boolean, nullable=False, default=False),
    Column("created_ts", BigInteger, nullable=False),
    Index("ix_mesh_intervals_name_version", "name", "version"),
)

plans = Table(
    "mesh_plans",
    metadata,
    Column("plan_id", String(64), primary_key=True),
    Column("environment", String(255), nullable=False),
    Column("payload", Text, nullable=False),
    Column("status", String(32), nullable=False),
    Column("created_ts", BigInteger, nullable=False),
    Column("updated_ts", BigInteger, nullable=False),
    Column("author", String(255)),
    Column("git_commit", String(64)),
    Column("git_branch", String(255)),
    Index("ix_mesh_plans_environment", "environment"),
)

# Every decision on a plan (approve, reject, cancel) and every step of its apply, with who took it.
plan_events = Table(
    "mesh_plan_events",
    metadata,
    Column("id", _AutoId, primary_key=True, autoincrement=True),
    Column("plan_id", String(64), nullable=False),
    Column("action", String(32), nullable=False),
    Column("actor", String(255), nullable=False),
    Column("status", String(32), nullable=False),
    Column("note", Text),
    Column("ts", BigInteger, nullable=False),
    Index("ix_mesh_plan_events_plan", "plan_id"),
)

versions = Table(
    "mesh_versions",
    metadata,
    Column("schema_version", Integer, nullable=False),
    Column("mesh_version", String(64), nullable=False),
)

locks = Table(
    "mesh_locks",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("owner", String(255), nullable=False),
    # Random per acquisition: releasing or renewing only touches the lock we actually hold,
    # even when two processes run as the same owner.
    Column("token", String(64), nullable=False),
    Column("acquired_ts", BigInteger, nullable=False),
    Column("expires_ts", BigInteger, nullable=False),
)

# v4. Content a snapshot captured that is too large for its JSON payload (a seed's CSV), by the
# SHA-256 of the content: written once, shared by every snapshot of that content, never changed.
blobs = Table(
    "mesh_blobs",
    metadata,
    Column("digest", String(64), primary_key=True),
    Column("content", LargeBinary, nullable=False),  # zlib-compressed
    Column("size", BigInteger, nullable=False),  # uncompressed bytes
    Column("created_ts", BigInteger, nullable=False),
)

# v4. The journal of writes (state/journal.py, execution/intervals/scheduler.py). A *pending* row: a write whose
# destructive step may be under way, with what finishing or undoing it exactly needs (its staged
# content, the generation it switches to, the row count before an append): written before that step,
# deleted in the transaction that records the write's interval. At most one per physical table
# (its writers hold the table's lock). A *retired* row: a former location (generation) of a table's
# files, kept for readers still in flight and deleted later (by the next rewrite, or the janitor).
pending_writes = Table(
    "mesh_pending_writes",
    metadata,
    Column("id", _AutoId, primary_key=True, autoincrement=True),
    Column("table_name", String(512), nullable=False),
    Column("operation", String(32), nullable=False),  # switch | overwrite | append | retired
    Column("name", String(512)),  # the interval the write records (none for a retired location)
    Column("version", String(64)),
    Column("start_ts", BigInteger),
    Column("end_ts", BigInteger),
    Column("location", Text),  # the generation a switch writes; a retired one
    Column("payload", Text),  # JSON: what the engine needs to finish or undo the write
    Column("owner", String(255), nullable=False),
    Column("created_ts", BigInteger, nullable=False),
    Index("ix_mesh_pending_writes_table", "table_name"),
)

# v5. Every audit verdict, on the data it judged: a model's version (its physical table) over an
# interval, by one definition of the audit (`digest`: the audit's query, arguments and blocking
# flag). Written by whatever ran the audit (a plan apply, `mesh run`, a Dagster materialization);
# the latest row of a (name, version, digest, interval) is the verdict that holds. Promotion reads
# it (a failed blocking audit on what an environment would serve blocks it), and Dagster shows it
# as the audit's check result on each partition, whatever re-stamps the partition meanwhile.
audit_verdicts = Table(
    "mesh_audit_verdicts",
    metadata,
    Column("id", _AutoId, primary_key=True, autoincrement=True),
    Column("name", String(512), nullable=False),
    Column("version", String(64), nullable=False),
    Column("identifier", String(64), nullable=False),  # the snapshot that ran it
    Column("audit", String(512), nullable=False),  # the audit's name, as attached to the model
    Column("digest", String(64), nullable=False),
    Column("blocking", Boolean, nullable=False),
    Column("start_ts", BigInteger, nullable=False),
    Column("end_ts", BigInteger, nullable=False),
    Column("failing_rows", BigInteger, nullable=False),
    Column("sample", Text),  # some failing rows, as JSON (core/models/audit_sample.py; schema v8)
    Column("source", String(32), nullable=False),  # apply | run | materialize
    Column("created_ts", BigInteger, nullable=False),
    Index("ix_mesh_audit_verdicts_name_version", "name", "version"),
)

# v6. What each Dagster run (of one environment) did of the environment's `before_all` / `after_all`,
# which run once per run, whichever of its steps gets there first (execution/intervals/statement_runs.py): a
# row per stage run (`failed`: why it failed; NULL: it ran) and per model step that succeeded.
statement_runs = Table(
    "mesh_statement_runs",
    metadata,
    Column("run_key", String(512), nullable=False),  # the run and its environment
    Column("mark", String(512), nullable=False),  # before_all | after_all | step:<model>
    Column("failed", Text),
    Column("created_ts", BigInteger, nullable=False),
    PrimaryKeyConstraint("run_key", "mark", name="pk_mesh_statement_runs"),
    Index("ix_mesh_statement_runs_created", "created_ts"),
)

# v7. What mesh last knew of each physical table's columns (`columns`, JSON pairs in table order) and
# the last analysis of the query written into it: `inputs`, the digest of everything that analysis
# depended on (the SQL, the columns of every table it reads), and `output`, its answer
# (execution/evaluate/shapes.py). A later run whose inputs digest the same needs no analysis. A
# write that may change a table's columns deletes its row first, so a row never outlives the
# columns it names, whatever kills the write.
batch_timings = Table(
    "mesh_batch_timings",  # schema v8: how long each batch written took (core/plan/estimate.py)
    metadata,
    Column("id", _AutoId, primary_key=True, autoincrement=True),
    Column("name", String(512), nullable=False),
    Column("version", String(64), nullable=False),
    Column("units", Integer, nullable=False),  # the intervals it covered
    Column("seconds", Float, nullable=False),
    Column("full_refresh", Boolean, nullable=False),
    Column("created_ts", BigInteger, nullable=False),
    Index("ix_mesh_batch_timings_name", "name"),
)

table_shapes = Table(
    "mesh_table_shapes",
    metadata,
    Column("table_name", String(512), primary_key=True),
    Column("columns", Text),
    Column("inputs", String(64)),
    Column("output", Text),
    Column("updated_ts", BigInteger, nullable=False),
)
