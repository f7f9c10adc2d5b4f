"""The metastore's limit on schema names, which planning enforces for environments (no mock)."""

import uuid

import pytest

from mesh_dagster.core.config.names import MAX_DATABASE_NAME as MAX_SCHEMA_NAME


def test_the_metastore_holds_schema_names_up_to_the_limit_planning_enforces(engine):
    prefix = f"t_{uuid.uuid4().hex[:10]}_"
    longest = prefix + "x" * (MAX_SCHEMA_NAME - len(prefix))
    engine.session.execute(f"CREATE SCHEMA {longest}")
    try:
        engine.session.execute(f"CREATE VIEW {longest}.v AS SELECT 1 AS x")
        assert engine.session.fetchall(f"SELECT x FROM {longest}.v") == [(1,)]
    finally:
        engine.catalog.drop_schema(longest, cascade=True)
    with pytest.raises(Exception, match="maximum length of 128"):
        engine.session.execute(f"CREATE SCHEMA {longest}y")
