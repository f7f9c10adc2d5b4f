"""Kill -9 at each step of a table's swap for a new layout, then resume (issue 34, point 1).

A forward-only change that widens a column (INT -> BIGINT) migrates the kept table; a FULL table
whose partitioning changed is re-created by its next write. Both used to drop the table and copy
its rows back unjournaled: killed after the drop, the next `mesh run` wrote the new days into a
fresh empty table (and recorded them), and `mesh janitor` dropped the staging table, the last copy.
Now the table is swapped for a new one built beside it (engine/swaps.py), journaled before the drop.

One project holds a copy of two models per swap step (schema `k_<step>`) and a reference copy (`ref`),
behind a shared Spark Connect server. Each copy gets the same edit (m_range: INT -> BIGINT; m_full:
INT -> BIGINT and `partitioned_by grp`) and, per step:

1. `mesh plan --forward-only` is killed at that step of m_range's migration (its several days of
   history at stake), 2. `mesh janitor` keeps what the journal needs, 3. `mesh run` of the next day,
   from the environment's snapshots, finishes the swap and writes;
4. the plan is killed at that step of m_full's migration, 5. `mesh plan` finishes it and applies;
6. `mesh run` of the day after is killed at that step of m_full's re-create (its new partitioning),
7. `mesh janitor`, 8. `mesh run` finishes it; 9. `mesh janitor` leaves nothing behind.

Then every table equals the reference's, which took the change and ran those days uninterrupted:
row for row, column types and partitioning; nothing is left journaled and no plan record running.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.engine.connect_server import start_server, stop_server
from mesh_dagster.engine.kill_points import SWAP_STEPS
from tests import jvm_startup
from tests.cli.test_kill_points import SERVER_CONFIG, _mesh, run_script

pytestmark = pytest.mark.slow

DAY = "DATEDIFF(CAST(@start_ds AS DATE), DATE '2020-01-01')"  # 0 for 2020-01-01
MODELS = {  # name -> (MODEL text before the change, after it), with {s} for the schema
    "m_range": (f"""
        MODEL (name {{s}}.m_range, kind INCREMENTAL_BY_TIME_RANGE (time_column day, batch_size 1));
        SELECT id, CAST(@start_ds AS DATE) AS day, CAST(id * ({DAY} + 1) AS INT) AS v
        FROM (SELECT EXPLODE(SEQUENCE(1, 50)) AS id) AS t
    """, f"""
        MODEL (name {{s}}.m_range, kind INCREMENTAL_BY_TIME_RANGE (time_column day, batch_size 1));
        SELECT id, CAST(@start_ds AS DATE) AS day, CAST(id * ({DAY} + 1) AS BIGINT) AS v
        FROM (SELECT EXPLODE(SEQUENCE(1, 50)) AS id) AS t
    """),
    "m_full": ("""
        MODEL (name {s}.m_full, kind FULL);
        SELECT id, id % 3 AS grp, CAST(id * DATEDIFF(CAST(@end_ds AS DATE), DATE '2020-01-01') AS INT) AS v
        FROM (SELECT EXPLODE(SEQUENCE(1, 20)) AS id) AS t
    """, """
        MODEL (name {s}.m_full, kind FULL, partitioned_by grp);
        SELECT id, id % 3 AS grp, CAST(id * DATEDIFF(CAST(@end_ds AS DATE), DATE '2020-01-01') AS BIGINT) AS v
        FROM (SELECT EXPLODE(SEQUENCE(1, 20)) AS id) AS t
    """),
}
SCHEMAS = ["ref", *(f"k_{step}" for step in SWAP_STEPS)]
SETUP_TIME, DAY_2, DAY_3 = "2020-01-05", "2020-01-06", "2020-01-07"  # four days of history, then two more

COMPARE = """
import json, sys
from mesh_dagster.context import Context
spec = json.loads(sys.argv[1])
ctx = Context(spec["project"])
tables = {s.name: s.table_name for s in ctx.state.environments.get_environment("prod").snapshots}
out = {}
for model in ("m_range", "m_full"):
    a, b = f"{spec['schema']}.{model}", f"ref.{model}"
    counts = [int(v) for v in ctx.engine.session.fetchall(
        f"SELECT (SELECT COUNT(*) FROM {a}), (SELECT COUNT(*) FROM {b}), "
        f"(SELECT COUNT(*) FROM ((SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}) "
        f"UNION ALL (SELECT * FROM {b} EXCEPT ALL SELECT * FROM {a})) AS d)")[0]]
    layouts = [[ctx.engine.catalog.columns(t), ctx.engine.catalog.partition_columns(t)]
               for t in (tables[f"{spec['schema']}.{model}"], tables[f"ref.{model}"])]
    out[model] = {"counts": counts, "layouts": layouts}
