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
    MotherDuckConnectionConfig,
    SparkConnectionConfig,
)

ROOT = Path(__file__).resolve().parent

base = Config(
    gateways={
        "local": GatewayConfig(connection=DuckDBConnectionConfig(database=str(ROOT / "compat.duckdb"))),
        "spark": GatewayConfig(connection=SparkConnectionConfig()),
        "warehouse": GatewayConfig(connection=MotherDuckConnectionConfig(database="compat")),
    },
    default_gateway="local",
    model_defaults=ModelDefaultsConfig(dialect="duckdb", cron="@daily"),
    before_all=BEFORE_ALL,
    linter=LinterConfig(enabled=True, rules=["ambiguousorinvalidcolumn", "invalidselectstarexpansion"]),
)
# Several configs derived from one, as SQLMesh projects write them: the one named `config` is read.
warehouse_config = base.copy(update={"default_gateway": "warehouse"})
config = base.model_copy(update={"variables": VARIABLES})
