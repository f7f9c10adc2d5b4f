from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from project_builder import write_project
from sqlalchemy import Engine, text

from mesh_dagster.context import Context
from mesh_dagster.core.errors import ConflictingPlanError, StateError
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import AuditRef, Model
from mesh_dagster.core.snapshots.environment import Environment, EnvironmentSnapshot
from mesh_dagster.core.snapshots.snapshot import ChangeCategory, Snapshot, SnapshotFingerprint, SnapshotId, hash_values
from mesh_dagster.state import SCHEMA_VERSION, LockLostError, StateStore
from mesh_dagster.state.migrations import MIGRATIONS, pending_migrations

DAY = 86_400_000


def make_snapshot(name: str = "sqlmesh_example.full_model", query: str = "SELECT 1 AS x", parents=()) -> Snapshot:
    model = Model(
        name=name,
        kind=ModelKind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds", batch_size=7),
        query=query,
        columns={"ds": "date", "x": "int"},
        audits=[AuditRef(name="not_null", args={"columns": "(x)"})],
        tags=["a"],
        path="models/full_model.sql",
    )
    fingerprint = SnapshotFingerprint(data_hash=hash_values([query]), metadata_hash=hash_values(["meta"]))
    snapshot = Snapshot(name=name, fingerprint=fingerprint, model=model, parents=list(parents), created_ts=42)
    snapshot.categorize(ChangeCategory.BREAKING, None)
    return snapshot


def make_env(name: str, plan_id: str, previous: str | None, snapshots: list[Snapshot] = ()) -> Environment:
    refs = [
        EnvironmentSnapshot(name=s.name, identifier=s.identifier, version=s.version, kind="FULL", table_name=s.table_name)
        for s in snapshots
    ]
    return Environment(name=name, plan_id=plan_id, previous_plan_id=previous, snapshots=refs, promoted=[s.name for s in snapshots])


# ---------------------------------------------------------------------- snapshots


def test_snapshot_round_trip(store: StateStore) -> None:
    parent = make_snapshot("raw.events", "SELECT 1 AS ds")
    child = make_snapshot(parents=[parent.snapshot_id])
    store.snapshots.push_snapshots([parent, child])

    loaded = store.snapshots.get_snapshots([child.snapshot_id, parent.snapshot_id, SnapshotId("nope", "1")])

    assert loaded == {child.snapshot_id: child, parent.snapshot_id: parent}
    assert loaded[child.snapshot_id].parents == [parent.snapshot_id]
    assert isinstance(loaded[child.snapshot_id].parents[0], SnapshotId)
    assert loaded[child.snapshot_id].change_category is ChangeCategory.BREAKING
    assert loaded[child.snapshot_id].model.kind.time_column == "ds"


def test_push_keeps_existing_and_update_rewrites(store: StateStore) -> None:
    original = make_snapshot()
    store.snapshots.push_snapshots([original])
    changed = original.model_copy(deep=True)
    changed.previous_versions = ["123"]

    store.snapshots.push_snapshots([changed])
    assert store.snapshots.get_snapshots([original.snapshot_id])[original.snapshot_id].previous_versions == []

    store.snapshots.update_snapshots([changed])
    assert store.snapshots.get_snapshots([original.snapshot_id])[original.snapshot_id].previous_versions == ["123"]


def test_update_of_unknown_snapshot_writes_nothing(store: StateStore) -> None:
    stored = make_snapshot()
    store.snapshots.push_snapshots([stored])
    changed = stored.model_copy(deep=True)
    changed.previous_versions = ["999"]
    unknown = make_snapshot("other.model")

    with pytest.raises(StateError) as error:
        store.snapshots.update_snapshots([changed, unknown])

    assert str(error.value) == (
        f"Cannot update snapshots that are not in the state store: other.model@{unknown.identifier}"
    )
    assert store.snapshots.get_snapshots([stored.snapshot_id])[stored.snapshot_id].previous_versions == []