leftovers = [r[1] for r in ctx.engine.session.fetchall(f"SHOW TABLES IN mesh__{spec['schema']}") if r[1].startswith("__mesh_tmp")]
print(json.dumps({"tables": out, "leftovers": leftovers}))
ctx.close()
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A shared Spark Connect server for the module: (its project configuration, its warehouse)."""
    host = write_project(tmp_path_factory.mktemp("swap_server"), {}, SERVER_CONFIG)
    with jvm_startup.long_lived():  # it serves the whole module
        info = start_server(load_config(host).gateway().connection, host / ".mesh", timeout_s=300)
    try:
        yield (f"gateways:\n  local:\n    connection:\n      remote: '{info.client_url}'\n"
               "      concurrent_tasks: 1\n"
               "model_defaults:\n  dialect: spark\n  start: 2020-01-01\n  cron: '@daily'\n"), host / ".mesh" / "warehouse"
    finally:
        stop_server(host / ".mesh")


@pytest.fixture(scope="module")
def project(server: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Every copy planned with four days of history, then edited; the reference took the change and
    ran the next two days already. (project, warehouse)."""
    config, warehouse = server
    path = write_project(tmp_path_factory.mktemp("killed_swaps"), _models(0), config)
    _mesh(path, "plan", "--auto-apply", "--skip-tests", "--execution-time", SETUP_TIME, timeout_s=1500)
    write_project(path, _models(1), config)
    _mesh(path, *_plan("ref", DAY_2))
    _mesh(path, *_run("ref", DAY_3))
    return path, warehouse


def _models(version: int) -> dict[str, str]:
    return {f"models/{schema}/{name}.sql": texts[version].format(s=schema)
            for schema in SCHEMAS for name, texts in MODELS.items()}


def _plan(schema: str, when: str) -> tuple[str, ...]:
    return ("plan", "--forward-only", "--auto-apply", "--skip-tests", "--execution-time", when,
            "--select-model", f"{schema}.*")


def _run(schema: str, when: str) -> tuple[str, ...]:
    return ("run", "--execution-time", when, "--select-model", f"{schema}.*")


