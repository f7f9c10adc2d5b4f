"""Definitions built from projects, without Spark: keys, deps, partitions, code versions, checks,
jobs, schedules, and what a broken project looks like in a code location."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml
from project_builder import record_plan, write_project
from project_copies import EXAMPLE, edit

from mesh_dagster.context import Context
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.dagster import ProjectLoadError, definitions
from mesh_dagster.dagster.jobs.schedules import run_requests
from mesh_dagster.dagster.mapping.graph import UNCHANGED, ModelAsset

ROOT = Path(__file__).resolve().parents[2]
FULL = dg.AssetKey(["sqlmesh_example", "full_model"])
INC = dg.AssetKey(["sqlmesh_example", "incremental_model"])
SEED = dg.AssetKey(["sqlmesh_example", "seed_model"])


@pytest.fixture
def example(tmp_path) -> Path:
    dest = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    return dest


def _graph(defs: dg.Definitions):
    return defs.resolve_asset_graph()


def test_example_project_as_assets(example):
    defs = definitions(example)
    graph = _graph(defs)
    assert set(graph.materializable_asset_keys) == {SEED, INC, FULL}
    assert graph.get(INC).parent_keys == {SEED}
    assert graph.get(FULL).parent_keys == {INC}
    assert {graph.get(k).group_name for k in (SEED, INC, FULL)} == {"sqlmesh_example"}

    # code version = the snapshot fingerprint the plan computes, and `mesh plan --explain` prints
    plan = Context(example).plans.plan("prod")
    explain = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(example), "plan", "--explain"],
                             capture_output=True, text=True, check=True).stdout
    for key, name in [(SEED, "seed_model"), (INC, "incremental_model"), (FULL, "full_model")]:
        fingerprint = plan.snapshots[f"sqlmesh_example.{name}"].identifier
        assert graph.get(key).code_version == fingerprint
        assert f"sqlmesh_example.{name}: {fingerprint} (version " in explain

    # the incremental model's intervals are daily partitions from its start; the seed (built once)
    # and the FULL model (rebuilt whole) are not partitioned: thousands of partitions would each
    # say the same
    daily = graph.get(INC).partitions_def
    assert isinstance(daily, dg.TimeWindowPartitionsDefinition)
    assert daily.start == datetime(2020, 1, 1, tzinfo=UTC)
    assert daily.cron_schedule == "0 0 * * *"
    assert daily.get_partition_keys()[0] == "2020-01-01"
    assert graph.get(SEED).partitions_def is None and graph.get(FULL).partitions_def is None

    # one asset, and one step, per model; a range is one run (single-run backfills)
    for key in (SEED, INC, FULL):
        assert defs.get_assets_def(key).keys == {key}
    assert defs.get_assets_def(INC).backfill_policy == dg.BackfillPolicy.single_run()
    assert defs.get_assets_def(INC).node_def.name == "sqlmesh_example__incremental_model"
    assets_def = defs.get_assets_def(FULL)

    meta = graph.get(FULL).metadata
    snap = plan.snapshots["sqlmesh_example.full_model"]
    assert meta["mesh/kind"] == "FULL"
    assert meta["mesh/cron"] == "@daily"
    assert meta["mesh/physical_table"] == snap.table_name
    assert meta["mesh/change"] == "Added"
    assert [c.name for c in meta["dagster/column_schema"].columns] == ["item_id", "num_orders"]
    assert graph.get(INC).metadata["mesh/start"] == "2020-01-01 00:00"

    # the audit is a blocking check; every model has its plan check, which blocks nothing
    check_keys = set(graph.asset_check_keys)
    assert check_keys == {dg.AssetCheckKey(FULL, "assert_positive_order_ids"),
                          *(dg.AssetCheckKey(k, "serves_current_code") for k in (SEED, INC, FULL))}
    assert assets_def.check_specs_by_output_name
    blocking = {spec.name: spec.blocking for spec in assets_def.check_specs}
    assert blocking == {"assert_positive_order_ids": True, "serves_current_code": False}

    # jobs, schedule (off), re-stamp sensor (on)
    assert defs.resolve_job_def("promote_prod") is not None
    # re-stamping is a ranged run of the assets themselves (dagster/restamp/stamps.py), launched by the sensor: no job of its own
    assert "restamp_prod" not in {j.name for j in defs.jobs}
    (schedule,) = defs.schedules
    assert schedule.name == "run_prod_daily_schedule"
    assert schedule.cron_schedule == "0 0 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    sensors = {s.name: s.default_status for s in defs.sensors}
    assert sensors == {"restamp_prod_sensor": dg.DefaultSensorStatus.RUNNING,
                       "plan_status_prod_sensor": dg.DefaultSensorStatus.RUNNING,
                       "automation_prod_sensor": dg.DefaultSensorStatus.STOPPED}
    # nothing of this started Spark
    assert not (example / ".mesh" / "metastore_db").exists()


def test_dev_environment_shows_what_a_change_recomputes(example):
    ctx = Context(example)
    record_plan(ctx.plans.plan("prod"), ctx.state)  # prod exists (state only)
    prod_graph = _graph(definitions(example, "prod"))
    edit(example, "incremental_model", "  item_id,\n", "  item_id,\n  'z' AS new_column,\n")

    dev = definitions(example, "dev")
    graph = _graph(dev)
    dev_keys = {dg.AssetKey(["sqlmesh_example__dev", n]) for n in ("seed_model", "incremental_model", "full_model")}
    assert set(graph.materializable_asset_keys) == dev_keys
    assert {graph.get(k).group_name for k in dev_keys} == {"sqlmesh_example__dev"}
    assert not dev.schedules

    change = {k.path[-1]: graph.get(k).metadata["mesh/change"] for k in dev_keys}
    assert change == {"seed_model": "Unchanged", "incremental_model": "Non-breaking",
                      "full_model": "Indirect Non-breaking"}
    code = {k.path[-1]: graph.get(k).code_version for k in dev_keys}
    assert code["seed_model"] == prod_graph.get(SEED).code_version
    assert code["incremental_model"] != prod_graph.get(INC).code_version
    assert code["full_model"] != prod_graph.get(FULL).code_version
    # the indirect non-breaking change keeps prod's table: nothing to recompute for full_model
    assert graph.get(dg.AssetKey(["sqlmesh_example__dev", "full_model"])).metadata["mesh/physical_table"] == \
        prod_graph.get(FULL).metadata["mesh/physical_table"]
    assert graph.get(dg.AssetKey(["sqlmesh_example__dev", "incremental_model"])).metadata["mesh/physical_table"] != \
        prod_graph.get(INC).metadata["mesh/physical_table"]

    # prod, which serves the version without the column: its Columns are what its view returns, the
    # new version's are pending; the plan shows on the asset
    prod = _graph(definitions(example, "prod")).get(INC)
    assert [c.name for c in prod.metadata["dagster/column_schema"].columns] == ["id", "item_id", "event_date"]
    assert [c.name for c in prod.metadata["mesh/pending_columns"].columns] == ["id", "item_id", "new_column",
                                                                               "event_date"]
    assert prod.kinds == {"spark", "table"}  # icons only: the plan is the description's first line and a check
    assert prod.description.startswith("Pending change (Non-breaking) in prod:")


def test_external_embedded_and_units(tmp_path):
    root = write_project(tmp_path / "p", {
        "external_models.yaml": "- name: raw.events\n  columns:\n    id: int\n    ts: timestamp\n",
        "models/hourly.sql": """
            MODEL (name s.hourly, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@hourly',
                   start '2024-01-01');
            SELECT id, ts FROM raw.events WHERE ts BETWEEN @start_ts AND @end_ts
            """,
        "models/inline.sql": "MODEL (name s.inline, kind EMBEDDED);\nSELECT id FROM s.hourly\n",
        "models/daily.sql": "MODEL (name s.daily, kind FULL, cron '@daily');\nSELECT id FROM s.inline\n",
        "models/morning.sql": "MODEL (name s.morning, kind VIEW, cron '0 6 * * *');\nSELECT id FROM s.daily\n",
    })
    defs = definitions(root)
    graph = _graph(defs)
    ext, hourly, daily, morning = (dg.AssetKey(["raw", "events"]), dg.AssetKey(["s", "hourly"]),
                                   dg.AssetKey(["s", "daily"]), dg.AssetKey(["s", "morning"]))
    assert set(graph.get_all_asset_keys()) == {ext, hourly, daily, morning}  # no asset for EMBEDDED
    assert not graph.get(ext).is_materializable
    assert graph.get(hourly).parent_keys == {ext}
    assert graph.get(daily).parent_keys == {hourly}  # through the embedded model
    assert graph.get(hourly).partitions_def.cron_schedule == "0 * * * *"
    # a FULL model (rebuilt whole) and a view (built once) have no partitions; each model is its own step
    assert graph.get(morning).partitions_def is None and graph.get(daily).partitions_def is None
    assert len({id(defs.get_assets_def(k)) for k in (hourly, daily, morning)}) == 3
    assert sorted(s.name for s in defs.schedules) == ["run_prod_0_6_x_x_x_schedule", "run_prod_daily_schedule",
                                                      "run_prod_hourly_schedule"]


def test_broken_project_error_names_file_and_line(tmp_path):
    root = write_project(tmp_path / "p", {
        "models/a.sql": "MODEL (name s.a, kind FULL);\n\nSELECT id FROM s.missing WHERE\n",
    })
    with pytest.raises(ProjectLoadError) as info:
        definitions(root)
    assert "models/a.sql:3: Cannot parse query: Incomplete WHERE clause" in str(info.value)
    frames = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert not any("mesh_dagster/core" in f for f in frames), frames
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_schedule_requests_few_ranged_runs_and_recomputes_nothing_present():
    day = IntervalUnit.DAY
    d = to_ms
    seed = ModelAsset("s.seed", ("s", "seed"), _model("s.seed", "SEED"), "1", "v1", "t1", UNCHANGED)
    inc = ModelAsset("s.inc", ("s", "inc"), _model("s.inc", "INCREMENTAL_BY_TIME_RANGE"), "2", "v2", "t2",
                     UNCHANGED, start_ms=d("2024-01-01"))
    late = ModelAsset("s.late", ("s", "late"), _model("s.late", "INCREMENTAL_BY_TIME_RANGE"), "3", "v3", "t3",
                      UNCHANGED, start_ms=d("2024-01-06"))
    full = ModelAsset("s.full", ("s", "full"), _model("s.full", "FULL"), "4", "v4", "t4", UNCHANGED)
    models = [seed, inc, late, full]
    pending = {
        "s.seed": [(0, 253402300800000)],
        "s.inc": [(d("2024-01-05"), d("2024-01-06")), (d("2024-01-06"), d("2024-01-07"))],
        "s.late": [(d("2024-01-06"), d("2024-01-07"))],  # starts later: the span fits it too
        "s.full": [(d("2024-01-06"), d("2024-01-07"))],  # built once per run whatever the range
    }
    (request,) = run_requests(day, models, pending, "prod:daily")
    assert {k.path[-1] for k in request.asset_selection} == {"seed", "inc", "late", "full"}
    assert request.tags["dagster/asset_partition_range_start"] == "2024-01-05"
    assert request.tags["dagster/asset_partition_range_end"] == "2024-01-06"

    pending["s.inc"] = [(d("2024-01-04"), d("2024-01-05")), (d("2024-01-06"), d("2024-01-07"))]  # a hole
    requests = run_requests(day, models, pending, "prod:daily")
    assert [(r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"],
             sorted(k.path[-1] for k in r.asset_selection)) for r in requests] == [
        ("2024-01-04", "2024-01-06", ["full", "late", "seed"]),
        ("2024-01-04", "2024-01-04", ["inc"]),
        ("2024-01-06", "2024-01-06", ["inc"]),
    ]
    assert run_requests(day, models, {}, "prod:daily") == []


def _model(name: str, kind: str):
    from mesh_dagster.core.models.kinds import ModelKind
    from mesh_dagster.core.models.model import Model

    return Model(name=name, kind=ModelKind(name=kind, time_column="ds" if "INCREMENTAL" in kind else None))


def test_workspace_loads_prod_and_named_dev_environment(tmp_path):
    """The top-level workspace.yaml through Dagster's own loader, on a copy of the repository layout,
    plus a location whose project is broken: what the UI shows for it."""
    shutil.copytree(EXAMPLE, tmp_path / "example_project", ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    spec = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    assert [e["python_file"]["attribute"] for e in spec["load_from"]] == ["prod", "dev"]
    write_project(tmp_path / "broken", {
        "models/a.sql": "MODEL (name s.a, kind FULL);\n\nSELECT id FROM s.missing WHERE\n",
        "definitions.py": "from mesh_dagster.dagster import definitions\n\n\n"
                          "def prod():\n    return definitions(__file__.rpartition('/')[0])\n",
    })
    spec["load_from"].append({"python_file": {"relative_path": "broken/definitions.py", "attribute": "prod",
                                              "location_name": "broken"}})
    (tmp_path / "workspace.yaml").write_text(yaml.safe_dump(spec))
    code = """
