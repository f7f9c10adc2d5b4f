"""CUSTOM kinds: `kind CUSTOM (materialization 'name', materialization_properties (k = v))`, written by
a `mesh_dagster.Materialization` subclass of the project's `materializations/*.py`.

As in SQLMesh, the materialization, its properties and its code decide the data (data hash);
SQLMesh's own engine-adapter `CustomMaterialization` is refused, by name, at its import's line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from mesh_dagster.state.store import StateStore
from tests.execution.fake_engine import FakeEngine

MATERIALIZATION = '''from mesh_dagster import Materialization

SUFFIX = "!"


class Stamped(Materialization):
    NAME = "stamped"

    def insert(self, table, query, context):
        label = context.properties["label"] + SUFFIX
        context.append(table, f"SELECT *, '{label}' AS label FROM ({query}) AS q WHERE {context.properties['n']} > 0")
'''
MODEL = """MODEL (
  name s.c,
  kind CUSTOM (materialization 'stamped', materialization_properties (label = 'run', n = 2), batch_size 1),
  start '2020-01-01'
);

SELECT 1 AS id
"""


def _root(tmp_path: Path, model: str = MODEL, materialization: str = MATERIALIZATION) -> Path:
    files = {"models/c.sql": model, "materializations/stamped.py": materialization}
    return write_project(tmp_path / f"p{len(list(tmp_path.iterdir()))}", files)


def _refused(root: Path, *fragments: str) -> None:
    with pytest.raises(MeshError) as e:
        load_project(root, use_cache=False)
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


def test_the_materialization_creates_and_writes_each_batch_in_order(tmp_path: Path) -> None:
    engine = FakeEngine()
    context = Context(_root(tmp_path), engine=engine)
    plan = context.plans.plan(execution_time="2020-01-03")
    model = plan.snapshots["s.c"].model
    assert (model.kind.is_incremental, model.depends_on_past, model.batch_size) == (True, True, 1)
    context.reviews.apply(plan)
    appends = [c for c in engine.calls if c.method == "append"]
    assert [c.name for c in appends] == [plan.snapshots["s.c"].table_name] * 2  # two daily batches
    assert "'run!' AS label" in appends[0].args["query"] and "WHERE 2 > 0" in appends[0].args["query"]
    assert engine.methods().index("create_table") < engine.methods().index("append")
    context.close()


def test_a_failing_materialization_names_its_line(tmp_path: Path) -> None:
    broken = MATERIALIZATION.replace('label = context.properties["label"] + SUFFIX', "label = context.properties['x']")
    engine = FakeEngine()
    context = Context(_root(tmp_path, materialization=broken), engine=engine)
    plan = context.plans.plan(execution_time="2020-01-02")
    with pytest.raises(MeshError) as e:
        SnapshotEvaluator(context.project, engine, plan.snapshots).evaluate(plan.snapshots["s.c"], 0, 86_400_000,
                                                                           86_400_000)
    assert "materializations/stamped.py:10:" in str(e.value) and "KeyError" in str(e.value), str(e.value)
    assert not [c for c in engine.calls if c.method == "append"]
    context.close()


def test_its_code_and_properties_are_data(tmp_path: Path) -> None:
    root = _root(tmp_path)
    with StateStore(f"sqlite:///{tmp_path}/state.db") as state:
        record_plan(build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-02"), state)
        file = root / "materializations/stamped.py"
        file.write_text(file.read_text().replace('SUFFIX = "!"', 'SUFFIX = "?"'))  # a global the class uses
        code = build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-02")
        assert code.directly_modified == ["s.c"] and code.category("s.c") == ChangeCategory.BREAKING
        file.write_text(file.read_text().replace('SUFFIX = "?"', 'SUFFIX = "!"'))
        model = root / "models/c.sql"
        model.write_text(model.read_text().replace("label = 'run'", "label = 'walk'"))
        props = build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-02")
        assert props.directly_modified == ["s.c"]
        model.write_text(model.read_text().replace("label = 'walk'", "label = 'run'").replace("batch_size 1",
                                                                                             "batch_size 2"))
        batching = build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-02")
        assert batching.metadata_updated == ["s.c"]  # as SQLMesh: batch_size is metadata


def test_unknown_and_malformed_materializations_are_refused_at_their_line(tmp_path: Path) -> None:
    unknown = MODEL.replace("'stamped'", "'stampd'")
    _refused(_root(tmp_path, unknown), "models/c.sql:3:", "materialization 'stampd'", "Did you mean 'stamped'?")
    missing = MODEL.replace("materialization 'stamped', ", "")
    _refused(_root(tmp_path, missing), "models/c.sql:3:", "kind CUSTOM (materialization 'name')")
    no_insert = MATERIALIZATION.replace("def insert(", "def other(")
    _refused(_root(tmp_path, materialization=no_insert), "materializations/stamped.py:6:", "must implement insert")
    twice = MATERIALIZATION + "\n\nclass Again(Stamped):\n    NAME = 'STAMPED'\n"
    _refused(_root(tmp_path, materialization=twice), "materializations/stamped.py:", "defined twice")


@pytest.mark.parametrize("line", ["from sqlmesh import CustomMaterialization",
                                  "from sqlmesh.core.snapshot.evaluator import CustomMaterialization"])
def test_sqlmesh_custom_materializations_are_refused_pointing_to_ours(tmp_path: Path, line: str) -> None:
    sqlmesh_style = f"import typing\n\n{line}\n\n\nclass Mine(CustomMaterialization):\n    NAME = 'stamped'\n"
    _refused(_root(tmp_path, materialization=sqlmesh_style), "materializations/stamped.py:3:",
             "engine adapters", "subclass mesh_dagster.Materialization")


def test_a_subclass_of_an_installed_sqlmesh_custom_materialization_is_refused_not_ignored(tmp_path: Path) -> None:
    stand_in = ("class CustomMaterialization:  # as if SQLMesh were installed\n    pass\n\n\n"
                "class Mine(CustomMaterialization):\n    NAME = 'stamped'\n")
    _refused(_root(tmp_path, materialization=stand_in), "materializations/stamped.py:5:",
             "subclasses SQLMesh's CustomMaterialization", "mesh_dagster.Materialization")
