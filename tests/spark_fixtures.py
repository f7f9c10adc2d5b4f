"""The shared SparkSession for tests: one JVM per test process.

Starting Spark costs ~10 s and PySpark allows one classic session per process anyway, so every
test directory that needs Spark imports these fixtures into its conftest:

    from tests.spark_fixtures import engine, spark, spark_launch_dir, unique_schema  # noqa: F401
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.engine.adapter import SparkEngine
from mesh_dagster.engine.session import build_session


@pytest.fixture(scope="session")
def spark_launch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The empty directory the JVM is started from; nothing may ever be written into it."""
    return tmp_path_factory.mktemp("spark_cwd")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, spark_launch_dir: Path):
    conn = SparkConnectionConfig(master="local[2]", config={"spark.sql.shuffle.partitions": 2})
    previous = os.getcwd()
    os.chdir(spark_launch_dir)  # the JVM keeps the cwd it was started with
    try:
        session = build_session(conn, tmp_path_factory.mktemp("mesh"))
    finally:
        os.chdir(previous)
    yield session
    session.stop()


@pytest.fixture
def engine(spark) -> SparkEngine:
    return SparkEngine(spark)


@pytest.fixture
def unique_schema(engine: SparkEngine) -> Iterator[str]:
    """A schema name no other test uses; dropped (with its tables) afterwards."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    yield name
    engine.catalog.drop_schema(name, cascade=True)


@pytest.fixture
def project_schema(engine: SparkEngine) -> Iterator[str]:
    """A schema name for a test project's models that no other test uses; afterwards every schema
    holding it (the project's, its environments' views, its physical tables, the test's own
    `<name>_raw`...) is dropped with its tables."""
    name = f"p_{uuid.uuid4().hex[:10]}"
    yield name
    for (schema,) in engine.session.fetchall(f"SHOW SCHEMAS LIKE '*{name}*'"):
        engine.catalog.drop_schema(schema, cascade=True)
