"""`session_properties`: Spark settings for one model's queries (SQLMesh: engine session settings,
metadata in the fingerprint; `model_defaults.session_properties` merged under the model's own)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.errors import MeshError, ModelError
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from mesh_dagster.execution.evaluate.session_settings import SettingsGate, model_settings
from mesh_dagster.state.store import StateStore
from tests.execution.fake_engine import FakeEngine

CONFIG = ("model_defaults:\n  dialect: spark\n  start: 2020-01-01\n  session_properties:\n"
          "    spark.sql.shuffle.partitions: 8\n    spark.sql.ansi.enabled: true\n")
MODEL = """MODEL (
  name s.m,
  kind FULL,
  session_properties (
    'spark.sql.session.timeZone' = 'America/New_York',
    spark.sql.ansi.enabled = false,
    spark.sql.autoBroadcastJoinThreshold = -1
  )
);

SELECT current_timezone() AS zone
"""


def _root(tmp_path: Path, text: str = MODEL, config: str = CONFIG) -> Path:
    return write_project(tmp_path / f"p{len(list(tmp_path.iterdir()))}", {"models/m.sql": text}, config)


def test_settings_are_read_and_merged_over_the_defaults(tmp_path: Path) -> None:
    model = load_project(_root(tmp_path), use_cache=False).models["s.m"]
    assert model.session_properties == {"spark.sql.shuffle.partitions": "8", "spark.sql.session.timeZone":
                                        "America/New_York", "spark.sql.ansi.enabled": "false",
                                        "spark.sql.autoBroadcastJoinThreshold": "-1"}


def test_a_changed_setting_is_a_metadata_change(tmp_path: Path) -> None:
    root = _root(tmp_path)
    with StateStore(f"sqlite:///{tmp_path}/state.db") as state:
        record_plan(build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-02"), state)
        path = root / "models/m.sql"
        path.write_text(path.read_text().replace("America/New_York", "Asia/Tokyo"))
        plan = build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-02")
    assert plan.metadata_updated == ["s.m"] and plan.category("s.m") == ChangeCategory.METADATA
    assert plan.backfills == {}  # the table is kept
    assert plan.snapshots["s.m"].version == plan.previous["s.m"].version


def test_settings_spark_fixes_at_start_are_refused_at_their_line(tmp_path: Path) -> None:
    for key, line, why in (("spark.executor.memory = '2g'", 5, "fixed when the session starts"),
                           ("'spark.sql.warehouse.dir' = '/tmp/x'", 5, "fixed when the session starts"),
                           ("spark.sql.sources.partitionOverwriteMode = 'static'", 5, "cannot be set per model")):
        text = MODEL.replace("'spark.sql.session.timeZone' = 'America/New_York'", key)
        with pytest.raises(ModelError) as e:
            load_project(_root(tmp_path, text), use_cache=False)
        assert f"models/m.sql:{line}:" in str(e.value) and why in str(e.value), str(e.value)
    with pytest.raises(MeshError, match="spark.driver.cores"):
        load_project(_root(tmp_path, config=CONFIG + "    spark.driver.cores: 2\n"), use_cache=False)
    bad = MODEL.replace("spark.sql.ansi.enabled = false", "spark.sql.ansi.enabled")
    with pytest.raises(ModelError, match="models/m.sql:6: Session properties are written `key = value`"):
        load_project(_root(tmp_path, bad), use_cache=False)


def test_the_model_is_evaluated_under_its_settings_then_they_are_restored(tmp_path: Path) -> None:
    from mesh_dagster.context import Context

    engine = FakeEngine()
    context = Context(_root(tmp_path), engine=engine)
    snapshots = context.plans.plan(execution_time="2020-01-02").snapshots
    snapshot = snapshots["s.m"]
    SnapshotEvaluator(context.project, engine, snapshots).evaluate(snapshot, 0, 86_400_000, 86_400_000)
    context.close()
    methods = engine.methods()
    assert methods[0] == "set_session_settings" and methods[-1] == "restore_session_settings"
    assert "replace_table" in methods[1:-1]
    assert engine.calls[0].args["settings"]["spark.sql.session.timeZone"] == "America/New_York"


def test_a_model_with_settings_never_runs_beside_another() -> None:
    gate, running, overlaps = SettingsGate(), [], []
    lock = threading.Lock()

    def run(alone: bool) -> None:
        with gate.exclusive() if alone else gate.shared():
            with lock:
                running.append(alone)
                if alone and len(running) > 1 or not alone and True in running:
                    overlaps.append(list(running))
            time.sleep(0.02)
            with lock:
                running.remove(alone)

    threads = [threading.Thread(target=run, args=(i % 3 == 0,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert overlaps == [] and not any(t.is_alive() for t in threads)


def test_a_setting_the_session_refuses_fails_the_model_at_its_line(tmp_path: Path) -> None:
    from mesh_dagster.core.errors import EngineError

    class Refusing(FakeEngine):
        def set_session_settings(self, settings):  # type: ignore[no-untyped-def]
            raise EngineError("Spark refuses to set spark.sql.x while the session runs")

    model = load_project(_root(tmp_path), use_cache=False).models["s.m"]
    with pytest.raises(ModelError, match="models/m.sql:4: session_properties of s.m: Spark refuses"):
        with model_settings(Refusing(), model):
            raise AssertionError("the model must not run")


def test_a_python_model_sets_them_as_a_decorator_argument(tmp_path: Path) -> None:
    python = ("import pandas as pd\n\nfrom mesh_dagster import model\n\n\n"
              "@model('s.py', columns={'x': 'int'},\n"
              "       session_properties={'spark.sql.shuffle.partitions': 4, 'spark.sql.ansi.enabled': False})\n"
              "def execute(context, start, end, execution_time):\n    return pd.DataFrame({'x': [1]})\n")
    root = write_project(tmp_path / "py", {"models/py.py": python}, CONFIG)
    assert load_project(root, use_cache=False).models["s.py"].session_properties == {
        "spark.sql.shuffle.partitions": "4", "spark.sql.ansi.enabled": "false"}
    static = python.replace("'spark.sql.ansi.enabled': False", "'spark.driver.memory': '1g'")
    with pytest.raises(ModelError, match="models/py.py:7: Spark setting spark.driver.memory cannot change"):
        load_project(write_project(tmp_path / "st", {"models/py.py": static}, CONFIG), use_cache=False)
