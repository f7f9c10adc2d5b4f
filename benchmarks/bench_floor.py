"""The floor benchmark (issue 23): how far our first apply and daily run of the issue-9 project
(benchmarks/gen_first_apply.py: a seed, 15 INCREMENTAL_BY_TIME_RANGE, 8 FULL and 6 VIEW models)
are from what Spark itself needs for the same work.

Why: a ratio to SQLMesh (bench_first_apply.py) says whether we are slower than another tool, not
where the time goes nor how much of it could go at all. The floor is that bound: the statements
any tool must issue for this project, taken from our own trace and replayed by hand, one after
the other, in one warm Spark session with no Python between them. What we spend above it is ours:
catalog look-ups, query analyses, DESCRIBEs, Python, JVM start.

    python benchmarks/bench_floor.py [--concurrent-tasks 1] [--warmup-rounds 3] [--keep DIR] [--connect]

For each of the first apply (`plan --auto-apply --skip-tests --execution-time 2024-01-31`) and
the daily run after it (`run --execution-time 2024-02-01`) it prints:

- ours: wall time of the `mesh` process, and the time inside Spark per phase, summed from the
  engine's opt-in trace (`MESH_SQL_TRACE`, one line per Spark call: `<seconds>\\t<SQL or
  [catalog call]>`): catalog calls (the bracketed lines), DDL (CREATE, ALTER, DROP), writes
  (INSERT, CTAS staging), analyses and other statements (SELECT, DESCRIBE, SHOW, CACHE); and
  outside Spark = wall - the traced sum (Python, JVM start, the state store). The project is
  generated with `concurrent_tasks: 1` by default so that the traced times add up;
- the floor: the trace's CREATE SCHEMA, CREATE TABLE, CREATE [OR REPLACE] VIEW, INSERT and
  ALTER TABLE ... SET LOCATION statements, replayed in this process on ONE SparkSession built as
  the CLI builds its embedded default (`build_session(SparkConnectionConfig(master='local[*]'),
  <copy>/.mesh)`: local master, Derby Hive metastore and warehouse under the copy's `.mesh`), on
  a copy of the project without its `.mesh` (no table exists yet), after a few rounds of
  throwaway statements that warm the JVM, the metastore and the Parquet writer. The first
  apply's statements are replayed (and timed) first, then the daily run's on the tables they made;
- the ratios ours/floor (wall) and ours inside Spark/floor, and the statement kinds costliest
  in ours next to their floor.

Choices, each a judgement:

- ALTER TABLE ... SET LOCATION is part of the floor: our unpartitioned tables (FULL models, the
  seed) are written as a new generation of files (INSERT OVERWRITE DIRECTORY), which the table
  only holds once it points there; without it downstream models would read empty tables. It is
  one metastore update per write and shows on its own line, for whoever would rather subtract it.
- The seed load is, in our trace, a DataFrame made into a temporary view (a bracketed line) and
  an INSERT OVERWRITE DIRECTORY reading that view. The floor replays that INSERT with the view
  replaced by an inline `VALUES` list of the CSV's rows (ints, doubles as `D` literals, text
  quoted): one SQL statement, the same columns `c0, c1, ...` and casts.
- Generation directories (`__mesh_g<12 hex>`) get fresh suffixes, consistently across the
  INSERT and its ALTER, and the project path is rewritten to the copy's, so every target
  directory is new. Statements on `__mesh_tmp_` objects (staging tables, cached rows) are left
  out: a tool that writes each table once needs none; so is a CREATE repeated word for word
  within one run (a VIEW model's view is defined when created and again when written).
- The trace flattens SQL onto one line (`' '.join(sql.split())`: every run of whitespace
  becomes one space), which is exact for this generated project (no `--` comments, no
  whitespace inside literals); a floor statement with ` --` in it is refused rather than run.

`--connect`: ours runs through the project's warm Spark Connect server (the default since issue
36; without `--connect`, Spark runs in each `mesh` process: the opt-out, MESH_SPARK_SERVER=0). The
server is started first (`mesh spark start`; every `mesh` process of the project is
then its client), warmed with the floor's throwaway statements through a client, and stopped at the
end, also on failure (benchmarks/warm_server.py). The first apply and the daily run are traced as
above: the trace is written by the engine's client side (`SparkStatements.errors`, for classic and
Connect sessions alike), so a Connect call's time includes its gRPC round trip; outside Spark is
then Python and the client's start, no JVM. The floor is replayed twice: as above (one warm
embedded session), and through one client of a warm Connect server of its own (`mesh spark start`
on a second copy, the same settings), which is what any tool using that server pays at least.

The traces (`trace_<run>.tsv`), the replayed statements (`floor_<run>.sql`) and their times
(`floor_<run>.tsv`, in the trace's format; `floor_connect_<run>.*` for the Connect floor) are left
in the work directory (`--keep DIR` keeps it). The machine's load average is printed before and
after: the numbers mean little if something else ran meanwhile. SQLMesh is not run here:
bench_first_apply.py --sqlmesh compares with it.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_first_apply import MESH, run
from gen_first_apply import generate
from warm_server import client, load, mesh_env, served, warm_up

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

FIRST_APPLY = ("first apply", ["plan", "--auto-apply", "--skip-tests", "--execution-time", "2024-01-31"])
DAILY_RUN = ("daily run", ["run", "--execution-time", "2024-02-01"])

CATALOG, DDL, WRITES, OTHER = "catalog", "ddl", "writes", "other"
PHASE_LABELS = {
    CATALOG: "catalog calls ([...] lines)",
    DDL: "DDL (CREATE SCHEMA/TABLE/VIEW, ALTER, DROP)",
    WRITES: "writes (INSERT, CTAS)",
    OTHER: "analyses, other (SELECT, DESCRIBE, SHOW)",
}
FLOOR_KINDS = frozenset({
    "CREATE SCHEMA", "CREATE TABLE", "CREATE VIEW", "CREATE OR REPLACE VIEW",
    "INSERT OVERWRITE TABLE", "INSERT OVERWRITE DIRECTORY", "INSERT INTO", "ALTER TABLE SET LOCATION",
})
TEMP_PREFIX = "__mesh_tmp_"
TEMP_VIEW_SOURCE = re.compile(r"FROM `__mesh_tmp_[0-9a-f]+`$")
GENERATION = re.compile(r"__mesh_g[0-9a-f]{12}")
PROBE = re.compile(r"^SELECT 1 FROM \S+ WHERE .* LIMIT 1$", re.IGNORECASE)
CTAS = re.compile(r"^CREATE TABLE (IF NOT EXISTS )?\S+ USING \w+ AS ", re.IGNORECASE)


@dataclass(frozen=True)
class Call:
    """One traced (ours) or replayed (floor) call to Spark: its seconds and its text."""

    seconds: float
    what: str

    @property
    def kind(self) -> str:
        return kind_of(self.what)


@dataclass(frozen=True)
class Ours:
    """One `mesh` command: its wall time and the Spark calls its trace recorded."""

    wall: float
    calls: list[Call]

    @property
    def inside(self) -> float:
        return sum(c.seconds for c in self.calls)


# -- the trace ---------------------------------------------------------------------------------------------


def kind_of(what: str) -> str:
    """`INSERT OVERWRITE TABLE`, `ALTER TABLE SET LOCATION`, `[Cannot look up]`: the call without its names."""
    if what.startswith("["):
        plain = itertools.takewhile(lambda w: not any(ch in w for ch in "./:_`'"), what.strip("[]").split())
        return "[" + " ".join(plain) + "]"
    words = what.upper().split()
    if not words:
        return "(empty)"
    if words[0] == "SELECT":
        return "SELECT 1 ... LIMIT 1 (probe)" if PROBE.match(what) else "SELECT (analysis or query)"
    if words[0] == "ALTER":
        return " ".join(["ALTER", *words[1:2], *words[3:5]])
    if CTAS.match(what):
        return "CREATE TABLE AS SELECT"
    keywords = itertools.takewhile(lambda w: w.isalpha() and w != "IF", words)
    return " ".join(list(keywords)[:4])


def phase_of(kind: str) -> str:
    if kind.startswith("["):
        return CATALOG
    first = kind.split(" ", 1)[0]
    if first == "INSERT" or kind == "CREATE TABLE AS SELECT":
        return WRITES
    if first in ("CREATE", "ALTER", "DROP", "TRUNCATE"):
        return DDL
    return OTHER


def read_trace(path: Path) -> list[Call]:
    """`<seconds>\\t<flattened SQL or [description]>` lines (statements.py's `_append_trace`)."""
    if not path.exists():
        return []
    calls = []
    for line in path.read_text(encoding="utf-8").splitlines():
        seconds, _, what = line.partition("\t")
        calls.append(Call(float(seconds), what))
    return calls


def run_ours(project: Path, trace: Path, command: Sequence[str], embedded: bool = False) -> Ours:
    """Run one `mesh` command on the project with the trace on; its wall time and calls. `embedded`:
    Spark in the command's own process (the opt-out), else the project's warm server (the default)."""
    trace.unlink(missing_ok=True)
    env = mesh_env()
    env["MESH_SQL_TRACE"] = str(trace)
    if embedded:
        env["MESH_SPARK_SERVER"] = "0"
    wall, _ = run([*MESH, "-p", str(project), *command], project.parent, env)
    return Ours(wall, read_trace(trace))


# -- the floor's statements --------------------------------------------------------------------------------


class Relocate:
    """Statements of the project at `old`, for its copy at `new`: paths rewritten, and each
    generation suffix replaced by a fresh one (the same one wherever the old one appears)."""

    def __init__(self, old: Path, new: Path) -> None:
        self.old, self.new = str(old), str(new)
        self._generations: dict[str, str] = {}

    def __call__(self, sql: str) -> str:
        relocated = GENERATION.sub(self._fresh, sql.replace(self.old, self.new))
        if ("DIRECTORY" in relocated or "SET LOCATION" in relocated) and self.new not in relocated:
            raise SystemExit(f"A location outside the project, which the floor cannot replay: {sql[:300]}")
        return relocated

    def _fresh(self, match: re.Match[str]) -> str:
        return self._generations.setdefault(match.group(0), f"__mesh_g{uuid.uuid4().hex[:12]}")


def sql_literal(text: str) -> str:
    """A CSV value as the literal the product's seed frame sends: integer, double or text."""
    if re.fullmatch(r"-?\d+", text):
        return text
    try:
        float(text)
    except ValueError:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"{text}D"


def seed_source(seed_csv: Path) -> str:
    """`FROM VALUES (...), ... AS _seed(c0, c1, ...)`: the seed's rows, in the columns the
    product's temporary view has (`c<i>` for the i-th column, here the CSV's order)."""
    with seed_csv.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], [r for r in rows[1:] if r]
    values = ", ".join("(" + ", ".join(sql_literal(v) for v in row) + ")" for row in body)
    names = ", ".join(f"`c{i}`" for i in range(len(header)))
    return f"FROM VALUES {values} AS `_seed`({names})"


