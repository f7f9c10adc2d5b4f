"""A Postgres state password holding `@`, `/`, `#`, `:`, `%` or a space, against the real server:
given as `password:` (or through `env_var`) it is escaped into the URL and reaches the server as
written; given inside a whole `url:` unescaped, it is refused, never guessed at. No message and no
log shows any fragment of it. The server trusts 127.0.0.1 (a wrong password connects too), so
reaching the server is shown by the URL parsing back to exactly the role, password and database,
and by the state tables being created in that database and owned by that role. Issue 34, point 8."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bad_input.harness import assert_refused, closed_port, copy_example, mesh, nothing_written
from mesh_dagster.core.project.config_file import load_config

pytestmark = pytest.mark.postgres

PASSWORD = "Zq@Jx/Kw#Qv:Yz%4x1q Tu"  # no piece a log line holds by chance (`41 ` of a time did)
ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture
def role() -> Iterator[str]:
    """A login role with PASSWORD and a database of its own (its name is the role's); both dropped after."""
    name = f"mesh_pw_{uuid.uuid4().hex[:8]}"
    admin = create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {name} LOGIN PASSWORD '{PASSWORD}'"))
        conn.execute(text(f"CREATE DATABASE {name} OWNER {name}"))
    try:
        yield name
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            conn.execute(text(f"DROP ROLE IF EXISTS {name}"))
        admin.dispose()


def _state(tmp_path: Path, lines: str) -> Path:
    """The example project with `lines` (indented for `state_connection:`) as its gateway's state store."""
    project = copy_example(tmp_path / "p")
    (project / ".mesh").mkdir()  # where the log goes
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("gateways:\n  local:\n", "gateways:\n  local:\n"
                                                 "    state_connection:\n" + lines, 1))
    return project


def _fields(role: str, password: str, port: int = 5432) -> str:
    return (f"      type: postgres\n      host: 127.0.0.1\n      port: {port}\n      user: {role}\n"
            f"      password: {password}\n      database: {role}\n")


def _fragments(*texts: str) -> list[str]:
    """The pieces of PASSWORD (raw or escaped) found in `texts`."""
    shown = "\n".join(texts)
    escaped = quote(PASSWORD, safe="")
    pieces = {PASSWORD[i:i + 3] for i in range(len(PASSWORD) - 2)} | {escaped[i:i + 5] for i in range(len(escaped) - 4)}
    return sorted(p for p in pieces if p in shown)


def _logs(project: Path) -> str:
    return "\n".join(p.read_text() for p in (project / ".mesh" / "logs").glob("*.log"))


def _owner_of_the_state_tables(database: str) -> set[str]:
    engine = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:5432/{database}")
    try:
        with engine.connect() as conn:
            return {r[0] for r in conn.execute(text("SELECT tableowner FROM pg_tables WHERE tablename LIKE 'mesh_%'"))}
    finally:
        engine.dispose()


@pytest.mark.parametrize("given", ["literal", "env_var"])
def test_a_password_with_url_characters_reaches_the_server(tmp_path: Path, role: str, given: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESH_STATE_PASSWORD", PASSWORD)
    written = f"'{PASSWORD}'" if given == "literal" else "\"{{ env_var('MESH_STATE_PASSWORD') }}\""
    project = _state(tmp_path, _fields(role, written))
    url = make_url(load_config(project).state_connection_for("local").to_url(project))
    assert (url.username, url.password, url.host, url.port, url.database) == (role, PASSWORD, "127.0.0.1", 5432, role)
    listed = mesh(project, "environments")
    assert listed.exit_code == 0, listed.stderr
    assert _owner_of_the_state_tables(role) == {role}  # created there, by that role
    info = mesh(project, "info")
    assert f"state: postgresql+psycopg://{role}:***@127.0.0.1:5432/{role}" in info.stdout, info.stdout
    assert _fragments(listed.stdout, listed.stderr, info.stdout, info.stderr) == []


def test_a_failing_connection_shows_no_fragment_of_the_password(tmp_path: Path, role: str) -> None:
    port = closed_port()
    project = _state(tmp_path, _fields(role, f"'{PASSWORD}'", port))
    with nothing_written(project):
        refused = mesh(project, "environments")
    line = assert_refused(refused, f"Cannot connect to the state store at postgresql+psycopg://{role}:***@127.0.0.1:"
                                   f"{port}/{role}: ", "Connection refused")
    assert _fragments(line, refused.stdout, _logs(project)) == []


@pytest.mark.parametrize("given", ["literal", "env_var"])
def test_a_whole_url_with_an_unescaped_password_is_refused_all_hidden(tmp_path: Path, role: str, given: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"postgresql+psycopg://{role}:{PASSWORD}@127.0.0.1:5432/{role}"
    monkeypatch.setenv("MESH_STATE_URL", url)
    written = f"'{url}'" if given == "literal" else "\"{{ env_var('MESH_STATE_URL') }}\""
    project = _state(tmp_path, f"      url: {written}\n")
    with nothing_written(project):
        refused = mesh(project, "environments")
    line = assert_refused(refused, f"Invalid state store URL 'postgresql+psycopg://{role}:***@127.0.0.1:5432/{role}': "
                                   "its user or password holds an '@'; escape it as %40")
    assert _fragments(line, refused.stdout, _logs(project)) == []
    assert _owner_of_the_state_tables(role) == set()  # the server was never asked

    escaped = url.replace(PASSWORD, quote(PASSWORD, safe=""))  # what the message says to do
    monkeypatch.setenv("MESH_STATE_URL", escaped)
    if given == "literal":
        (project / "config.yaml").write_text((project / "config.yaml").read_text().replace(url, escaped))
    listed = mesh(project, "environments")
    assert listed.exit_code == 0, listed.stderr
    assert _owner_of_the_state_tables(role) == {role}
    assert _fragments(listed.stdout, listed.stderr) == []
