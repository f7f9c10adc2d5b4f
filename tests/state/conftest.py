"""Every state test runs against SQLite (a temp file) and the local Postgres.

Postgres is never skipped: if it is unreachable the tests error out. Each Postgres test gets its
own schema (selected through `search_path` in the URL) that is dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, create_engine, text

from mesh_dagster.state import StateStore

POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[Engine]:
    engine = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect():
            pass
    except Exception as e:  # noqa: BLE001 - fail loudly: these tests must not pass without Postgres
        pytest.fail(f"Postgres at {POSTGRES_URL} is unreachable; the state tests need it: {e}", pytrace=False)
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def state_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        # A missing parent folder on purpose: the store must create it.
        yield f"sqlite:///{tmp_path}/project/.mesh/state.db"
        return
    admin: Engine = request.getfixturevalue("postgres_admin")
    schema = f"mesh_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture
def open_store(state_url: str) -> Iterator[Callable[..., StateStore]]:
    """Open further stores on the same database (as other processes would); all are closed."""
    stores: list[StateStore] = []

    def _open(**kwargs) -> StateStore:
        store = StateStore(state_url, **kwargs)
        stores.append(store)
        return store

    yield _open
    for store in stores:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., StateStore]) -> StateStore:
    return open_store()


@pytest.fixture
def raw_engine(state_url: str) -> Iterator[Engine]:
    """A plain engine on the store's database, to fake what other versions/processes left behind."""
    engine = create_engine(state_url)
    yield engine
    engine.dispose()