def _killed(project: Path, args: tuple[str, ...], step: str, table: str) -> None:
    proc = _mesh(project, *args, kill_at=f"{step}@{table}")
    assert proc.returncode == -signal.SIGKILL, (
        f"{' '.join(args)} was not killed at '{step}' of {table} (exit {proc.returncode}):\n"
        f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def _journaled(project: Path) -> list[dict]:
    with sqlite3.connect(project / ".mesh" / "state.db") as conn:
        rows = conn.execute("SELECT payload FROM mesh_pending_writes WHERE operation != 'retired'").fetchall()
    return [json.loads(payload) for (payload,) in rows]


def _janitor_keeps_the_staged_rows(project: Path, warehouse: Path, step: str, table_prefix: str) -> None:
    """`mesh janitor` while the swap is pending: what a resumed process needs is still there; killed
    after the drop, the table itself is gone and every row is in the staging table only."""
    pending = [p for p in _journaled(project) if p["table"].split(".")[1].startswith(table_prefix)]
    if step == "staged":  # the journal never heard of it: the staging table is the janitor's
        assert pending == []
    else:
        [payload] = pending
        assert payload["operation"] == "swap" and payload["rows"] > 0
    _mesh(project, "janitor")
    if step in ("journaled", "dropped"):
        schema_dir = warehouse / f"mesh__k_{step}.db"
        assert (schema_dir / payload["staging"][0].split(".")[1]).is_dir()  # kept for the resume
        assert (schema_dir / payload["table"].split(".")[1]).exists() == (step == "journaled")


@pytest.mark.parametrize("step", SWAP_STEPS)
def test_a_swap_killed_at_each_step_resumes_to_the_uninterrupted_tables(project: tuple[Path, Path],
                                                                       step: str) -> None:
    project, warehouse = project
    schema = f"k_{step}"
    # The forward-only migration of m_range (four days of history) is killed; a run finishes it.
    _killed(project, _plan(schema, DAY_2), step, f"{schema}__m_range__")
    _janitor_keeps_the_staged_rows(project, warehouse, step, f"{schema}__m_range__")
    out = _mesh(project, *_run(schema, DAY_2)).stdout
    assert ("Finished the rewrite of" in out) == (step != "staged"), out
    # The migration of m_full (unpartitioned) is killed; the plan run again finishes it and applies.
    _killed(project, _plan(schema, DAY_2), step, f"{schema}__m_full__")
    _mesh(project, *_plan(schema, DAY_2))
    # Its re-create under the new partitioning, in the next run's write, is killed; a run finishes it.
    _killed(project, _run(schema, DAY_3), step, f"{schema}__m_full__")
    _janitor_keeps_the_staged_rows(project, warehouse, step, f"{schema}__m_full__")
    _mesh(project, *_run(schema, DAY_3))
    _mesh(project, "janitor")  # what a kill left before its journal entry goes

    compared = run_script(COMPARE, {"project": str(project), "schema": schema})
    for model, found in compared["tables"].items():
        rows, expected, differing = found["counts"]
        assert (rows, differing) == (expected, 0), (model, found)
        assert found["layouts"][0] == found["layouts"][1], (model, found)  # BIGINT; m_full partitioned by grp
    assert compared["tables"]["m_range"]["counts"][0] == 6 * 50  # every day of history, none lost
    assert compared["leftovers"] == []
    assert _journaled(project) == []
    with sqlite3.connect(project / ".mesh" / "state.db") as conn:  # killed plans are settled, not running
        assert conn.execute("SELECT COUNT(*) FROM mesh_plans WHERE status = 'running'").fetchone() == (0,)


def test_a_table_dropped_by_hand_is_refused_by_run_shown_by_plan_and_rebuilt_by_its_apply(
        server: tuple[str, Path], tmp_path: Path, mesh) -> None:
    """Issue 34, "clear errors": after a physical table was dropped by hand, `plan` and `run` said all
    was up to date while prod's view failed."""
    config, _ = server
    project = write_project(tmp_path / "dropped", {"models/d/m_range.sql": MODELS["m_range"][0].format(s="d")},
                            config)
    _mesh(project, "plan", "--auto-apply", "--skip-tests", "--execution-time", SETUP_TIME)
    table = _mesh(project, "table_name", "d.m_range").stdout.strip().splitlines()[-1]
    _mesh(project, "fetchdf", f"DROP TABLE {table}")

    refused = mesh(project, "run", "--execution-time", DAY_2, check=False)
    assert refused.returncode == 1, refused.stdout
    assert (f"Cannot write d.m_range: its physical table {table} is missing (dropped outside mesh?) while the state "
            "store records 4 intervals (2020-01-01 - 2020-01-04) of it. Nothing was written: rebuild it with "
            "`mesh plan prod --restate-model d.m_range` (or restore the table)") in refused.stderr
    assert "Traceback" not in refused.stderr
    with sqlite3.connect(project / ".mesh" / "state.db") as conn:  # nothing forgotten, nothing recorded
        assert conn.execute("SELECT COUNT(*), SUM(is_removed) FROM mesh_intervals WHERE name = 'd.m_range'"
                            ).fetchone() == (4, 0)  # one per day
    assert table.split(".")[1] not in _mesh(project, "fetchdf", f"SHOW TABLES IN {table.split('.')[0]}").stdout

    # A plain plan lists it (Spark is at hand: a remote Connect server), and its apply rebuilds it.
    out = _mesh(project, "plan", "--auto-apply", "--skip-tests", "--execution-time", DAY_2).stdout
    said = f"The physical table {table} of d.m_range is missing: 4 intervals (2020-01-01 - 2020-01-04) will be rebuilt"
    assert out.count(said) == 2, out  # in the plan, before its prompt, and by its apply
    expected = ("SELECT id, DATE_ADD(DATE '2020-01-01', d) AS day, CAST(id * (d + 1) AS INT) AS v "
                "FROM (SELECT EXPLODE(SEQUENCE(1, 50)) AS id) AS i, (SELECT EXPLODE(SEQUENCE(0, 4)) AS d) AS days")
    compare = (f"SELECT (SELECT COUNT(*) FROM d.m_range) AS n, (SELECT COUNT(*) FROM ((SELECT * FROM d.m_range "
               f"EXCEPT ALL {expected}) UNION ALL ({expected} EXCEPT ALL SELECT * FROM d.m_range)) AS x) AS differing")
    assert _mesh(project, "fetchdf", compare).stdout.strip().splitlines()[-1].split()[1:] == ["250", "0"]
