"""`plan --explain` on empty state, ours against SQLMesh's, side by side in one run (issue 36:
"`plan --explain` on 1,000 models ≤ 0.1× SQLMesh").

    python benchmarks/bench_explain.py [--models 1000] [--rounds 3] [--keep DIR]

Why a separate script: run_bench.py times only our side, so a ratio against SQLMesh would mix two
runs on a machine whose load changes between them. Here both tools plan the very same model files
in the same run, their rounds interleaved, and the 1-minute load average is printed with every
number, so a reader can see whether a ratio was measured on a quiet machine. Nothing is asserted
on time: the script prints numbers (it only stops if a run fails or does something it must not).

What is timed (each a fresh process, wall clock, median of `--rounds`):
  - ours cold:  `python -m mesh_dagster.cli.main -p PROJECT plan --explain` with no `.mesh/`
                (no cache, no state file: the state is created empty, as on a first plan);
  - ours warm:  the same command again right after (cache and empty state in place);
  - SQLMesh cold/warm: `/tmp/sqlmesh_venv/bin/sqlmesh -p COPY plan --explain --no-prompts`, first
                with no `.cache/` and no DuckDB file, then again with both in place.
SQLMesh has a cache too, so cold is compared with cold and warm with warm.

The project is benchmarks/gen_project.py's (its `generate`). SQLMesh plans a copy holding the same
`models/` and `seeds/` files unchanged (SQLMesh 0.236.4 accepts every file of the generated
project as is); only `config.yaml` differs: a DuckDB gateway (SQLMesh keeps its state there) with
gen_project's `model_defaults` (dialect spark, start, cron). SQLMesh runs from a throwaway venv,
never imported here; create it as bench_first_apply.py's docstring says.

Checked after every run, so the numbers time planning only:
  - ours never starts Spark: no `.mesh/connect.json`, `.mesh/metastore_db`, `.mesh/warehouse`,
    `spark-warehouse/` or `derby.log` appears, and no `java` process carrying the run's marker
    environment variable is seen while it runs (polled; a JVM inherits its parent's environment,
    so the test suite's own JVMs on a busy machine are not mistaken for ours);
  - neither tool applies anything: our state has no snapshot and no environment, SQLMesh's DuckDB
    has no `_snapshots`/`_environments` row and no physical schema;
  - both outputs are plans: ours names every model, SQLMesh's says "Explained plan".

Bytecode: with PYTHONDONTWRITEBYTECODE set (as in some sandboxes) and no `__pycache__` in the
checkout, every run of ours compiles mesh_dagster's ~190 modules from source (some 0.5 s of CPU),
while SQLMesh's venv was byte-compiled by pip. The header says when that is so; the script leaves
the environment as it finds it (a user's machine normally keeps bytecode).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_project import CONFIG, generate, model_name  # noqa: E402 - a sibling script, not a package

MESH = [sys.executable, "-m", "mesh_dagster.cli.main"]
SQLMESH_VENV = Path("/tmp/sqlmesh_venv")
SQLMESH = SQLMESH_VENV / "bin" / "sqlmesh"
MARKER = "MESH_BENCH_EXPLAIN_RUN"
SPARK_TRACES = (".mesh/connect.json", ".mesh/metastore_db", ".mesh/warehouse", "spark-warehouse", "derby.log")
POLL_SECONDS = 0.2


@dataclass
class Series:
    """One row of the table: the wall times of a command over the rounds, with the load beside each."""

    label: str
    seconds: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(self.seconds)


class JavaWatch:
    """Notices a `java` process started by the watched run while it runs.

    The run gets a unique marker in its environment; a JVM it launches (PySpark's gateway, a
    Spark Connect server) inherits that environment, so only the run's own JVMs match.
    """

    def __init__(self, token: str) -> None:
        self.needle = f"{MARKER}={token}".encode()
        self.seen: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> JavaWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._scan()  # a JVM left running after the run ends

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self._scan()

    def _scan(self) -> None:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) in self.seen:
                continue
            try:
                if (proc / "comm").read_text().strip() != "java":
                    continue
                if self.needle in (proc / "environ").read_bytes().split(b"\0"):
                    self.seen.append(int(proc.name))
            except OSError:  # gone meanwhile, or not ours to read
                continue


def timed(cmd: list[str], cwd: Path, series: Series) -> str:
    """Run `cmd` in a fresh process, add its wall time and the load before it to `series`; stdout."""
    token = uuid.uuid4().hex
    env = {**os.environ, MARKER: token}
    series.loads.append(os.getloadavg()[0])
    with JavaWatch(token) as watch:
        began = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    if watch.seen:
        raise SystemExit(f"{series.label}: java process(es) {watch.seen} started during `{' '.join(cmd)}`")
    series.seconds.append(elapsed)
    return proc.stdout


def sqlmesh_config(copy: Path) -> str:
    """gen_project's config with its Spark gateway swapped for DuckDB; model_defaults kept verbatim."""
    defaults = CONFIG[CONFIG.index("model_defaults:"):]
    return f"""gateways:
  local:
    connection:
      type: duckdb
      database: {copy.resolve() / 'bench.duckdb'}
default_gateway: local
{defaults}"""


