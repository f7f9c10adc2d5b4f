"""The quickstart on a Hive metastore in Postgres: every process opens its own Spark session on one
catalog, at the same time, with no shared Connect server.

Two checkouts of one project (two users) share the metastore, the warehouse and a Postgres state
store. Their processes start together on a brand-new metastore (the Hive schema is created once,
under an advisory lock), then user A's `mesh plan dev` and user B's Dagster run of prod write to
the catalog at the same time, and a third process sees what both made.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.spark.quickstart_copy import edit
from tests.team.services import env, finish, mesh, mesh_popen, pg_tables, postgres_metastore, team_project

pytestmark = pytest.mark.slow

# A Dagster run of one prod partition, in a process of its own as a run worker would be. The resource
# keeps its default `shared_spark=True`: a Postgres metastore must switch the shared server off.
DAGSTER_RUN = """
import json, os, sys, time
from pathlib import Path
import dagster as dg
from mesh_dagster.dagster import definitions
project, schema, partition, home = sys.argv[1:5]
defs = definitions(project, "prod")
job = defs.resolve_implicit_global_asset_job_def()
started = time.time()
result = job.execute_in_process(instance=dg.DagsterInstance.local_temp(home), partition_key=partition,
                                asset_selection=[dg.AssetKey([schema, "incremental_model"])], raise_on_error=False)
failures = [str(e.event_specific_data.error.message) for e in result.all_events if e.is_step_failure]
print(json.dumps({"success": result.success, "failures": failures,
                  "materialized": [e.asset_key.path for e in result.get_asset_materialization_events()
                                   for e in [e.event_specific_data.materialization]],
                  "shared_env": os.environ.get("MESH_SPARK_SERVER"), "run": [started, time.time()]}))
"""


def test_cli_and_dagster_share_a_postgres_metastore(tmp_path: Path, scratch_db) -> None:
    metastore_db, state_db = scratch_db(), scratch_db()
    schema = f"team_{uuid.uuid4().hex[:8]}"
    connection = {"master": "local[1]", "metastore": postgres_metastore(metastore_db),
                  "warehouse": str(tmp_path / "shared" / "warehouse"),
                  "config": {"spark.sql.shuffle.partitions": 2}}
    alice = team_project(tmp_path / "alice", schema, connection, state_db)
    bob = tmp_path / "bob"
    shutil.copytree(alice, bob)

    # 1. Two processes start on the brand-new metastore at once: one creates the Hive schema, the
    #    other waits for it; both succeed.
    plan = mesh_popen(alice, "plan", "--auto-apply")
    look = mesh_popen(bob, "fetchdf", "SHOW DATABASES")
    out = finish(plan, "mesh plan --auto-apply")
    assert "✔ Virtual layer updated" in out
    assert "default" in finish(look, "mesh fetchdf (started with the plan)")
    assert {"DBS", "TBLS", "PARTITIONS"} <= set(pg_tables(metastore_db))

    # 2. Alice plans a change into dev while Bob's Dagster materializes a prod partition.
    edit(alice / "models" / "incremental_model.sql", "  item_id,\n", "  item_id,\n  'z' AS new_column,\n")
    (tmp_path / "dagster_home").mkdir()
    dagster = subprocess.Popen([sys.executable, "-c", DAGSTER_RUN, str(bob), schema, "2020-01-03",
                                str(tmp_path / "dagster_home")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={k: v for k, v in env().items() if k != "MESH_SPARK_SERVER"})  # as a user runs it
    dev_started = time.time()
    dev = mesh_popen(alice, "plan", "dev", "--auto-apply")
    out = finish(dev, "mesh plan dev --auto-apply")
    dev_done = time.time()
    assert "✔ Virtual layer updated" in out
    report = json.loads(finish(dagster, "the Dagster run").strip().splitlines()[-1])
    assert report["success"], report["failures"]
    assert [schema, "incremental_model"] in report["materialized"]
    assert report["shared_env"] != "1", "the run asked for the shared Connect server"
    run_started, run_done = report["run"]
    assert run_started < dev_done and dev_started < run_done, "the run and the plan did not overlap"

    # 3. A third process sees the views of both environments.
    prod = mesh(bob, "fetchdf", f"SELECT * FROM {schema}.incremental_model ORDER BY id")
    assert "2020-01-03" in prod and "new_column" not in prod
    dev_rows = mesh(bob, "fetchdf", f"SELECT id, new_column FROM {schema}__dev.incremental_model ORDER BY id")
    assert dev_rows.count(" z") == 7

    # No shared server, no Derby anywhere.
    for checkout in (alice, bob):
        assert not (checkout / ".mesh" / "connect.json").exists()
        assert not (checkout / ".mesh" / "metastore_db").exists()
        assert not (checkout / ".mesh" / "warehouse").exists()
