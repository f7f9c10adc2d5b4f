"""The compatibility project's configuration, as a SQLMesh user writes it: a DuckDB gateway (the
default) for local work and a Spark gateway, both seeing the same raw tables (`before_all`)."""

from pathlib import Path

from compat_data import BEFORE_ALL, VARIABLES
from sqlmesh.core.config import (
    Config,
    DuckDBConnectionConfig,
    GatewayConfig,
    LinterConfig,
    ModelDefaultsConfig,
    SparkConnectionConfig,
)

ROOT = Path(__file__).resolve().parent

config = Config(
    gateways={
        "local": GatewayConfig(connection=DuckDBConnectionConfig(database=str(ROOT / "compat.duckdb"))),
        "spark": GatewayConfig(connection=SparkConnectionConfig()),
    },
    default_gateway="local",
    model_defaults=ModelDefaultsConfig(dialect="duckdb", cron="@daily"),
    variables=VARIABLES,
    before_all=BEFORE_ALL,
    linter=LinterConfig(enabled=True, rules=["ambiguousorinvalidcolumn", "invalidselectstarexpansion"]),
)
