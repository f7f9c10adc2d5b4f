"""One writer per model interval across processes and front doors (issue 19, point 4), on real Spark.

Two `mesh run prod` started one second apart used to append every new row of an
INCREMENTAL_UNMANAGED model twice, and the second died with a raw FAILED_READ_FILE.FILE_NOT_EXIST
on an SCD type 2 table the first was rewriting. A CLI run beside a Dagster run of the same model
doubled its rows the same way. Now every write holds its table's lock until its interval is
recorded, and under the lock re-reads the state store: an interval another writer recorded
meanwhile is skipped (said so, not an error); a rewritten table's previous files stay until nobody
can be reading them.

Every process here is a client of one shared Spark Connect server (embedded Derby admits one JVM).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest

from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.engine.connect_server import start_server, stop_server
from tests.project_builder import write_project
from tests.races.conftest import ACTOR_TIMEOUT_S, CODE

pytestmark = pytest.mark.spark

SERVER_CONFIG = """\
gateways:
  local:
    connection:
      master: local[2]
      config:
        spark.sql.shuffle.partitions: 2
model_defaults:
  dialect: spark
  start: 2020-01-01
  cron: '@daily'
"""
DAY = "DATEDIFF(CAST(@start_ds AS DATE), DATE '2020-01-01')"
# Processed in this order by a run (the last name first): the history's daily batches, then the log.
LOG = """
MODEL (name {s}.a_log, kind INCREMENTAL_UNMANAGED);
SELECT id, CAST(@start_ds AS DATE) AS first_day, CAST(@end_ds AS DATE) AS last_day
FROM (SELECT EXPLODE(SEQUENCE(1, 3)) AS id) AS t
"""
HISTORY = f"""
MODEL (name {{s}}.z_history, kind SCD_TYPE_2_BY_TIME (unique_key id, batch_size 1));
SELECT id, CAST(FLOOR({DAY} / id) AS INT) AS v,
       CAST(DATE_ADD(DATE '2020-01-01', CAST(id * FLOOR({DAY} / id) AS INT)) AS TIMESTAMP) AS updated_at
FROM (SELECT EXPLODE(SEQUENCE(1, 4)) AS id) AS t
"""

# What a model's table holds, from a client of the server: rows, (id, day) pairs the log covers
# (each should be once), days it covers, and the history's versions and open versions.
CHECKER = """
import json, sys
from mesh_dagster.context import Context
spec = json.loads(sys.argv[1])
ctx = Context(spec["project"])
s = spec["schema"]
log = ctx.engine.session.fetchall(
    f"SELECT COUNT(*), COUNT(DISTINCT id, d), COUNT(DISTINCT d) FROM "
    f"(SELECT id, EXPLODE(SEQUENCE(first_day, last_day)) AS d FROM {s}.a_log) AS days")[0]
history = ctx.engine.session.fetchall(
    f"SELECT COUNT(*), COUNT(DISTINCT id, valid_from), SUM(CASE WHEN valid_to IS NULL THEN 1 ELSE 0 END) "
    f"FROM {s}.z_history")[0] if spec["history"] else []
print(json.dumps({"log": list(log), "history": list(history)}))
ctx.close()
"""

# A Dagster run materializing the log as Dagster's run worker does (in process, its own instance),
# pausing inside its append until told to go on: a CLI run is started meanwhile.
DAGSTER_RUN = """
import json, sys, time
from pathlib import Path
import dagster as dg
from mesh_dagster.dagster import definitions
from mesh_dagster.engine.writes import TableWrites

spec = json.loads(sys.argv[1])
real = TableWrites.append

