"""`mesh ui`'s Dagster instance on Postgres (config.yaml `dagster.storage`): the dagster.yaml it
writes, the refusals before anything starts, and a real instance on a scratch database of the
test Postgres (127.0.0.1:5432, user postgres) storing a ranged run's events in batches."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg
import pytest
import yaml

from mesh_dagster.core.config.config import DagsterStorageConfig
from mesh_dagster.core.errors import ConfigError
from mesh_dagster.dagster.ui.workspace import (
    INSTANCE_CONFIG,
    check_instance_database,
    dagster_env,
    instance_config,
    ui_home,
    write_instance,
)
from tests.bad_input.harness import assert_refused, copy_example, mesh, nothing_written

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "test"}


def _admin(sql: str) -> None:
    with psycopg.connect(**PG, autocommit=True) as conn:  # a missing Postgres fails the test loudly
        conn.execute(sql)


@pytest.fixture
def database() -> Iterator[str]:
    name = f"mesh_dagster_{uuid.uuid4().hex[:10]}"
    _admin(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _with_storage(project: Path, database: str, port: int = 5432, extra: str = "") -> Path:
    config = project / "config.yaml"
    config.write_text(config.read_text() + f"\ndagster:\n  storage:\n    type: postgres\n    host: 127.0.0.1\n"
                                           f"    port: {port}\n    database: {database}\n    user: postgres\n{extra}")
    return project


def test_the_default_instance_is_sqlite_in_the_project(tmp_path):
    assert instance_config() == INSTANCE_CONFIG == instance_config(DagsterStorageConfig())
    assert "storage" not in yaml.safe_load(INSTANCE_CONFIG)
    # mesh ui's: the event log in the project's SQLite files, written in batches (dagster/compat.py)
    written = yaml.safe_load(write_instance(tmp_path / "home").read_text())
    assert written["event_log_storage"] == {"module": "mesh_dagster.dagster.compat",
                                            "class": "BatchingSqliteEventLogStorage",
                                            "config": {"base_dir": str(tmp_path / "home" / "history" / "runs")}}
    assert dagster_env(tmp_path / "home" / "workspace.yaml")["DAGSTER_EVENT_BATCH_SIZE"] == "500"
    # a launched run starts within a second: Dagster's daemon reads the run queue's interval from it
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert instance.run_coordinator.dequeue_interval_seconds == 1


def test_postgres_storage_writes_dagsters_postgres_section_without_the_password(tmp_path):
    storage = DagsterStorageConfig(type="postgres", host="db.internal", port=6543, database="dagster",
                                   user="orchestrator", password_env="DAGSTER_PG_PASSWORD")
    written = yaml.safe_load(write_instance(tmp_path / "home", storage).read_text())
    assert written["storage"] == {"postgres": {"postgres_db": {
        "hostname": "db.internal", "port": 6543, "username": "orchestrator",
        "password": {"env": "DAGSTER_PG_PASSWORD"}, "db_name": "dagster", "scheme": "postgresql+psycopg2"}}}
    assert written["concurrency"]["pools"]["default_limit"] == 1  # the rest of the instance is unchanged
    env = dagster_env(tmp_path / "home" / "workspace.yaml", storage)
    assert (env["DAGSTER_HOME"], env["DAGSTER_EVENT_BATCH_SIZE"]) == (str(tmp_path / "home"), "1000")
    assert "DAGSTER_EVENT_BATCH_SIZE" not in dagster_env(tmp_path / "w.yaml", DagsterStorageConfig(
        type="postgres", database="d", event_batch_size=0))


@pytest.mark.parametrize(("extra", "fragments"), [
    ("dagster:\n  storage:\n    type: mysql\n", ("config.yaml:", "dagster.storage.type")),
    ("dagster:\n  storage:\n    host: db\n", ("config.yaml:", "dagster.storage.host", "`type: postgres` only")),
    ("dagster:\n  storage:\n    type: postgres\n", ("config.yaml:", "dagster.storage", "needs the database")),
    ("dagster:\n  storage:\n    type: postgres\n    database: d\n    password_env: s3cret!\n",
     ("dagster.storage.password_env", "not an environment variable name")),
    ("dagster:\n  storage:\n    type: postgres\n    database: d\n    pasword: x\n",
     ("dagster.storage.pasword: unknown setting",)),
    ("dagster:\n  store: {}\n", ("dagster.store: unknown setting",)),
])
def test_bad_dagster_storage_config_is_refused_naming_the_key(tmp_path, extra, fragments):
    project = copy_example(tmp_path / "project")
    config = project / "config.yaml"
    config.write_text(config.read_text() + "\n" + extra)
    with nothing_written(project):
        outcome = mesh(project, "ui")
    assert_refused(outcome, *fragments)
    from mesh_dagster.core.project.config_file import load_config

    with pytest.raises(ConfigError):
        load_config(project)


def test_unreachable_postgres_is_one_line_naming_host_and_port(tmp_path):
    with socket_free_port() as port:
        project = _with_storage(copy_example(tmp_path / "project"), "dagster", port)
        with nothing_written(project):
            outcome = mesh(project, "ui")
    assert_refused(outcome, "Cannot open the Dagster instance database 'dagster'", f"127.0.0.1:{port}",
                   "dagster.storage")
    assert not ui_home(project).exists()


def test_missing_database_is_one_line(tmp_path):
    project = _with_storage(copy_example(tmp_path / "project"), f"no_such_db_{uuid.uuid4().hex[:6]}")
    with nothing_written(project):
        outcome = mesh(project, "ui")
    assert_refused(outcome, "Cannot open the Dagster instance database 'no_such_db_", "does not exist")


def test_unset_password_variable_is_one_line(tmp_path, database):
    project = _with_storage(copy_example(tmp_path / "project"), database,
                            extra="    password_env: MESH_TEST_UNSET_PASSWORD\n")
    with nothing_written(project):
        outcome = mesh(project, "ui")
    assert_refused(outcome, "password_env", "MESH_TEST_UNSET_PASSWORD", "not set")


def test_database_without_dagsters_schema_gets_the_migrate_instructions(tmp_path, database):
    with psycopg.connect(**{**PG, "dbname": database}, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id INT)")  # another application's database
    project = _with_storage(copy_example(tmp_path / "project"), database)
    with nothing_written(project):
        outcome = mesh(project, "ui")
    line = assert_refused(outcome, f"Database '{database}' on 127.0.0.1:5432 holds tables but not Dagster's schema",
                          "dagster instance migrate", f"DAGSTER_HOME={ui_home(project)}")
    assert "alembic_version, event_logs, runs" in line


def test_a_postgres_instance_stores_a_ranged_runs_events_in_batches(tmp_path, database, monkeypatch):
    """The instance `mesh ui` configures: Dagster creates its schema in the empty database, a
    ranged run writes one event per partition (batched), and the database passes the check after."""
    storage = DagsterStorageConfig(type="postgres", database=database)
    home = tmp_path / "home"
    check_instance_database(storage, home)  # empty: fine, Dagster creates its schema
    write_instance(home, storage)
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", dagster_env(home / "workspace.yaml", storage)
                       ["DAGSTER_EVENT_BATCH_SIZE"])
    days = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-03-01")

    @dg.asset(partitions_def=days, backfill_policy=dg.BackfillPolicy.single_run(), code_version="v1")
    def daily(context):
        return dg.MaterializeResult(data_version=dg.DataVersion("p1"), metadata={"n": len(context.partition_keys)})

    with dg.DagsterInstance.from_config(str(home)) as instance:
        keys = days.get_partition_keys()
        result = dg.materialize([daily], instance=instance, tags={
            "dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]})
        assert result.success and len(result.get_asset_materialization_events()) == len(keys) == 60
        records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=daily.key), limit=100).records
        assert {r.asset_materialization.partition for r in records if r.asset_materialization} == set(keys)
        assert {r.asset_materialization.tags["dagster/code_version"] for r in records
                if r.asset_materialization} == {"v1"}
    with psycopg.connect(**{**PG, "dbname": database}) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM event_logs WHERE dagster_event_type = "
                                "'ASSET_MATERIALIZATION'").fetchone()
    assert count == 60  # in Postgres, not in SQLite files beside dagster.yaml
    assert not list(home.rglob("*.db"))  # no SQLite storage beside it (compute logs stay files)
    check_instance_database(storage, home)  # Dagster's schema: accepted


class socket_free_port:
    """A port nothing listens on (bound, then released)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def __exit__(self, *exc) -> None:
        return None


