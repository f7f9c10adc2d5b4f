"""A second process on a project whose embedded metastore is busy: one line, no Derby noise.

The holder is this test process's shared Spark session (its Derby is booted below); the project
under test reaches the same Derby database through a `.mesh/metastore_db` symlink. The `mesh`
command that is refused before starting Spark costs no JVM; the one that loses the race to the
holder (it asks too early, before the holder boots Derby: simulated by skipping the question)
costs one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mesh_dagster.engine.metastore import derby_database
from tests.bad_input.harness import Outcome, assert_refused, copy_example, nothing_written

# A local[1] session that gives up on a busy metastore after one attempt instead of Hive's ten
# (20 s): the race test only needs to see how the failure is reported.
_CONNECTION = """master: local[1]
      config:
        spark.hadoop.hive.hmshandler.retry.attempts: 1"""
# The same process as `mesh`, except that it does not ask whether the metastore is free first.
_LOSES_THE_RACE = (
    "import mesh_dagster.engine.session as session; session.metastore_in_use = lambda conn, mesh_dir: None; "
    "from mesh_dagster.cli.main import main; main()"
)


@pytest.fixture
def held_project(spark, tmp_path: Path) -> Path:
    """A project whose metastore this process's JVM has booted (and holds until the session ends)."""
    spark.sql("SHOW DATABASES").collect()
    database = derby_database(spark.sparkContext.getConf().get("spark.hadoop.javax.jdo.option.ConnectionURL"))
    project = copy_example(tmp_path / "project")
    config = project / "config.yaml"
    config.write_text(re.sub(r"master: local\[\*\]", _CONNECTION, config.read_text(), count=1))
    (project / ".mesh").mkdir()
    (project / ".mesh" / "metastore_db").symlink_to(database)
    return project


def _run(command: list[str], project: Path, *args: str) -> Outcome:
    env = {**os.environ, "MESH_SPARK_SERVER": "0", "COLUMNS": "250"}
    done = subprocess.run([*command, "-p", str(project), *args], capture_output=True, text=True, env=env,
                          timeout=600)
    return Outcome(done.returncode, done.stdout, done.stderr)


def test_busy_metastore_is_said_in_one_line_before_spark_starts(held_project: Path):
    with nothing_written(held_project):
        outcome = _run([sys.executable, "-m", "mesh_dagster.cli.main"], held_project, "plan", "dev", "--auto-apply")
    assert_refused(
        outcome,
        f"The project's metastore ({held_project / '.mesh' / 'metastore_db'}) is in use by another process "
        f"(pid {os.getpid()}: ",  # this pytest process: the parent of the JVM that holds the lock
        "embedded Spark admits one process at a time",
        "`mesh spark start`",
    )


def test_a_process_that_loses_the_race_for_the_metastore_says_the_same(held_project: Path):
    outcome = _run([sys.executable, "-c", _LOSES_THE_RACE], held_project, "fetchdf", "SHOW DATABASES")
    assert_refused(outcome, f"is in use by another process (pid {os.getpid()}: ", "`mesh spark start`")
    assert "XSDB6" not in outcome.stderr and "DataNucleus" not in outcome.stderr
