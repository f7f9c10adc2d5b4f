"""End to end, the README's first command then `mesh ui`: every partition `mesh plan` computed
shows materialized in the UI, with nothing launched by hand.

The example project as shipped (history since 2020: ~2,500 daily partitions of the incremental
model; the seed and the FULL model have none) is applied by `mesh plan --auto-apply` outside
Dagster; `mesh ui` then starts, on its embedded SQLite instance or on a Postgres one (config.yaml
`dagster.storage`, a scratch database of the test Postgres), and the re-stamp sensor, on its own,
launches a re-stamp run. The test asserts, over GraphQL, that the incremental model's
`partitionStats` reaches all its partitions and the others are materialized, and that the re-stamp
run shows in the Runs page's default view as what it is (tagged `mesh/restamp`, launched by the
re-stamp sensor: Dagster hides only runs of a backfill, and none exists for it). The time it takes
from the UI answering is printed (`-s`) and reported, never asserted (the issue's goal: within 30 s).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from test_dagster_webserver import Dagster, _free_port

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"
MODELS = ("seed_model", "incremental_model", "full_model")
STATS = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path }
  partitionStats { numMaterialized numPartitions numFailed }
  assetMaterializations(limit: 1) { timestamp } } }"""
ROOT_RUNS = """{ runsFeedOrError(limit: 50, view: ROOTS) { ... on RunsFeedConnection { results { id } } } }"""
RESTAMP_RUNS = """{ runsOrError(filter: {tags: [{key: "mesh/restamp", value: "true"}]}) {
  ... on Runs { results { runId status tags { key value } } } } }"""


@pytest.fixture(params=["sqlite", "postgres"])
def instance_storage(request):
    """'' for the embedded SQLite instance, else config.yaml's `dagster:` section for a scratch database."""
    if request.param == "sqlite":
        yield ""
        return
    name = f"mesh_ui_{uuid.uuid4().hex[:10]}"
    admin = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "test", "autocommit": True}
    with psycopg.connect(**admin) as conn:  # a missing Postgres fails the test loudly
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"\ndagster:\n  storage:\n    type: postgres\n    database: {name}\n"
    finally:
        with psycopg.connect(**admin) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_every_partition_the_plan_computed_shows_materialized(tmp_path, instance_storage):
    project = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    (project / "config.yaml").write_text((project / "config.yaml").read_text() + instance_storage)
    applied = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), "plan",
                              "--auto-apply"], capture_output=True, text=True, timeout=900)
    assert applied.returncode == 0, applied.stdout + applied.stderr

    began = time.monotonic()
    server = Dagster(project, _free_port(), tmp_path / "dagster.log", ["prod"])
    try:
        server.wait_loaded()
        loaded = time.monotonic() - began
        keys = [{"path": ["sqlmesh_example", m]} for m in MODELS]
        stats: dict = {}
        done: dict = {}
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            nodes = server.query(STATS, keys=keys)["assetNodes"]
            stats = {n["assetKey"]["path"][-1]: n["partitionStats"] for n in nodes}
            done = {n["assetKey"]["path"][-1]: bool(n["assetMaterializations"]) for n in nodes}
            if stats["incremental_model"]["numMaterialized"] == stats["incremental_model"]["numPartitions"] \
                    and all(done.values()):
                break
            time.sleep(1)
        shown = time.monotonic() - began
        runs = _finished(server)  # the events show before the run's own RUN_SUCCESS is stored
        kind = "postgres" if instance_storage else "sqlite"
        print(f"\nmesh ui ({kind} instance): code location loaded after {loaded:.1f} s; every partition shown "
              f"after {shown:.1f} s, {shown - loaded:.1f} s after the UI answered "
              f"({stats['incremental_model']['numMaterialized']} partitions, {len(runs)} re-stamp run(s))")
        inc = stats["incremental_model"]
        assert inc["numMaterialized"] == inc["numPartitions"] > 2000 and inc["numFailed"] == 0, \
            (stats, runs, server.log.read_text()[-3000:])
        assert stats["seed_model"] is None and stats["full_model"] is None and all(done.values()), done
        assert runs and {r["status"] for r in runs} == {"SUCCESS"}, runs
        shown_by_default = {r["id"] for r in server.query(ROOT_RUNS)["runsFeedOrError"]["results"]}
        assert {r["runId"] for r in runs} <= shown_by_default  # in the default Runs view, as what they are:
        for run in runs:  # no `dagster/backfill` linking to a backfill that does not exist
            tags = {t["key"]: t["value"] for t in run["tags"]}
            assert tags.get("dagster/sensor_name") == "restamp_prod_sensor" and "dagster/backfill" not in tags, tags
    finally:
        server.stop()
        from mesh_dagster.engine.connect_server import stop_server

        stop_server(project / ".mesh")


def _finished(server: Dagster, timeout_s: float = 120) -> list[dict]:
    """The re-stamp runs, once none of them is still queued or going (or as they are at the deadline)."""
    deadline = time.monotonic() + timeout_s
    while True:
        runs = server.query(RESTAMP_RUNS)["runsOrError"]["results"]
        going = [r for r in runs if r["status"] in ("QUEUED", "NOT_STARTED", "STARTING", "STARTED")]
        if (runs and not going) or time.monotonic() > deadline:
            return runs
        time.sleep(1)