def test_many_snapshots_in_batches(store: StateStore, state_url: str) -> None:
    snapshots = [make_snapshot(f"schema_{i % 7}.model_{i}", f"SELECT {i} AS x") for i in range(1200)]
    store.snapshots.push_snapshots(snapshots)
    ids = [s.snapshot_id for s in snapshots]

    started = time.perf_counter()
    loaded = store.snapshots.get_snapshots(ids[:1000])
    elapsed = time.perf_counter() - started
    print(f"\nget_snapshots(1000) on {state_url.split(':')[0]}: {elapsed * 1000:.0f} ms")

    assert len(loaded) == 1000
    assert loaded[ids[999]] == snapshots[999]
    assert store.snapshots.snapshots_exist(ids + [SnapshotId("x.y", "0")]) == set(ids)
    assert store.snapshots.all_snapshot_ids() == set(ids)


# ---------------------------------------------------------------------- environments


def test_promote_finalize_and_read_back(store: StateStore) -> None:
    snapshot = make_snapshot()
    env = make_env("prod", "p1", None, [snapshot])
    store.environments.promote_environment(env)
    assert store.environments.get_environment("prod") == env
    assert store.environments.get_environment("dev") is None

    store.environments.finalize_environment("prod", "p1", now_ms=1000)
    assert store.environments.get_environment("prod").finalized_ts == 1000

    store.environments.promote_environment(make_env("prod", "p2", "p1"))
    store.environments.promote_environment(make_env("dev", "d1", None))
    promoted = store.environments.get_environments()
    assert [(e.name, e.plan_id, e.previous_plan_id, e.finalized_ts) for e in promoted] == [
        ("dev", "d1", None, None),
        ("prod", "p2", "p1", None),
    ]


def test_promote_conflict_keeps_the_winner(store: StateStore) -> None:
    store.environments.promote_environment(make_env("prod", "p1", None))
    winner = make_env("prod", "plan_a", "p1", [make_snapshot("s.a")])
    loser = make_env("prod", "plan_b", "p1", [make_snapshot("s.b")])

    store.environments.promote_environment(winner)
    with pytest.raises(ConflictingPlanError) as error:
        store.environments.promote_environment(loser)

    assert str(error.value) == (
        "Another plan (plan_a) was applied to environment 'prod' while this plan (plan_b) was in "
        "progress. Re-run `mesh plan prod`."
    )
    assert store.environments.get_environment("prod") == winner


def test_promote_of_removed_environment_conflicts(store: StateStore) -> None:
    with pytest.raises(ConflictingPlanError) as error:
        store.environments.promote_environment(make_env("dev", "p2", "p1"))

    assert str(error.value) == (
        "Environment 'dev' was removed while this plan (p2) was in progress. Re-run `mesh plan dev`."
    )
    assert store.environments.get_environment("dev") is None


def test_repromoting_the_current_plan_is_allowed(store: StateStore) -> None:
    env = make_env("prod", "p2", "p1")
    store.environments.promote_environment(make_env("prod", "p1", None))
    store.environments.promote_environment(env)
    store.environments.promote_environment(env)  # a retried apply
    assert store.environments.get_environment("prod").plan_id == "p2"


