"""The example project as Dagster code locations: `dagster dev -w workspace.yaml` (repository root)
loads `prod` and a dev environment (`MESH_DEV_ENVIRONMENT`, default `dev`); `dagster dev -f
definitions.py` loads prod only."""

import os
from pathlib import Path

import dagster as dg

from mesh_dagster.dagster import definitions

PROJECT = Path(__file__).resolve().parent


@dg.definitions
def defs() -> dg.Definitions:
    return definitions(PROJECT, "prod")


def prod() -> dg.Definitions:
    return definitions(PROJECT, "prod")


def dev() -> dg.Definitions:
    return definitions(PROJECT, os.environ.get("MESH_DEV_ENVIRONMENT", "dev"))