def floor_statements(calls: Sequence[Call], seed_csv: Path, relocate: Relocate) -> list[str]:
    """The statements any tool must issue, from our trace (see the module's docstring). A CREATE
    repeated word for word within the run (a view defined when created and again when written)
    is issued once."""
    statements: list[str] = []
    created: set[str] = set()
    for call in calls:
        if call.kind not in FLOOR_KINDS:
            continue
        sql = call.what
        if TEMP_VIEW_SOURCE.search(sql) and sql.upper().startswith("INSERT") and "`c0`" in sql:
            sql = TEMP_VIEW_SOURCE.sub(lambda _: seed_source(seed_csv), sql)  # the seed's rows
        elif TEMP_PREFIX in sql:
            continue  # staging: a tool writing each table once has none
        if sql.upper().startswith("CREATE"):
            if sql in created:
                continue
            created.add(sql)
        if " --" in sql:
            raise SystemExit(f"A comment in a flattened statement would swallow its rest: {sql[:300]}")
        statements.append(relocate(sql))
    return statements


def only_seed(project: Path) -> Path:
    seeds = sorted((project / "seeds").glob("*.csv"))
    if len(seeds) != 1:
        raise SystemExit(f"Expected one seed CSV in {project / 'seeds'}, found {len(seeds)}")
    return seeds[0]


