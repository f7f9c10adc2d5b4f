"""A project on disk seen from Dagster as its prod code location (the tests' own Spark session,
no shared server), with helpers the run tests share."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from mesh_dagster.dagster import definitions


class ProdProject:
    def __init__(self, root: Path, schema: str, instance: dg.DagsterInstance):
        self.root, self.schema, self.instance = root, schema, instance

    def key(self, model: str) -> dg.AssetKey:
        return dg.AssetKey([self.schema, model])

    def defs(self) -> dg.Definitions:
        return definitions(self.root, "prod", shared_spark=False)