def sqlmesh_copy(project: Path, copy: Path) -> Path:
    """The same model and seed files as `project`, under a SQLMesh config."""
    if copy.exists():
        shutil.rmtree(copy)
    copy.mkdir(parents=True)
    for folder in ("models", "seeds"):
        shutil.copytree(project / folder, copy / folder)
    (copy / "config.yaml").write_text(sqlmesh_config(copy))
    return copy


def reset_ours(project: Path) -> None:
    """Cold: no cache and no state file."""
    shutil.rmtree(project / ".mesh", ignore_errors=True)


def reset_sqlmesh(copy: Path) -> None:
    """Cold: no cache and no DuckDB file (SQLMesh's state lives in it)."""
    shutil.rmtree(copy / ".cache", ignore_errors=True)
    for name in ("bench.duckdb", "bench.duckdb.wal"):
        (copy / name).unlink(missing_ok=True)


def check_ours(project: Path, work: Path, out: str, n: int) -> None:
    """Our run planned every model, started no Spark and recorded nothing in state."""
    missing = [model_name(i) for i in range(n) if model_name(i) not in out]
    if missing:
        raise SystemExit(f"ours: {len(missing)} models not in the explained plan, e.g. {missing[:3]}\n{out[-2000:]}")
    traces = [p for base in (project, work) for p in (base / t for t in SPARK_TRACES) if p.exists()]
    if traces:
        raise SystemExit(f"ours: planning left Spark's traces: {traces}")
    with sqlite3.connect(project / ".mesh" / "state.db") as db:
        for table in ("mesh_snapshots", "mesh_environments"):
            rows = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            if rows:
                raise SystemExit(f"ours: --explain wrote {rows} rows into {table}")


DUCKDB_CHECK = """
import sys, duckdb
db = duckdb.connect(sys.argv[1], read_only=True)
rows = sum(db.execute(f'SELECT COUNT(*) FROM sqlmesh.{t}').fetchone()[0] for t in ('_snapshots', '_environments'))
schemas = [s for (s,) in db.execute('SELECT DISTINCT schema_name FROM information_schema.schemata').fetchall()
           if s not in ('main', 'sqlmesh', 'information_schema', 'pg_catalog')]
print(rows, ' '.join(schemas))
"""


def check_sqlmesh(copy: Path, out: str) -> None:
    """SQLMesh explained a plan and applied none of it (asked of its own venv's duckdb)."""
    if "Explained plan" not in out:
        raise SystemExit(f"SQLMesh: no explained plan in its output:\n{out[-2000:]}")
    probe = subprocess.run([str(SQLMESH_VENV / "bin" / "python"), "-c", DUCKDB_CHECK, str(copy / "bench.duckdb")],
                           capture_output=True, text=True, check=True)
    rows, _, schemas = probe.stdout.strip().partition(" ")
    if int(rows) or schemas:
        raise SystemExit(f"SQLMesh: --explain applied something: {rows} state rows, schemas {schemas!r}")