# -- replaying them ----------------------------------------------------------------------------------------


def floor_session(copy: Path, concurrent_tasks: int) -> SparkSession:
    """The session the CLI builds for the generated config (embedded: `connect_server.project_session`
    ends in `build_session(conn, project.mesh_dir)` for a local master and no shared server)."""
    from mesh_dagster.core.config.connections import SparkConnectionConfig  # deliberately lazy: Spark
    from mesh_dagster.engine.session import build_session  # starts only once ours has finished

    conn = SparkConnectionConfig(master="local[*]", concurrent_tasks=concurrent_tasks)
    return build_session(conn, copy / ".mesh")


def replay(spark: SparkSession | ConnectSession, statements: Sequence[str]) -> list[Call]:
    """Each statement timed alone, back to back: nothing but this loop between them."""
    timed = []
    clock = time.perf_counter
    for i, sql in enumerate(statements):
        began = clock()
        try:
            spark.sql(sql)
        except Exception as e:  # noqa: BLE001 - any failure ends the benchmark, naming the statement
            raise SystemExit(f"floor statement {i + 1}/{len(statements)} failed: {e}\n{sql[:500]}") from e
        timed.append(Call(clock() - began, sql))
    return timed


def floor_copy(project: Path, copy: Path, runs: dict[str, list[Call]], label: str) -> list[list[str]]:
    """A copy of the project without its `.mesh` (no table exists yet) and each run's floor
    statements for it, written beside it (`<label>_<run>.sql`) for a look or a replay by hand."""
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".mesh"))
    relocate, seed_csv = Relocate(project, copy), only_seed(copy)
    per_run = [floor_statements(calls, seed_csv, relocate) for calls in runs.values()]
    for name, statements in zip(runs, per_run):
        sql_file = copy.parent / f"{label}_{name.replace(' ', '_')}.sql"
        sql_file.write_text("".join(f"{s};\n" for s in statements), encoding="utf-8")
    return per_run