@pytest.mark.parametrize("existing", [True, False], ids=["existing-env", "new-env"])
def test_concurrent_promotes_one_wins(open_store: Callable[..., StateStore], existing: bool) -> None:
    first, second = open_store(), open_store()
    base = "p0" if existing else None
    if existing:
        first.environments.promote_environment(make_env("dev", "p0", None))
    plans = {first: make_env("dev", "plan_a", base), second: make_env("dev", "plan_b", base)}
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def apply(store: StateStore) -> None:
        env = plans[store]
        barrier.wait()
        try:
            store.environments.promote_environment(env)
            outcomes[env.plan_id] = "won"
        except ConflictingPlanError as e:
            outcomes[env.plan_id] = str(e)

    threads = [threading.Thread(target=apply, args=(s,)) for s in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    winners = [plan for plan, outcome in outcomes.items() if outcome == "won"]
    assert len(winners) == 1
    loser = ({"plan_a", "plan_b"} - set(winners)).pop()
    assert outcomes[loser] == (
        f"Another plan ({winners[0]}) was applied to environment 'dev' while this plan ({loser}) "
        "was in progress. Re-run `mesh plan dev`."
    )
    assert first.environments.get_environment("dev").plan_id == winners[0]


def test_finalize_checks_the_plan(store: StateStore) -> None:
    store.environments.promote_environment(make_env("prod", "p2", None))

    with pytest.raises(ConflictingPlanError) as error:
        store.environments.finalize_environment("prod", "p1")
    assert str(error.value) == (
        "Another plan (p2) was applied to environment 'prod' while this plan (p1) was in progress. "
        "Re-run `mesh plan prod`."
    )
    assert store.environments.get_environment("prod").finalized_ts is None

    with pytest.raises(ConflictingPlanError, match="Environment 'dev' was removed while this plan"):
        store.environments.finalize_environment("dev", "p1")


def test_invalidate_expire_delete(store: StateStore) -> None:
    store.environments.promote_environment(make_env("dev", "d1", None))
    store.environments.promote_environment(make_env("prod", "p1", None))

    assert store.environments.expired_environments(now_ms=10 * DAY) == []
    store.environments.invalidate_environment("dev", now_ms=5 * DAY)
    assert store.environments.get_environment("dev").expiration_ts == 5 * DAY
    assert [e.name for e in store.environments.expired_environments(now_ms=10 * DAY)] == ["dev"]
    assert store.environments.expired_environments(now_ms=4 * DAY) == []

    with pytest.raises(StateError) as error:
        store.environments.invalidate_environment("nope", now_ms=1)
    assert str(error.value) == "Environment 'nope' does not exist."

    store.environments.delete_environment("dev")
    assert store.environments.get_environment("dev") is None
    assert [e.name for e in store.environments.get_environments()] == ["prod"]


# ---------------------------------------------------------------------- intervals


def test_intervals_merge_sorted_half_open(store: StateStore) -> None:
    store.intervals.add_interval("s.a", "v1", 30, 40)
    store.intervals.add_interval("s.a", "v1", 0, 10)
    store.intervals.add_interval("s.a", "v1", 10, 20)  # adjacent
    store.intervals.add_interval("s.a", "v1", 35, 50)  # overlapping
    store.intervals.add_interval("s.a", "v2", 100, 200)  # another version: another table

    assert store.intervals.get_intervals([("s.a", "v1"), ("s.a", "v2"), ("s.b", "v1")]) == {
        ("s.a", "v1"): [(0, 20), (30, 50)],
        ("s.a", "v2"): [(100, 200)],
        ("s.b", "v1"): [],
    }


def test_interval_removal_and_readd(store: StateStore) -> None:
    store.intervals.add_intervals([("s.a", "v1", 0, 10 * DAY), ("s.b", "v1", 0, DAY)])
    store.intervals.remove_intervals([("s.a", "v1", 2 * DAY, 4 * DAY)])
    assert store.intervals.get_intervals([("s.a", "v1")])[("s.a", "v1")] == [(0, 2 * DAY), (4 * DAY, 10 * DAY)]

    store.intervals.add_interval("s.a", "v1", 3 * DAY, 4 * DAY)  # a re-backfill after a restatement counts
    store.intervals.remove_intervals([("s.a", "v1", 9 * DAY, 20 * DAY), ("s.b", "v1", 0, DAY)])
    assert store.intervals.get_intervals([("s.a", "v1"), ("s.b", "v1")]) == {
        ("s.a", "v1"): [(0, 2 * DAY), (3 * DAY, 9 * DAY)],
        ("s.b", "v1"): [],
    }


def test_intervals_for_many_keys(store: StateStore) -> None:
    store.intervals.add_intervals([(f"s.m{i}", "v", i, i + 1) for i in range(1100)])
    result = store.intervals.get_intervals([(f"s.m{i}", "v") for i in range(1100)])
    assert len(result) == 1100
    assert result[("s.m1099", "v")] == [(1099, 1100)]


def test_invalid_interval_is_refused(store: StateStore) -> None:
    with pytest.raises(ValueError) as error:
        store.intervals.add_intervals([("s.a", "v1", 0, 10), ("s.a", "v1", 10, 10)])
    assert str(error.value) == "Invalid interval for s.a (version v1): start 10 is not before end 10"
    assert store.intervals.get_intervals([("s.a", "v1")]) == {("s.a", "v1"): []}


def test_failing_transaction_writes_nothing(store: StateStore) -> None:
    # The first 1,000 rows go in one statement; the database rejects the second (BIGINT overflow).
    items = [(f"s.m{i}", "v", 0, DAY) for i in range(1000)] + [("s.bad", "v", 0, 2**70)]
    with pytest.raises(Exception, match="too large|out of range"):
        store.intervals.add_intervals(items)
    assert store.intervals.get_intervals([("s.m0", "v"), ("s.m999", "v")]) == {("s.m0", "v"): [], ("s.m999", "v"): []}


def test_concurrent_writers(open_store: Callable[..., StateStore]) -> None:
    stores = [open_store(), open_store()]
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        store = stores[worker % 2]
        try:
            for i in range(25):
                store.intervals.add_interval("s.a", "v", (worker * 25 + i) * 2, (worker * 25 + i) * 2 + 1)
                store.environments.promote_environment(make_env(f"env{worker}", f"p{i}", f"p{i - 1}" if i else None))
        except BaseException as e:  # noqa: BLE001 - surfaced below; a thread's exception is otherwise lost
            errors.append(e)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert len(stores[0].intervals.get_intervals([("s.a", "v")])[("s.a", "v")]) == 100
    assert [e.plan_id for e in stores[1].environments.get_environments()] == ["p24"] * 4


# ---------------------------------------------------------------------- locks


LOCK_TIMEOUT = re.compile(r"Lock 'dev' is held by alice since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; waiting timed out")


def test_lock_contention_between_stores(open_store: Callable[..., StateStore]) -> None:
    alice, bob = open_store(), open_store()
    events: list[str] = []
    held, release, bob_waiting = threading.Event(), threading.Event(), threading.Event()

    def alice_applies() -> None:
        with alice.locks.lock("dev", "alice"):
            events.append("alice acquired")
            held.set()
            release.wait(30)
            events.append("alice releasing")

    def bob_applies() -> None:
        bob_waiting.set()
        with bob.locks.lock("dev", "bob", timeout_s=30):
            events.append("bob acquired")

    holder = threading.Thread(target=alice_applies)
    holder.start()
    assert held.wait(30)

    with pytest.raises(StateError) as error:
        with bob.locks.lock("dev", "bob", timeout_s=0.2):
            pass
    assert LOCK_TIMEOUT.fullmatch(str(error.value)), str(error.value)
    with bob.locks.lock("prod", "bob", timeout_s=0.2):  # other environments are not blocked
        events.append("bob changed prod")

    waiter = threading.Thread(target=bob_applies)
    waiter.start()
    assert bob_waiting.wait(30)
    time.sleep(0.3)  # let bob poll a few times before alice lets go
    release.set()
    holder.join()
    waiter.join()

    assert events == ["alice acquired", "bob changed prod", "alice releasing", "bob acquired"]
    assert alice.locks.lock_holder("dev") is None


def test_lock_is_released_on_error(store: StateStore) -> None:
    with pytest.raises(RuntimeError):
        with store.locks.lock("dev", "alice"):
            raise RuntimeError("apply failed")
    assert store.locks.lock_holder("dev") is None


def test_expired_lease_is_taken_over(store: StateStore, raw_engine: Engine) -> None:
    # What a crashed process leaves behind: a lock whose lease ran out long ago.
    with raw_engine.begin() as conn:
        conn.execute(
            text("INSERT INTO mesh_locks (name, owner, token, acquired_ts, expires_ts) VALUES ('dev', 'ghost', 't', 1, 2)")
        )
    assert store.locks.lock_holder("dev").owner == "ghost"

    with store.locks.lock("dev", "bob", timeout_s=5):
        assert store.locks.lock_holder("dev").owner == "bob"
    assert store.locks.lock_holder("dev") is None


def test_live_lease_is_renewed(open_store: Callable[..., StateStore]) -> None:
    alice, bob = open_store(), open_store()
    with alice.locks.lock("dev", "alice", lease_s=0.3):
        first = alice.locks.lock_holder("dev").expires_ts
        deadline = time.monotonic() + 30
        while alice.locks.lock_holder("dev").expires_ts == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alice.locks.lock_holder("dev").expires_ts > first
        with pytest.raises(StateError) as error:
            with bob.locks.lock("dev", "bob", timeout_s=0.5):
                pass
        assert LOCK_TIMEOUT.fullmatch(str(error.value)), str(error.value)


def test_break_lock_by_token(open_store: Callable[..., StateStore]) -> None:
    alice, bob = open_store(), open_store()
    with alice.locks.lock("dev", "alice") as lease:
        seen = bob.locks.lock_holder("dev")
        assert seen.token == lease.token
        assert bob.locks.break_lock("dev", seen.token)
        with bob.locks.lock("dev", "bob", timeout_s=1):
            assert bob.locks.lock_holder("dev").owner == "bob"
            assert not alice.locks.break_lock("dev", seen.token)  # a stale look never breaks the new holder
            assert bob.locks.lock_holder("dev").owner == "bob"
        lease.check()  # cheap: trusts the recent renewal (a break is noticed at the next one)
        with pytest.raises(LockLostError, match="Lost the lock 'dev'"):
            lease.verify()
        with pytest.raises(LockLostError):
            lease.check()


# ---------------------------------------------------------------------- schema versions


def _set_schema_version(engine: Engine, version: int) -> None:
    with engine.begin() as conn:
        conn.execute(text("UPDATE mesh_versions SET schema_version = :v"), {"v": version})


def test_newer_schema_is_refused(store: StateStore, state_url: str, raw_engine: Engine) -> None:
    _set_schema_version(raw_engine, SCHEMA_VERSION + 1)
    with pytest.raises(StateError) as error:
        StateStore(state_url)
    assert str(error.value) == (
        f"The state store was written by a newer mesh_dagster (schema v{SCHEMA_VERSION + 1}, this is "
        f"v{SCHEMA_VERSION}). "
        "Upgrade mesh_dagster."
    )
    with StateStore(state_url, check_version=False) as unchecked, pytest.raises(StateError, match="newer"):
        unchecked.migrate()


def test_older_schema_needs_migrate(store: StateStore, state_url: str, raw_engine: Engine) -> None:
    store.intervals.add_interval("s.a", "v1", 0, 10)
    with raw_engine.begin() as conn:
        conn.execute(text("DROP TABLE mesh_plans"))
    _set_schema_version(raw_engine, 0)

    with pytest.raises(StateError) as error:
        StateStore(state_url)
    assert str(error.value) == (
        f"The state store uses schema v0 but this mesh_dagster needs v{SCHEMA_VERSION}; run `mesh migrate`."
    )

    with StateStore(state_url, check_version=False) as migrating:
        assert migrating.migrate() == list(range(1, SCHEMA_VERSION + 1))
        assert migrating.migrate() == []
    with StateStore(state_url) as migrated:
        assert migrated.schema_version == SCHEMA_VERSION
        assert migrated.plans.list_plan_records() == []  # the missing tables are back
        assert migrated.intervals.get_intervals([("s.a", "v1")]) == {("s.a", "v1"): [(0, 10)]}


def test_migration_steps_run_in_order(store: StateStore) -> None:
    def add_table(conn) -> None:
        conn.execute(text("CREATE TABLE mesh_extra (x INTEGER)"))

    def fill_table(conn) -> None:
        conn.execute(text("INSERT INTO mesh_extra (x) VALUES (2)"))

    v = SCHEMA_VERSION
    steps = {**MIGRATIONS, v + 1: add_table, v + 2: fill_table}
    assert store.migrate(target=v + 2, migrations=steps) == [v + 1, v + 2]
    assert store.schema_version == v + 2
    with store.db.read() as conn:
        assert conn.execute(text("SELECT x FROM mesh_extra")).scalars().all() == [2]


def test_failing_migration_writes_nothing(store: StateStore, state_url: str) -> None:
    def add_table(conn) -> None:
        conn.execute(text("CREATE TABLE mesh_extra (x INTEGER)"))

    def broken(conn) -> None:
        raise RuntimeError("step 3 failed")

    v = SCHEMA_VERSION
    with pytest.raises(RuntimeError, match="step 3 failed"):
        store.migrate(target=v + 2, migrations={v + 1: add_table, v + 2: broken})

    with StateStore(state_url) as reopened:  # still current, and the next step's table was rolled back
        assert reopened.schema_version == SCHEMA_VERSION
        with reopened.db.read() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM mesh_versions")).scalar() == 1
        assert reopened.migrate(target=v + 1, migrations={v + 1: add_table}) == [v + 1]


def test_missing_migration_step_is_reported() -> None:
    with pytest.raises(StateError) as error:
        pending_migrations(1, 3, {2: lambda conn: None})  # explicit versions: independent of SCHEMA_VERSION
    assert str(error.value) == "No migration to state schema v3; this mesh_dagster build is broken."


# ---------------------------------------------------------------------- connections


def test_unreachable_postgres_names_the_url_without_password() -> None:
    with pytest.raises(StateError) as error:
        StateStore("postgresql://postgres:hunter2@127.0.0.1:1/test")
    message = str(error.value)
    assert message.startswith("Cannot connect to the state store at postgresql+psycopg://postgres:***@127.0.0.1:1/test: ")
    assert "refused" in message.lower()
    assert "hunter2" not in message
    assert "\n" not in message


def test_unreachable_sqlite(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StateError) as error:
        StateStore(f"sqlite:///{blocker}/.mesh/state.db")
    assert str(error.value).startswith(f"Cannot connect to the state store at sqlite:///{blocker}/.mesh/state.db: cannot create ")

    with pytest.raises(StateError) as error:
        StateStore(f"sqlite:///{tmp_path}")  # a folder, not a database file
    assert str(error.value) == f"Cannot connect to the state store at sqlite:///{tmp_path}: unable to open database file"


@pytest.mark.parametrize(
    "url, message",
    [
        ("not a url", "Invalid state store URL 'not a url'"),
        (
            "mysql://root:pw@localhost/db",
            "Unsupported state store URL 'mysql://root:***@localhost/db': use sqlite:///path or postgresql+psycopg://…",
        ),
        ("postgresql://me:pw@db:port/state", "Invalid state store URL 'postgresql://me:***@db:port/state'"),  # not a bug
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(StateError) as error:
        StateStore(url)
    assert str(error.value) == message


def test_sqlite_file_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "p" / ".mesh" / "state.db"
    with StateStore(f"sqlite:///{path}") as store:
        store.intervals.add_interval("s.a", "v", 0, 1)
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_in_memory_sqlite() -> None:
    with StateStore("sqlite://") as store:
        store.snapshots.push_snapshots([make_snapshot()])
        assert len(store.snapshots.all_snapshot_ids()) == 1


def test_mesh_info_shows_the_state_url_without_its_password(tmp_path: Path, state_url: str) -> None:
    with_password = state_url.replace("postgres@", "postgres:hunter2@", 1)
    project = write_project(tmp_path / "info", {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n"})
    ctx = Context(project, state_url=with_password)
    try:
        shown = ctx.inspection.info()["state"]
    finally:
        ctx.close()
    assert "hunter2" not in shown
    assert shown == with_password.replace("hunter2", "***").replace("postgresql://", "postgresql+psycopg://")
