"""State stores that cannot be used: one line naming the store and what failed, nothing written.

Read-only files and folders, a file that is not a database, a 0-byte `state.db` (refused: mesh
never leaves one, so it was truncated, and starting over would forget what the warehouse holds),
a Postgres database that does not exist or refuses to create the tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from bad_input.harness import assert_refused, copy_example, mesh, nothing_written
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.state import StateStore
from tests.state.readonly import read_only

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_example(tmp_path / "project")


def _db(project: Path) -> Path:
    return project / ".mesh" / "state.db"


def _url(project: Path) -> str:
    return f"sqlite:///{_db(project)}"


def _with_dev(project: Path) -> None:
    """A store holding one finalized environment, `dev`."""
    with StateStore(_url(project)) as store:
        store.environments.promote_environment(Environment(name="dev", plan_id="p1"))
        store.environments.finalize_environment("dev", "p1")


def _use_state(project: Path, url: str) -> None:
    (project / ".mesh").mkdir(exist_ok=True)  # where the log goes: not what this case is about
    config = project / "config.yaml"
    setting = f"gateways:\n  local:\n    state_connection:\n      url: '{url}'\n"
    config.write_text(config.read_text().replace("gateways:\n  local:\n", setting, 1))


def test_read_only_state_file(project: Path) -> None:
    _with_dev(project)
    with read_only(_db(project)), nothing_written(project):
        listed = mesh(project, "environments")
        refused = mesh(project, "invalidate", "dev")
    assert listed.exit_code == 0 and listed.stdout.startswith("dev ")  # reading still works
    assert_refused(refused, f"Cannot write to the state store at {_url(project)}: attempt to write a readonly database")


def test_read_only_state_folder(project: Path) -> None:
    """SQLite needs to create `state.db-wal`/`-shm` beside the file to use it. (The harness's own
    read would leave them behind, so the check that nothing changed is done here.)"""
    _with_dev(project)
    before = _rows(project)
    with read_only(_db(project).parent):
        refused = mesh(project, "invalidate", "dev")
        assert sorted(p.name for p in _db(project).parent.iterdir()) == ["state.db"]
    assert_refused(refused, f"Cannot connect to the state store at {_url(project)}: unable to open database file",
                   f"the folder {_db(project).parent} is read-only")
    assert _rows(project) == before


def _rows(project: Path) -> list:
    with StateStore(_url(project)) as store:
        return [store.environments.get_environments(), store.snapshots.all_snapshot_ids(), store.locks.lock_holders()]


def test_read_only_folder_on_the_first_run(project: Path) -> None:
    _db(project).parent.mkdir()
    with read_only(_db(project).parent), nothing_written(project):
        refused = mesh(project, "environments")
    assert_refused(refused, f"Cannot create the state store at {_url(project)}: ",
                   f"(the folder {_db(project).parent} is read-only)")
    assert list(_db(project).parent.iterdir()) == []


def test_file_that_is_not_a_database(project: Path) -> None:
    _db(project).parent.mkdir()
    content = "id,name\n1,not a database\n" * 100
    _db(project).write_text(content)
    with nothing_written(project / "models"):  # the harness cannot read rows of a non-database
        refused = mesh(project, "environments")
    assert_refused(refused, f"Cannot connect to the state store at {_url(project)}: file is not a database")
    assert _db(project).read_text() == content
    assert sorted(p.name for p in _db(project).parent.iterdir() if p.name not in ("logs", "cache")) == ["state.db"]


@pytest.mark.parametrize("command", [["environments"], ["plan", "--explain"], ["janitor"]])
def test_zero_byte_state_file(project: Path, command: list[str]) -> None:
    _db(project).parent.mkdir()
    _db(project).touch()
    with nothing_written(project):
        refused = mesh(project, *command)
    assert_refused(refused, f"The state store at {_url(project)} is an empty (0-byte) file", "truncated",
                   "Restore it from a backup, or delete it if this project was never applied")
    assert _db(project).stat().st_size == 0


@pytest.mark.postgres
def test_postgres_database_that_does_not_exist(project: Path) -> None:
    name = f"mesh_missing_{uuid.uuid4().hex[:8]}"
    _use_state(project, f"{POSTGRES}/{name}")
    with nothing_written(project):
        refused = mesh(project, "environments")
    assert_refused(refused, f"Cannot connect to the state store at {POSTGRES}/{name}: ",
                   f'database "{name}" does not exist')


@pytest.fixture
def role_without_create() -> Iterator[tuple[str, str]]:
    """A Postgres login that may use, but not create in, a schema of its own (trust auth)."""
    admin = create_engine(f"{POSTGRES}/test", isolation_level="AUTOCOMMIT")
    suffix = uuid.uuid4().hex[:8]
    role, schema = f"mesh_reader_{suffix}", f"mesh_locked_{suffix}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
            conn.execute(text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
    except Exception as e:  # noqa: BLE001 - fail loudly: this case must not pass without Postgres
        pytest.fail(f"Postgres at {POSTGRES}/test is needed: {e}", pytrace=False)
    yield role, schema
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        conn.execute(text(f'DROP ROLE "{role}"'))
    admin.dispose()


@pytest.mark.postgres
def test_postgres_that_refuses_to_create_the_tables(project: Path, role_without_create: tuple[str, str]) -> None:
    role, schema = role_without_create
    url = f"postgresql+psycopg://{role}@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    _use_state(project, url)
    with nothing_written(project):
        refused = mesh(project, "environments")
    assert_refused(refused, f"Cannot initialise the state store at postgresql+psycopg://{role}@127.0.0.1:5432/test",
                   f"permission denied for schema {schema}")