def write_floors(work: Path, label: str, runs: Sequence[str], floors: Sequence[Sequence[Call]]) -> None:
    """`<label>_<run>.tsv`, in the trace's format, to compare call by call."""
    for name, timed in zip(runs, floors):
        trace = work / f"{label}_{name.replace(' ', '_')}.tsv"
        trace.write_text("".join(f"{c.seconds:.4f}\t{c.what}\n" for c in timed), encoding="utf-8")


def measure_floor(project: Path, copy: Path, runs: dict[str, list[Call]], warmup_rounds: int,
                  concurrent_tasks: int) -> list[list[Call]]:
    """Replay each run's floor, in order, in one warm embedded session on a copy of the project."""
    per_run = floor_copy(project, copy, runs, "floor")
    spark = floor_session(copy, concurrent_tasks)
    try:
        warm_up(spark, copy / ".mesh" / "warehouse", warmup_rounds)
        floors = [replay(spark, statements) for statements in per_run]
    finally:
        spark.stop()
    write_floors(copy.parent, "floor", list(runs), floors)
    return floors


def measure_connect_floor(project: Path, copy: Path, runs: dict[str, list[Call]],
                          warmup_rounds: int) -> list[list[Call]]:
    """The same floor through one client of a warm Connect server: the copy's own server (`mesh
    spark start` on the copy, the project's settings), warmed as the project's was. Each statement
    then pays what any Connect client pays (gRPC, the server's session), and nothing of ours."""
    per_run = floor_copy(project, copy, runs, "floor_connect")
    with served(copy, warmup_rounds) as server:
        print(f"floor's Connect server: started in {server.start_s:.1f} s, warmed in {server.warm_s:.1f} s", flush=True)
        spark = client(copy)
        try:
            floors = [replay(spark, statements) for statements in per_run]
        finally:
            spark.stop()
    write_floors(copy.parent, "floor_connect", list(runs), floors)
    return floors


# -- the report --------------------------------------------------------------------------------------------


def by_kind(calls: Sequence[Call]) -> dict[str, tuple[float, int]]:
    totals: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        totals[call.kind].append(call.seconds)
    return {kind: (sum(times), len(times)) for kind, times in totals.items()}


def row(label: str, seconds: float | None, calls: int | None = None, note: str = "") -> str:
    secs = "" if seconds is None else f"{seconds:.1f}"
    count = "" if calls is None else str(calls)
    return f"  {label:<46}{secs:>9}{count:>8}  {note}".rstrip()