def append(self, *args, **kwargs):
    Path(spec["arrived"]).write_text("here")
    deadline = time.monotonic() + 120
    while not Path(spec["release"]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return real(self, *args, **kwargs)

TableWrites.append = append
defs = definitions(spec["project"], "prod")
job = defs.resolve_implicit_global_asset_job_def()
result = job.execute_in_process(instance=dg.DagsterInstance.ephemeral(), raise_on_error=False,
                                asset_selection=[dg.AssetKey([spec["schema"], "a_log"])])
print(json.dumps({"ok": result.success}))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A project whose shared Spark Connect server runs for the module's tests, and its client URL."""
    project = write_project(tmp_path_factory.mktemp("one_writer") / "served", {}, SERVER_CONFIG)
    info = start_server(load_config(project).gateway().connection, project / ".mesh", timeout_s=300)
    try:
        yield project, info.client_url
    finally:
        stop_server(project / ".mesh")


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": CODE, "PYTHONUNBUFFERED": "1", "COLUMNS": "250"}
    env.pop("MESH_SPARK_SERVER", None)  # the running server is found without it
    return env


def _mesh(project: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args], cwd=CODE,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _done(proc: subprocess.Popen) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=ACTOR_TIMEOUT_S)
    return proc.returncode, out


def _python(code: str, spec: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), json.dumps(spec)], cwd=CODE, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _checked(project: Path, schema: str, history: bool = True) -> dict:
    code, out = _done(_python(CHECKER, {"project": str(project), "schema": schema, "history": history}))
    assert code == 0, out[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_two_runs_a_second_apart_write_each_interval_once(server: tuple[Path, str]) -> None:
    project, _ = server
    for name, text in (("a_log", LOG), ("z_history", HISTORY)):
        (project / "models").mkdir(exist_ok=True)
        (project / "models" / f"{name}.sql").write_text(text.format(s="two"))
    code, out = _done(_mesh(project, "plan", "--auto-apply", "--skip-tests", "--execution-time", "2020-01-02"))
    assert code == 0, out

    run = ("run", "--execution-time", "2020-01-08")  # six new days: six history batches, one append
    first = _mesh(project, *run)
    time.sleep(1)
    second = _mesh(project, *run)
    outcomes = [_done(first), _done(second)]
    for code, out in outcomes:
        assert code == 0, out
        assert "FAILED_READ_FILE" not in out and "Traceback" not in out, out
    # They did overlap: one waited for the other's lock and skipped what it had recorded meanwhile.
    assert any("was written by another run meanwhile: skipped" in out for _, out in outcomes), outcomes

    checked = _checked(project, "two")
    assert checked["log"] == [7 * 3, 7 * 3, 7]  # each id once for each of the seven days: none twice
    # Key k changes every k days: 7 + 4 + 3 + 2 versions over days 0-6, none twice, one open per key.
    assert checked["history"] == [16, 16, 4]


def test_a_cli_run_beside_a_dagster_run_appends_once(server: tuple[Path, str], tmp_path: Path) -> None:
    _, url = server
    config = (f"gateways:\n  local:\n    connection:\n      remote: '{url}'\n"
              f"model_defaults:\n  dialect: spark\n  start: {date.today() - timedelta(days=4)}\n  cron: '@daily'\n")
    project = write_project(tmp_path / "p", {"models/a_log.sql": LOG.format(s="beside")}, config)
    yesterday = str(date.today() - timedelta(days=2))
    code, out = _done(_mesh(project, "plan", "--auto-apply", "--skip-tests", "--execution-time", yesterday))
    assert code == 0, out

    arrived, release = tmp_path / "arrived", tmp_path / "release"
    dagster = _python(DAGSTER_RUN, {"project": str(project), "schema": "beside", "arrived": str(arrived),
                                    "release": str(release)})
    deadline = time.monotonic() + ACTOR_TIMEOUT_S
    while not arrived.exists():  # the Dagster run holds the log's lock, about to append
        assert dagster.poll() is None and time.monotonic() < deadline, dagster.communicate()[0][-3000:]
        time.sleep(0.05)
    cli = _mesh(project, "run")  # the same pending days, now
    time.sleep(4)  # it has planned them and waits for the lock
    release.write_text("go")
    dagster_code, dagster_out = _done(dagster)
    cli_code, cli_out = _done(cli)
    assert dagster_code == 0 and json.loads(dagster_out.strip().splitlines()[-1]) == {"ok": True}, dagster_out
    assert cli_code == 0 and "was written by another run meanwhile: skipped" in cli_out, cli_out

    assert _checked(project, "beside", history=False)["log"] == [4 * 3, 4 * 3, 4]  # four days, each id once a day