@pytest.mark.slow
def test_mesh_ui_runs_on_the_postgres_instance(tmp_path, database):
    """`mesh ui` with `dagster.storage: postgres`: the webserver, daemon and a launched run all use
    the Postgres database (no SQLite storage in .mesh/dagster), with batched event writes on."""
    from project_copies import recent_example
    from test_dagster_webserver import Dagster, _free_port

    project = _with_storage(recent_example(tmp_path / "project", 3), database)
    server = Dagster(project, _free_port(), tmp_path / "dagster.log")
    try:
        server.wait_loaded()
        run_id = server.launch("promote_prod")
        assert server.wait_run(run_id) == "FAILURE"  # nothing computed yet: refused, as on SQLite
        assert "Cannot promote 'prod'" in server.failure(run_id)
    finally:
        server.stop()
        from mesh_dagster.engine.connect_server import stop_server

        stop_server(project / ".mesh")
    with psycopg.connect(**{**PG, "dbname": database}) as conn:
        (runs,) = conn.execute("SELECT COUNT(*) FROM runs WHERE run_id = %s", (run_id,)).fetchone()
        (events,) = conn.execute("SELECT COUNT(*) FROM event_logs WHERE run_id = %s", (run_id,)).fetchone()
    assert runs == 1 and events > 0
    home = ui_home(project)
    assert "postgres_db" in (home / "dagster.yaml").read_text()
    assert not list(home.rglob("*.db")), list(home.rglob("*.db"))


def test_stopping_one_ui_cancels_only_its_own_runs_on_a_shared_instance(tmp_path, database):
    """On a Postgres instance other people's `mesh ui`s use too, the supervisor marks canceled only
    the runs launched in its own code servers (Dagster's grpc_info tag names the server)."""
    import json

    from mesh_dagster.dagster.compat import GRPC_INFO_TAG
    from mesh_dagster.dagster.ui.supervisor import Runs, is_shared_instance

    home = tmp_path / "home"
    write_instance(home, DagsterStorageConfig(type="postgres", database=database))
    assert is_shared_instance(home) and not is_shared_instance(write_instance(tmp_path / "own").parent)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        def started(socket: str) -> str:
            run = instance.add_run(dg.DagsterRun(job_name="j", run_id=str(uuid.uuid4()),
                                                 status=dg.DagsterRunStatus.STARTED,
                                                 tags={GRPC_INFO_TAG: json.dumps({"host": "localhost",
                                                                                  "socket": socket})}))
            return run.run_id

        mine, theirs = started("/tmp/mine.sock"), started("/tmp/theirs.sock")
        runs = Runs(home, shared=True)
        runs.servers = {"/tmp/mine.sock"}
        assert runs.mark(Runs.canceled) == 1
        assert instance.get_run_by_id(mine).status == dg.DagsterRunStatus.CANCELED
        assert instance.get_run_by_id(theirs).status == dg.DagsterRunStatus.STARTED