def report(title: str, command: Sequence[str], ours: Ours, floor: Sequence[Call],
           connect_floor: Sequence[Call] | None = None) -> None:
    """One table: ours (wall, per phase inside Spark, outside), the floor, the ratios; with
    `connect_floor` (--connect) also that floor and the ratios to it."""
    print(f"\n== {title}: mesh {' '.join(command)} ==")
    print(f"  {'':<46}{'seconds':>9}{'calls':>8}")
    print(row("ours: wall", ours.wall))
    if not ours.calls:
        print("  (no statement trace: wall time only)")
        return
    print(row("ours: inside Spark (traced)", ours.inside, len(ours.calls)))
    phases: dict[str, list[float]] = {p: [] for p in PHASE_LABELS}
    for call in ours.calls:
        phases[phase_of(call.kind)].append(call.seconds)
    for phase, label in PHASE_LABELS.items():
        print(row(f"  {label}", sum(phases[phase]), len(phases[phase])))
    slowest = max(ours.calls, key=lambda c: c.seconds)
    print(row(f"  slowest call: {slowest.kind[:30]}", slowest.seconds, note=f"(call {ours.calls.index(slowest) + 1})"))
    start = "client start" if connect_floor is not None else "JVM start"
    print(row(f"ours: outside Spark (Python, {start})", ours.wall - ours.inside))
    floors = [("floor: replayed in one warm session", "", floor)]
    if connect_floor is not None:
        floors.append(("floor: through a warm Connect server", " (Connect floor)", connect_floor))
    for label, suffix, calls in floors:
        total = sum(c.seconds for c in calls)
        print(row(label, total, len(calls)))
        for kind, (secs, n) in sorted(by_kind(calls).items(), key=lambda kv: -kv[1][0]):
            print(row(f"  {kind}", secs, n))
        if total > 0:
            print(f"  {'ratio ours/floor, wall' + suffix:<46}{ours.wall / total:>9.1f}x")
            print(f"  {'ratio ours inside Spark/floor' + suffix:<46}{ours.inside / total:>9.1f}x")
    print_costliest(ours.calls, floor)


def print_costliest(ours: Sequence[Call], floor: Sequence[Call], top: int = 10) -> None:
    """Call kinds by time in ours, with what the floor spends on the same kind (none: pure overhead)."""
    mine, base = by_kind(ours), by_kind(floor)
    print(f"  costliest call kinds in ours{'':<18}{'ours s':>9}{'calls':>8}  floor s (calls)")
    for kind, (secs, n) in sorted(mine.items(), key=lambda kv: -kv[1][0])[:top]:
        floor_secs, floor_n = base.get(kind, (0.0, 0))
        note = f"{floor_secs:.1f} ({floor_n})" if floor_n else "-"
        print(row(f"  {kind[:44]}", secs, n, note))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--concurrent-tasks", type=int, default=1,
                        help="the connection's concurrent_tasks (default 1: traced times add up)")
    parser.add_argument("--warmup-rounds", type=int, default=3, help="rounds of throwaway statements before the floor")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument("--connect", action="store_true",
                        help="run ours through the project's Connect server, started and warmed first")
    return parser.parse_args()


def run_pair(project: Path, work: Path, embedded: bool = False) -> list[Ours]:
    """The first apply, then the daily run, each traced."""
    results = []
    for name, command in (FIRST_APPLY, DAILY_RUN):
        results.append(run_ours(project, work / f"trace_{name.replace(' ', '_')}.tsv", command, embedded))
        print(f"ours, {name}: {results[-1].wall:.1f} s ({len(results[-1].calls)} traced calls)", flush=True)
    return results


def main() -> None:
    args = parse_args()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_floor_") as tmp:
        work = (args.keep or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        project = generate(work / "mesh_project", "mesh", concurrent_tasks=args.concurrent_tasks).resolve()
        print(f"project {project} (concurrent_tasks {args.concurrent_tasks}, {os.cpu_count()} CPUs, "
              f"{load()})", flush=True)
        if args.connect:
            with served(project, args.warmup_rounds) as server:
                print(f"the project's Connect server: `mesh spark start` {server.start_s:.1f} s, "
                      f"warm-up {server.warm_s:.1f} s", flush=True)
                results = run_pair(project, work)
        else:
            results = run_pair(project, work, embedded=True)
        runs = {FIRST_APPLY[0]: results[0].calls, DAILY_RUN[0]: results[1].calls}
        floors = measure_floor(project, work / "floor_project", runs, args.warmup_rounds, args.concurrent_tasks)
        connect_floors: list[list[Call] | None] = [None, None]
        if args.connect:
            connect_floors = [*measure_connect_floor(project, work / "floor_project_connect", runs, args.warmup_rounds)]
        mode = " - Connect (warm server)" if args.connect else " - embedded"
        for (name, command), ours, floor, connect_floor in zip((FIRST_APPLY, DAILY_RUN), results, floors,
                                                              connect_floors):
            report(name + mode, command, ours, floor, connect_floor)
    print(f"\nbenchmark took {time.perf_counter() - began:.1f} s ({load()})")


if __name__ == "__main__":
    main()