import sys
from dagster._core.workspace.load_target import WorkspaceFileTarget
from dagster._core.instance import DagsterInstance
from dagster._core.workspace.context import WorkspaceProcessContext
with DagsterInstance.local_temp(sys.argv[1]) as instance:
    with WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=["workspace.yaml"])) as ctx:
        entries = ctx.create_request_context().get_code_location_entries()
        for name, entry in sorted(entries.items()):
            if entry.load_error is not None:
                cause = entry.load_error.cause
                print("ERROR", name, cause.message.strip())
                print("STACK", name, "".join(cause.stack).replace(chr(10), " | "))
                continue
            repo = next(iter(entry.code_location.get_repositories().values()))
            keys = sorted(n.asset_key.to_user_string() for n in repo.get_asset_node_snaps() if n.is_materializable)
            print("LOCATION", name, keys, sorted(j.name for j in repo.get_all_jobs() if not j.name.startswith("__")))
"""
    (tmp_path / "home").mkdir()
    env = {**os.environ, "MESH_DEV_ENVIRONMENT": "feature_x"}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "home")], cwd=tmp_path, capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {tuple(line.split(" ", 2)[:2]): line.split(" ", 2)[2] for line in proc.stdout.splitlines()
           if line.startswith(("LOCATION ", "ERROR ", "STACK "))}
    dev, prod = out[("LOCATION", "example_project_dev")], out[("LOCATION", "example_project_prod")]
    assert dev.startswith("['sqlmesh_example__feature_x/full_model'") and "promote_feature_x" in dev
    assert prod.startswith("['sqlmesh_example/full_model'") and "promote_prod" in prod and "run_prod_daily" in prod
    # the broken project: one message with the file and line, and no frames of mesh_dagster's internals
    assert out[("ERROR", "broken")].endswith("models/a.sql:3: Cannot parse query: Incomplete WHERE clause")
    stack = out[("STACK", "broken")]
    assert "mesh_dagster/core" not in stack and "mesh_dagster/context" not in stack
    assert stack.count("mesh_dagster/") == 1  # the raise in definitions() itself


def test_materialize_windows_follow_the_model_lifetime_and_lookback(tmp_path):
    from mesh_dagster.execution.intervals.materialize import model_window

    root = write_project(tmp_path / "p", {
        "models/inc.sql": """
            MODEL (name s.inc, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, lookback 2),
                   start '2024-01-10', end '2024-01-20');
            SELECT 1 AS id, CAST('2024-01-10' AS DATE) AS ds
            """,
        "models/seed_like.sql": "MODEL (name s.v, kind VIEW);\nSELECT id FROM s.inc\n",
    })
    ctx = Context(root)
    snaps = ctx.plans.plan("prod").snapshots
    inc, view = snaps["s.inc"], snaps["s.v"]
    d = to_ms
    assert model_window(inc, ctx.project, d("2024-01-01"), d("2024-01-05"), ) is None  # before the start
    assert model_window(inc, ctx.project, d("2024-01-25"), d("2024-01-26")) is None  # after the end
    # lookback 2: two days before the range, never before the start
    assert model_window(inc, ctx.project, d("2024-01-15"), d("2024-01-16")) == (d("2024-01-13"), d("2024-01-16"))
    assert model_window(inc, ctx.project, d("2024-01-05"), d("2024-01-12")) == (d("2024-01-10"), d("2024-01-12"))
    assert model_window(inc, ctx.project, d("2024-01-18"), d("2024-01-30")) == (d("2024-01-16"), d("2024-01-21"))
    assert model_window(view, ctx.project, d("2024-01-01"), d("2024-01-02")) == (0, 253402300800000)


def test_materialize_refuses_what_has_no_table(tmp_path):
    from mesh_dagster.core.errors import MeshError

    root = write_project(tmp_path / "p", {
        "external_models.yaml": "- name: raw.events\n  columns:\n    id: int\n",
        "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT id FROM raw.events\n",
    })
    ctx = Context(root)
    with pytest.raises(MeshError, match=r"Cannot materialize raw.events \(EXTERNAL\): these kinds have no physical"):
        list(ctx.runs.materialize(["raw.events"], "2024-01-01", "2024-01-02"))
    with pytest.raises(MeshError, match="Unknown model 'nope'"):
        ctx.runs.materialize(["nope"], "2024-01-01", "2024-01-02")
