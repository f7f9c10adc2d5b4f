"""dagster-pyspark's `PySparkResource` as the Spark settings of Dagster runs (dagster/code_location.py,
the component's `pyspark:`), merged with the gateway's connection: a conflict is refused at load
in one line naming both values, a setting reaches the session Python models get as `context.spark`."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml
from dagster.components.testing import create_defs_folder_sandbox
from dagster_pyspark import PySparkResource
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster import ProjectLoadError, definitions

CLUSTER = """gateways:
  team:
    connection:
      master: spark://cluster.example:7077
      config:
        spark.executor.memory: 2g
model_defaults:
  dialect: spark
  start: 2024-01-01
"""
MODEL = {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n"}
MARKER = "spark.sql.mesh.test.marker"


def test_definitions_take_the_resources_settings(tmp_path) -> None:
    root = write_project(tmp_path / "p", MODEL, CLUSTER)
    pyspark = PySparkResource(spark_config={"spark.jars.packages": "org.example:lib:1.0", "spark.executor.cores": 2})
    mesh = definitions(root, pyspark=pyspark).resources["mesh"]
    assert mesh.spark_config == {"spark.executor.cores": "2", "spark.jars.packages": "org.example:lib:1.0"}
    conn = mesh.get_context().connection  # what a run's session is built from
    assert conn.master == "spark://cluster.example:7077"
    assert conn.config == {"spark.executor.memory": "2g", "spark.jars.packages": "org.example:lib:1.0",
                           "spark.executor.cores": "2"}


def test_a_conflict_is_refused_at_load_naming_both_values(tmp_path) -> None:
    root = write_project(tmp_path / "p", MODEL, CLUSTER)
    with pytest.raises(ProjectLoadError) as e:
        definitions(root, pyspark=PySparkResource(spark_config={"spark.executor.memory": "8g"}))
    assert str(e.value) == (
        f"Cannot load the mesh project {root}: config.yaml:6: PySparkResource.spark_config sets "
        "spark.executor.memory='8g' but the gateway's connection config says '2g'")
    with pytest.raises(ProjectLoadError, match="spark.master='yarn' but the gateway's connection says master "
                                               "spark://cluster.example:7077$"):
        definitions(root, pyspark=PySparkResource(spark_config={"spark.master": "yarn"}))


def test_embedded_default_refuses_what_the_shared_server_cannot_apply(tmp_path) -> None:
    root = write_project(tmp_path / "p", MODEL)
    with pytest.raises(ProjectLoadError, match=r"sets spark.jars.packages='a:b:1', which applies only when Spark "
                                               r"starts, but with a local master and the embedded Derby metastore"):
        definitions(root, pyspark=PySparkResource(spark_config={"spark.jars.packages": "a:b:1"}))
    defs = definitions(root, pyspark=PySparkResource(spark_config={"spark.sql.shuffle.partitions": "3"}))
    assert defs.resources["mesh"].spark_config == {"spark.sql.shuffle.partitions": "3"}


def test_component_yaml_pyspark(tmp_path) -> None:
    root = write_project(tmp_path / "p", MODEL, CLUSTER)
    for config, error in (({"spark.executor.cores": 2}, None), ({"spark.executor.memory": "1g"}, "config says '2g'")):
        with create_defs_folder_sandbox() as sandbox:
            path = sandbox.defs_folder_path / "mesh"
            path.mkdir()
            (path / "defs.yaml").write_text(yaml.safe_dump({"type": "mesh_dagster.MeshProjectComponent", "attributes": {
                "project": str(root), "pyspark": {"spark_config": config}}}))
            if error is None:
                with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
                    assert isinstance(component.get_pyspark(), PySparkResource)
                    assert defs.resources["mesh"].spark_config == {"spark.executor.cores": "2"}
            else:
                with pytest.raises(Exception) as raised:  # noqa: PT012 - Dagster wraps the component's error
                    with sandbox.load_component_and_build_defs(defs_path=path):
                        pass
                assert error in _messages(raised.value)


def _messages(error: BaseException | None) -> str:
    out = []
    while error is not None:
        out.append(str(error))
        error = error.__cause__ or error.__context__
    return "\n".join(out)


PY_MODEL = '''\
from mesh_dagster import ExecutionContext, model


@model("{schema}.marker", columns={{"value": "string"}})
def execute(context: ExecutionContext, start, end, execution_time):
    value = context.spark.conf.get("{marker}", "unset")
    return context.spark.createDataFrame([(value,)], "value string")
'''


@pytest.mark.spark
def test_a_runs_session_has_the_resources_setting(tmp_path, spark, unique_schema) -> None:
    root = write_project(tmp_path / "p", {"models/marker.py": PY_MODEL.format(schema=unique_schema, marker=MARKER)})
    defs = definitions(root, shared_spark=False, pyspark=PySparkResource(spark_config={MARKER: "from-resource"}))
    try:
        with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
            result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance)
        assert result.success
        context = Context(root)
        table = context.plans.plan("prod", allow_empty=True).snapshots[f"{unique_schema}.marker"].table_name
        assert [tuple(r) for r in context.engine.session.fetchall(f"SELECT value FROM {table}")] == [("from-resource",)]
        context.close()
    finally:
        spark.conf.unset(MARKER)
