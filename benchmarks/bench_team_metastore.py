"""What a Hive metastore in Postgres costs a process: session start and first catalog calls.

    python benchmarks/bench_team_metastore.py

Each case is a fresh process (a fresh JVM), as every `mesh` command and Dagster run is:
  - derby:      the embedded default (Derby in a temp .mesh/)
  - pg first:   Postgres, brand-new database: includes creating the Hive schema
  - pg again:   Postgres, schema already there
  - pg 2 at once: two processes starting together on a brand-new database (one creates the
                  schema under the advisory lock, the other waits): wall time of both
Each process starts the session, then creates a schema, a partitioned table, writes it and reads
a view. Needs Postgres at 127.0.0.1:5432 (user postgres) and the JDBC driver.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[1]
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}

WORK = """
import json, sys, time
from pathlib import Path
from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.engine.session import build_session
database, home = sys.argv[1], Path(sys.argv[2])
extra = {} if database == "-" else {"metastore": {"type": "postgres", "database": database},
                                    "warehouse": str(home / "warehouse")}
started = time.monotonic()
spark = build_session(SparkConnectionConfig(master="local[1]", config={"spark.sql.shuffle.partitions": 2}, **extra),
                      home / ".mesh")
session = time.monotonic() - started
schema = "b_" + home.name.replace("-", "_")
spark.sql(f"CREATE DATABASE {schema}")
spark.sql(f"CREATE TABLE {schema}.t (id INT, ds DATE) USING parquet PARTITIONED BY (ds)")
spark.sql(f"INSERT OVERWRITE TABLE {schema}.t VALUES (1, DATE'2020-01-01'), (2, DATE'2020-01-02')")
spark.sql(f"CREATE VIEW {schema}.v AS SELECT * FROM {schema}.t")
assert len(spark.sql(f"SELECT * FROM {schema}.v").collect()) == 2
print(json.dumps({"session_s": session, "total_s": time.monotonic() - started}))
"""


def _admin(sql: str) -> None:
    with psycopg.connect(dbname="test", autocommit=True, **PG) as conn:  # type: ignore[arg-type]
        conn.execute(sql)


def _start(database: str, root: Path) -> subprocess.Popen:
    home = Path(tempfile.mkdtemp(dir=root))
    return subprocess.Popen([sys.executable, "-c", WORK, database, str(home)], stdout=subprocess.PIPE, text=True,
                            cwd=root, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", **_keep()})


def _keep() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("HOME", "JAVA_HOME", "PATH", "SPARK_HOME")}


def _result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"a benchmark process failed ({proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    database = f"mesh_bench_{uuid.uuid4().hex[:8]}"
    both = f"{database}_two"
    _admin(f'CREATE DATABASE "{database}"')
    _admin(f'CREATE DATABASE "{both}"')
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            rows = [("derby", _result(_start("-", root))),
                    ("pg first", _result(_start(database, root))),
                    ("pg again", _result(_start(database, root)))]
            started = time.monotonic()
            pair = [_start(both, root), _start(both, root)]
            results = [_result(p) for p in pair]
            wall = time.monotonic() - started
        print(f"{'case':<14}{'session start s':>16}{'session + DDL + write + read s':>32}")
        for name, r in rows:
            print(f"{name:<14}{r['session_s']:>16.1f}{r['total_s']:>32.1f}")
        for i, r in enumerate(results, 1):
            print(f"{f'pg 2 at once #{i}':<14}{r['session_s']:>16.1f}{r['total_s']:>32.1f}")
        print(f"two processes on a new metastore, wall time: {wall:.1f} s")
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        _admin(f'DROP DATABASE IF EXISTS "{both}" WITH (FORCE)')


if __name__ == "__main__":
    main()
