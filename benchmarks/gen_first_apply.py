"""Generate the first-apply benchmark project (issue 9): 30 models = 1 seed, 15
INCREMENTAL_BY_TIME_RANGE, 8 FULL and 6 VIEW models, each joining 1–3 upstream models, daily,
start 2024-01-01. Deterministic. The model files are valid for both mesh and SQLMesh; only the
config differs (`flavour`), so both tools run the very same SQL.

    python benchmarks/gen_first_apply.py /tmp/first_apply [mesh|sqlmesh]
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_project import join_query  # noqa: E402 - a sibling script, not a package

START = dt.date(2024, 1, 1)
# The seed's rows cover the first SEED_DAYS days: every model still has ~1,050 daily intervals to
# backfill, but incremental tables get SEED_DAYS partitions (2 years of partitions make each
# write a minute long on a 2-core machine and the benchmark measures Hive partition I/O only).
SEED_DAYS = 60
IDS_PER_DAY = 3
KINDS = ["INCREMENTAL_BY_TIME_RANGE"] * 15 + ["FULL"] * 8 + ["VIEW"] * 6

MESH_CONFIG = """gateways:
  local:
    connection:
      type: spark
      master: local[*]
default_gateway: local
model_defaults:
  dialect: spark
  start: 2024-01-01
  cron: '@daily'
"""


def sqlmesh_config(root: Path) -> str:
    """SQLMesh on the same kind of local Spark as ours: Hive catalog with an embedded Derby
    metastore and the warehouse inside the project; state in DuckDB (SQLMesh keeps no state in Spark)."""
    spark_dir = root.resolve() / ".spark"
    return f"""gateways:
  local:
    connection:
      type: spark
      config:
        spark.master: local[*]
        spark.sql.catalogImplementation: hive
        spark.sql.warehouse.dir: {spark_dir / 'warehouse'}
        spark.driver.extraJavaOptions: -Dderby.system.home={spark_dir}
    state_connection:
      type: duckdb
      database: {root.resolve() / 'state.duckdb'}
default_gateway: local
model_defaults:
  dialect: spark
  start: 2024-01-01
  cron: '@daily'
"""


def model_name(i: int) -> str:
    return f"bench_{'ab'[i % 2]}.model_{i:02d}"


SEED_MODEL = f"""MODEL (
  name {model_name(0)},
  kind SEED (
    path '../seeds/seed_00.csv'
  ),
  columns (
    id INT,
    ds DATE,
    value DOUBLE
  ),
  grain (id, ds)
);
"""


def seed_csv(rng: random.Random) -> str:
    rows = ["id,ds,value"]
    for day in range(SEED_DAYS):
        ds = (START + dt.timedelta(days=day)).isoformat()
        rows += [f"{k},{ds},{rng.random() * 100:.3f}" for k in range(IDS_PER_DAY)]
    return "\n".join(rows) + "\n"


def query_model(i: int, kind: str, parents: list[int]) -> str:
    incremental = kind == "INCREMENTAL_BY_TIME_RANGE"
    kind_text = "INCREMENTAL_BY_TIME_RANGE (\n    time_column ds\n  )" if incremental else kind
    return f"""MODEL (
  name {model_name(i)},
  kind {kind_text},
  grain (id, ds)
);

{join_query(parents, incremental, model_name)}"""


def generate(root: Path, flavour: str = "mesh", seed: int = 7, concurrent_tasks: int | None = None) -> Path:
    """Write the project into `root` (replaced if it exists); `concurrent_tasks` is written into
    either tool's connection (both default to 4 on Spark)."""
    rng = random.Random(seed)
    kinds = KINDS[:]
    rng.shuffle(kinds)
    if root.exists():
        shutil.rmtree(root)
    (root / "models").mkdir(parents=True)
    (root / "seeds").mkdir()
    config = MESH_CONFIG if flavour == "mesh" else sqlmesh_config(root)
    if concurrent_tasks is not None:
        setting = f"      type: spark\n      concurrent_tasks: {concurrent_tasks}\n"
        config = config.replace("      type: spark\n", setting)
    (root / "config.yaml").write_text(config)
    (root / "models" / "model_00.sql").write_text(SEED_MODEL)
    (root / "seeds" / "seed_00.csv").write_text(seed_csv(rng))
    for i, kind in enumerate(kinds, start=1):
        parents = sorted(rng.sample(range(i), rng.randint(1, min(3, i))))
        (root / "models" / f"model_{i:02d}.sql").write_text(query_model(i, kind, parents))
    return root


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/first_apply")
    print(generate(target, sys.argv[2] if len(sys.argv) > 2 else "mesh"))
