"""Who holds an embedded Derby metastore, without Spark: a real child process holds a real POSIX
lock on `dbex.lck`, the lock a booted Derby holds."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mesh_dagster.engine.metastore import (
    MetastoreHolder,
    busy_message,
    derby_busy_database,
    derby_database,
    metastore_holder,
)
from tests.fakes import JavaException

HOLD = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    print("HOLDING", flush=True)
    sys.stdin.read()
""")


@pytest.mark.parametrize(("url", "expected"), [
    ("jdbc:derby:;databaseName=/p/.mesh/metastore_db;create=true", Path("/p/.mesh/metastore_db")),
    ("jdbc:derby:/abs/db;create=true", Path("/abs/db")),
    ("jdbc:derby:memory:x;create=true", None),
    ("jdbc:postgresql://h/metastore", None),
])
def test_derby_database_from_the_metastore_url(url, expected):
    assert derby_database(url) == expected


def test_a_missing_or_unlocked_database_is_free(tmp_path):
    assert metastore_holder(tmp_path / "metastore_db") is None
    (tmp_path / "metastore_db").mkdir()
    (tmp_path / "metastore_db" / "dbex.lck").write_text("")  # left behind by a Derby that exited
    assert metastore_holder(tmp_path / "metastore_db") is None


def test_the_process_holding_the_lock_is_named(tmp_path):
    database = tmp_path / "metastore_db"
    database.mkdir()
    (database / "dbex.lck").write_text("")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(database / "dbex.lck"), "--flag"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "HOLDING"
        found = metastore_holder(database)
        assert found is not None and found.pid == holder.pid
        assert found.command.startswith("python -c import fcntl, os, sys fd = ")
        assert len(found.command) == 100 and found.command.endswith("...")  # a long script, shortened
        assert "\n" not in found.command  # the script's newlines would break the one-line message
        message = busy_message(database, found)
        assert f"is in use by another process (pid {holder.pid}: python -c import fcntl" in message
        assert "\n" not in message
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert metastore_holder(database) is None  # the lock died with the process


def test_a_lock_of_this_process_is_not_someone_else(tmp_path):
    import fcntl

    database = tmp_path / "metastore_db"
    database.mkdir()
    fd = os.open(database / "dbex.lck", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        assert metastore_holder(database) is None
    finally:
        os.close(fd)


def test_holder_descriptions():
    assert MetastoreHolder().describe() == "another process"
    assert MetastoreHolder(12).describe() == "another process (pid 12)"
    assert MetastoreHolder(12, "mesh plan dev").describe() == "another process (pid 12: mesh plan dev)"
    assert MetastoreHolder(12, None, connect_server=True).describe() == "the project's Spark Connect server (pid 12)"


def test_derby_busy_database_is_found_deep_in_the_java_causes():
    chain = JavaException("Unable to instantiate SessionHiveMetaStoreClient", JavaException(None, JavaException(
        "Another instance of Derby may have already booted the database /p/.mesh/metastore_db.")))
    captured = type("AnalysisException", (Exception,), {})("Unable to instantiate SessionHiveMetaStoreClient")
    captured._origin = chain
    assert derby_busy_database(captured) == Path("/p/.mesh/metastore_db")
    assert derby_busy_database(Exception("Unable to instantiate SessionHiveMetaStoreClient")) is None


def test_a_connect_server_holding_the_metastore_is_waited_for_not_stopped():
    message = busy_message(Path("/p/.mesh/metastore_db"), MetastoreHolder(7, None, connect_server=True))
    assert message == ("The project's metastore (/p/.mesh/metastore_db) is held by the project's Spark Connect "
                       "server (pid 7), which does not answer yet: run this again once `mesh spark status` shows "
                       "it running, or stop it with `mesh spark stop`.")
