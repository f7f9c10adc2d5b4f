"""Generate an N-model project: seeds, then INCREMENTAL_BY_TIME_RANGE, FULL and VIEW models that
join 1–3 upstream models. Deterministic for a given N and seed.

    python benchmarks/gen_project.py /tmp/bench_project 1000
"""

from __future__ import annotations

import random
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

CONFIG = """gateways:
  local:
    connection:
      type: spark
      master: local[*]
default_gateway: local
model_defaults:
  dialect: spark
  start: 2020-01-01
  cron: '@daily'
"""

KINDS = ["INCREMENTAL_BY_TIME_RANGE"] * 4 + ["FULL"] * 4 + ["VIEW"] * 2


def model_name(i: int) -> str:
    return f"bench_{i % 10}.model_{i:04d}"


def seed_sql(i: int) -> str:
    return f"""MODEL (
  name {model_name(i)},
  kind SEED (
    path '../seeds/seed_{i:04d}.csv'
  ),
  columns (
    id INT,
    ds DATE,
    value DOUBLE
  ),
  grain (id, ds)
);
"""


def seed_csv(i: int, rng: random.Random) -> str:
    rows = ["id,ds,value"]
    for r in range(10):
        rows.append(f"{r},2020-01-{1 + r % 28:02d},{rng.random() * 100:.3f}")
    return "\n".join(rows) + "\n"


def join_query(parents: list[int], incremental: bool, name_of: Callable[[int], str] = model_name) -> str:
    """The SELECT of a generated model: its parents joined on (id, ds), their values summed."""
    aliases = [f"p{k}" for k in range(len(parents))]
    first = aliases[0]
    joins = "\n".join(
        f"LEFT JOIN {name_of(p)} AS {a}\n  ON {first}.id = {a}.id AND {first}.ds = {a}.ds"
        for p, a in zip(parents[1:], aliases[1:])
    )
    value = " + ".join(f"COALESCE({a}.value, 0)" for a in aliases)
    where = f"\nWHERE\n  {first}.ds BETWEEN @start_ds AND @end_ds" if incremental else ""
    return f"""SELECT
  {first}.id AS id,
  {first}.ds AS ds,
  {value} AS value
FROM {name_of(parents[0])} AS {first}
{joins}{where}
"""


def query_model(i: int, kind: str, parents: list[int]) -> str:
    incremental = kind == "INCREMENTAL_BY_TIME_RANGE"
    kind_text = "INCREMENTAL_BY_TIME_RANGE (\n    time_column ds\n  )" if incremental else kind
    return f"""MODEL (
  name {model_name(i)},
  kind {kind_text},
  grain (id, ds),
  owner 'bench',
  description 'Generated model {i} joining {len(parents)} upstream models'
);

{join_query(parents, incremental)}"""


def generate(root: Path, n: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    if root.exists():
        shutil.rmtree(root)
    (root / "models").mkdir(parents=True)
    (root / "seeds").mkdir()
    (root / "config.yaml").write_text(CONFIG)
    n_seeds = max(1, n // 20)
    for i in range(n):
        path = root / "models" / f"model_{i:04d}.sql"
        if i < n_seeds:
            path.write_text(seed_sql(i))
            (root / "seeds" / f"seed_{i:04d}.csv").write_text(seed_csv(i, rng))
            continue
        # Prefer recent upstream models so the graph is deep, not just wide.
        k = rng.randint(1, min(3, i))
        lo = max(0, i - 60)
        parents = sorted(rng.sample(range(lo, i), k))
        path.write_text(query_model(i, rng.choice(KINDS), parents))
    return root


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/mesh_bench_project")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    print(generate(target, count))
