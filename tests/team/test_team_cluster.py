"""The quickstart on shared Spark: a standalone cluster (`master: spark://…`) with the warehouse on a
path every executor sees, and a Spark Connect server the user runs (`remote: sc://…`).

The `mesh` CLI runs in processes of its own, as a user's would; the cluster and the server are
started once per module (tests/team/services.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.team.services import mesh, pg_tables, postgres_metastore, team_project

pytestmark = pytest.mark.slow


def _schema() -> str:
    return f"team_{uuid.uuid4().hex[:8]}"


def test_quickstart_on_a_standalone_cluster(tmp_path: Path, standalone_cluster, scratch_db) -> None:
    metastore_db = scratch_db()
    warehouse = tmp_path / "shared" / "warehouse"
    schema = _schema()
    project = team_project(tmp_path / "project", schema, {
        "master": standalone_cluster.master_url,
        "metastore": {**postgres_metastore(metastore_db), "password": "team-secret"},  # trust auth: unchecked
        "warehouse": str(warehouse),
        "connect_timeout": 5,
        "config": {"spark.executor.memory": "512m", "spark.executor.cores": 1, "spark.cores.max": 1,
                   "spark.sql.shuffle.partitions": 2},
    })

    out = mesh(project, "plan", "--auto-apply")
    assert "✔ Virtual layer updated" in out
    rows = mesh(project, "fetchdf", f"SELECT item_id, num_orders FROM {schema}.full_model ORDER BY item_id")
    assert "item_id" in rows and "num_orders" in rows

    # The work ran on the cluster's executor, and the tables' files are in the configured warehouse.
    assert any(standalone_cluster.work_dir.glob("app-*/*/stderr")), "no executor ran on the worker"
    assert (warehouse / f"mesh__{schema}.db").is_dir()
    assert not (project / ".mesh" / "warehouse").exists() and not (project / ".mesh" / "metastore_db").exists()
    assert "TBLS" in pg_tables(metastore_db)


def test_quickstart_on_a_connect_server_the_user_runs(tmp_path: Path, user_connect_server) -> None:
    schema = _schema()
    project = team_project(tmp_path / "project", schema, {"remote": user_connect_server.url})

    out = mesh(project, "plan", "--auto-apply")
    assert "✔ Virtual layer updated" in out
    rows = mesh(project, "fetchdf", f"SELECT COUNT(*) AS n FROM {schema}.incremental_model")
    assert " n" in rows or "n\n" in rows

    # The server's own catalog and warehouse hold the tables; mesh started no server and no Spark of its own.
    assert (user_connect_server.warehouse / f"mesh__{schema}.db").is_dir()
    mesh_dir = project / ".mesh"
    assert not (mesh_dir / "connect.json").exists()
    assert not (mesh_dir / "warehouse").exists() and not (mesh_dir / "metastore_db").exists()