def one_round(project: Path, copy: Path, work: Path, n: int, table: dict[str, Series]) -> None:
    """Ours cold, ours warm, SQLMesh cold, SQLMesh warm: interleaved so load drifts hit both tools."""
    ours = [*MESH, "-p", str(project), "plan", "--explain"]
    reset_ours(project)
    for key in ("ours cold", "ours warm"):
        check_ours(project, work, timed(ours, work, table[key]), n)
    if "SQLMesh cold" not in table:
        return
    theirs = [str(SQLMESH), "-p", str(copy), "plan", "--explain", "--no-prompts"]
    reset_sqlmesh(copy)
    for key in ("SQLMesh cold", "SQLMesh warm"):
        check_sqlmesh(copy, timed(theirs, work, table[key]))


def ratio_line(label: str, ours: Series, theirs: Series) -> str:
    value = ours.median() / theirs.median()
    return f"{label:<34} {value:6.3f}x   (target <= 0.100x: {'met' if value <= 0.1 else 'not met'})"


def report(n: int, rounds: int, table: dict[str, Series]) -> None:
    """The table: median, each round, and the 1-minute load average before each round's run."""
    print(f"\n# plan --explain on empty state, {n} models, median of {rounds} round(s); "
          f"{os.cpu_count()} CPUs; load = 1-min load average just before each run")
    print(f"{'':<14} {'median':>8}   {'rounds (s)':<24} {'load per round':<24}")
    for series in table.values():
        runs = " ".join(f"{s:.2f}" for s in series.seconds)
        loads = " ".join(f"{x:.2f}" for x in series.loads)
        print(f"{series.label:<14} {series.median():7.2f}s   {runs:<24} {loads:<24}")
    if "SQLMesh cold" in table:
        print()
        print(ratio_line("ratio ours cold / SQLMesh cold", table["ours cold"], table["SQLMesh cold"]))
        print(ratio_line("ratio ours warm / SQLMesh warm", table["ours warm"], table["SQLMesh warm"]))
        print(ratio_line("ratio ours cold / SQLMesh warm", table["ours cold"], table["SQLMesh warm"]))
    print(f"load average now: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def sqlmesh_version() -> str:
    if not SQLMESH.exists():
        raise SystemExit(f"{SQLMESH} not found: create the venv as bench_first_apply.py's docstring says "
                         "(or pass --skip-sqlmesh)")
    return subprocess.run([str(SQLMESH), "--version"], capture_output=True, text=True, check=True).stdout.strip()


def bytecode_note() -> str:
    """Whether ours pays for compiling its own modules on every run (see the module docstring)."""
    package = Path(__file__).resolve().parents[1] / "mesh_dagster"
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not (package / "__pycache__").exists() \
            and not os.environ.get("PYTHONPYCACHEPREFIX"):
        return "# note: PYTHONDONTWRITEBYTECODE is set and mesh_dagster has no bytecode: ours compiles it every run"
    return "# bytecode: as the environment has it (PYTHONDONTWRITEBYTECODE not in the way)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument("--skip-sqlmesh", action="store_true", help="time ours only")
    args = parser.parse_args()
    labels = ["ours cold", "ours warm"] + ([] if args.skip_sqlmesh else ["SQLMesh cold", "SQLMesh warm"])
    table = {label: Series(label) for label in labels}
    if not args.skip_sqlmesh:
        print(f"# SQLMesh {sqlmesh_version()} from {SQLMESH_VENV}")
    print(bytecode_note())
    with tempfile.TemporaryDirectory(prefix="bench_explain_") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        project = generate(work / "project", args.models)
        copy = sqlmesh_copy(project, work / "sqlmesh_project")
        print(f"# {args.models}-model project in {project}, SQLMesh's copy in {copy}")
        for i in range(args.rounds):
            one_round(project, copy, work, args.models, table)
            done = ", ".join(f"{s.label} {s.seconds[-1]:.2f}s" for s in table.values())
            print(f"round {i + 1}/{args.rounds}: {done}", flush=True)
    report(args.models, args.rounds, table)


if __name__ == "__main__":
    main()
