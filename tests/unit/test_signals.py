"""Signals without Spark: `@signal` functions in signals/ are loaded and every model's references
checked when the project loads (file:line errors), and readiness cuts backfills down to what the
signals let through — the subset they return, their parents' waits, a model's past, timeless kinds —
with a clear error when a signal raises or answers nonsense."""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.plan.backfills import ALL_TIME, Backfill
from mesh_dagster.core.project.project import Project, load_project
from mesh_dagster.core.project.signals import USER_SIGNALS_PACKAGE, SignalError
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.events import LogLines
from mesh_dagster.execution.intervals.readiness import Readiness, check_readiness
from tests.unit import signal_calls

SIGNALS = '''
from datetime import date, datetime, UTC

from mesh_dagster import signal
from tests.unit.signal_calls import CALLS


@signal()
def ready_before(batch, until: str, execution_time):
    """Ready: every interval ending by `until` (a date)."""
    CALLS.append(("ready_before", list(batch), execution_time))
    limit = datetime.fromisoformat(until).replace(tzinfo=UTC)
    return [(start, end) for start, end in batch if end <= limit]


@signal
def flag(batch, value: bool):
    CALLS.append(("flag", list(batch), None))
    return value


@signal(name="Not_On")
def skip_day(batch, day: date):
    skipped = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return [(s, e) for s, e in batch if s != skipped]


@signal()
def as_epoch_ms(batch):
    return [(int(s.timestamp() * 1000), int(e.timestamp() * 1000)) for s, e in batch[:1]]


@signal()
def typed(batch, n: int, names: list[str], since: date = date(2020, 1, 1)):
    return True


@signal()
def nonsense(batch):
    return "yes"


@signal()
def boom(batch):
    raise RuntimeError("the landing bucket is unreachable")


@signal()
def wants_spark(batch, spark):
    return spark is not None
'''

MORE = '''
from mesh_dagster import signal

from .helpers import ALWAYS


@signal()
def always(batch):
    return ALWAYS
'''


def incremental(name: str, signals: str = "", sources: str = "", extra: str = "", cron: str = "") -> str:
    props = f",\n  signals ({signals})" if signals else ""
    props += f",\n  cron '{cron}'" if cron else ""
    source = f" FROM {sources} WHERE ds BETWEEN @start_ds AND @end_ds" if sources else ""
    return (f"MODEL (\n  name {name},\n  kind INCREMENTAL_BY_TIME_RANGE (time_column ds{extra}){props}\n);\n\n"
            f"SELECT 1 AS id, CAST('2020-01-01' AS DATE) AS ds{source}\n")


def project(tmp_path: Path, models: dict[str, str], signals: str | None = SIGNALS,
            files: dict[str, str] | None = None) -> Project:
    """A project of SQL models (name -> text), `signals/__init__.py` and other `files`, loaded."""
    all_files = {f"models/{name}.sql": text for name, text in models.items()}
    if signals is not None:
        all_files["signals/__init__.py"] = signals
    all_files.update(files or {})
    root = write_project(tmp_path / f"p{len(list(tmp_path.iterdir()))}", all_files)
    return load_project(root, use_cache=False)


def signals_line(text: str) -> int:
    """The line of `text` in signals/__init__.py as written (write_project strips leading blank lines)."""
    return SIGNALS.lstrip().splitlines().index(text) + 1


def calls() -> list[tuple]:
    return signal_calls.CALLS


def ms(text: str) -> int:
    return to_ms(text)


def days(start: str, end: str) -> tuple[int, int]:
    return (ms(start), ms(end))


def readiness(p: Project, backfills: dict[str, list[tuple[int, int]]], execution: str = "2020-01-06", *,
              full: tuple[str, ...] = (), clear: tuple[str, ...] = (), spark=None) -> Readiness:
    snapshots = build_snapshots(p)
    planned = {name: Backfill(name, intervals, name in full, clear=name in clear)
               for name, intervals in backfills.items()}
    return check_readiness(p.signals, snapshots, planned, p.dag.sorted(), ms(execution), spark=spark)


def waits(r: Readiness) -> list[tuple[str, list[tuple[int, int]], str]]:
    return [(w.name, w.intervals, w.reason) for w in r.waits]


# ---------------------------------------------------------------------------------------------
# Loading


def test_signals_load_from_the_package_and_its_files_in_every_decorator_form(tmp_path: Path) -> None:
    p = project(tmp_path, {"m": incremental("s.m", "always, not_on(day := '2020-01-02')")},
                files={"signals/more.py": MORE, "signals/helpers.py": "ALWAYS = True\n"})
    assert p.signals.names() == ["always", "as_epoch_ms", "boom", "flag", "nonsense", "not_on", "ready_before",
                                 "typed", "wants_spark"]
    assert p.signals.get("always").path == "signals/more.py"
    assert p.signals.get("ready_before").takes_execution_time
    assert p.signals.get("wants_spark").takes_spark


def test_arguments_are_converted_by_annotation_at_load(tmp_path: Path) -> None:
    p = project(tmp_path, {"m": incremental("s.m", "typed(N := 3, names := ['a', b])")})
    [bound] = p.signals.bind(p.models["s.m"])
    assert bound.kwargs == {"n": 3, "names": ["a", "b"]}


def test_python_models_signals_are_checked_too(tmp_path: Path) -> None:
    model = ('import pandas as pd\nfrom mesh_dagster import model\n\n\n@model("s.py", columns={"id": "int"},\n'
             '       signals=["typed(n := 1, names := [a], oops := 2)"])\n'
             'def execute(context, start, end, execution_time):\n    return pd.DataFrame({"id": [1]})\n')
    with pytest.raises(ModelError) as e:
        project(tmp_path, {}, files={"models/py.py": model})
    assert str(e.value).startswith("models/py.py:6: Signal typed of model s.py has no argument 'oops' (its arguments: "
                                   "n, names, since; defined at signals/__init__.py:")


def test_python_models_take_sqlmeshs_name_and_arguments_pairs(tmp_path: Path) -> None:
    """`signals=[("typed", {"n": 3, "names": [to_column("a"), "b"]})]`, as SQLMesh documents it: Python
    values are SQL literals (a date string stays that string, not `2024 - 01 - 04`), sqlglot
    expressions stay expressions."""
    model = ('import pandas as pd\nfrom sqlglot.expressions import to_column\nfrom mesh_dagster import model\n\n\n'
             '@model("s.py", columns={"id": "int"}, kind="FULL",\n'
             '       signals=[("typed", {"n": 3, "names": [to_column("a"), "b"], "since": "2024-01-04"}),\n'
             '                ("flag", {"value": True}), ("ready_before", {"until": "2024-01-04"})])\n'
             'def execute(context, start, end, execution_time):\n    return pd.DataFrame({"id": [1]})\n')
    p = project(tmp_path, {}, files={"models/py.py": model})
    assert [s.describe() for s in p.models["s.py"].signals][2] == "ready_before(until := '2024-01-04')"
    typed, flag, ready = p.signals.bind(p.models["s.py"])
    assert typed.kwargs == {"n": 3, "names": ["a", "b"], "since": date(2024, 1, 4)}
    assert (flag.kwargs, ready.kwargs) == ({"value": True}, {"until": "2024-01-04"})


@pytest.mark.parametrize(("written", "message"), [
    ("ready_befor(until := '2020-01-03')", "Model s.m uses unknown signal 'ready_befor'. Did you mean ready_before?"),
    ("zzz", "Model s.m uses unknown signal 'zzz' (signals defined: as_epoch_ms, boom, flag, nonsense, not_on, "
            "ready_before, typed, wants_spark)"),
    ("ready_before(until := '2020-01-03', extra := 1)", "Signal ready_before of model s.m has no argument 'extra' "
                                                        "(its arguments: until; defined at signals/__init__.py:"),
    ("ready_before()", "Signal ready_before of model s.m is missing argument 'until' "
                       "(write `ready_before(until := ...)`)"),
    ("typed(n := 'many', names := [a])", "Signal typed of model s.m: argument 'n' expected int, got `'many'`"),
    ("typed(n := 1, names := [a], since := 'soon')",
     "Signal typed of model s.m: argument 'since' expected date ('YYYY-MM-DD'), got `'soon'`"),
    ("flag(value := 1 2)", "Signal flag of model s.m: argument 'value' is not a SQL value"),
    ("ready_before(until := '2020-01-03', execution_time := 1)",
     "Signal ready_before of model s.m: argument 'execution_time' is given by the scheduler; do not write it"),
])
def test_a_reference_that_does_not_fit_is_an_error_at_the_models_line(tmp_path: Path, written: str,
                                                                     message: str) -> None:
    text = f"MODEL (\n  name s.m,\n  kind FULL,\n  signals (\n    flag(value := true),\n    {written}\n  )\n);\nSELECT 1 AS a\n"
    with pytest.raises(ModelError) as e:
        project(tmp_path, {"m": text})
    assert str(e.value).startswith(f"models/m.sql:6: {message}"), str(e.value)


def test_a_project_without_signals_says_so(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as e:
        project(tmp_path, {"m": incremental("s.m", "landed")}, signals=None)
    assert str(e.value) == ("models/m.sql:4: Model s.m uses unknown signal 'landed' "
                            "(the project's signals/ folder defines none)")


def test_an_import_error_in_a_signal_file_names_the_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as e:
        project(tmp_path, {}, files={"signals/bad.py": "import math\n\nx = math.sqrt(-1)\n"})
    assert str(e.value) == "signals/bad.py:3: Cannot import signals: ValueError: math domain error"
    assert USER_SIGNALS_PACKAGE not in sys.modules


def test_signals_are_forgotten_between_projects(tmp_path: Path) -> None:
    project(tmp_path, {"m": incremental("s.m", "always")}, files={"signals/more.py": MORE, "signals/helpers.py": "ALWAYS = 1\n"})
    assert f"{USER_SIGNALS_PACKAGE}.more" in sys.modules
    with pytest.raises(ModelError, match=r"uses unknown signal 'always' \(signals defined: as_epoch_ms, boom"):
        project(tmp_path, {"m": incremental("s.m", "always")})
    assert f"{USER_SIGNALS_PACKAGE}.more" not in sys.modules
    project(tmp_path, {}, signals=None)
    assert USER_SIGNALS_PACKAGE not in sys.modules


def test_a_signal_defined_twice_or_without_a_batch_parameter_is_refused(tmp_path: Path) -> None:
    twice = "from mesh_dagster import signal\n\n\n@signal(name='flag')\ndef other(batch):\n    return True\n"
    with pytest.raises(ModelError) as e:
        project(tmp_path, {}, files={"signals/twice.py": twice})
    assert str(e.value) == (f"signals/twice.py:4: Signal 'flag' is defined twice (also in signals/__init__.py:"
                            f"{signals_line('def flag(batch, value: bool):') - 1})")  # its decorator's line
    no_batch = "from mesh_dagster import signal\n\n\n@signal()\ndef lonely(*, n: int = 1):\n    return True\n"
    with pytest.raises(ModelError) as e:
        project(tmp_path, {}, signals=no_batch)
    assert str(e.value) == ("signals/__init__.py:4: Signal 'lonely' must take the batch of intervals as its first "
                            "parameter (`def lonely(batch, ...)`)")


def test_embedded_models_cannot_have_signals(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as e:
        project(tmp_path, {"m": "MODEL (\n  name s.m,\n  kind EMBEDDED,\n  signals (flag(value := true))\n);\n"
                                "SELECT 1 AS a\n"})
    assert str(e.value) == "models/m.sql:4: EMBEDDED models cannot have signals: they are never computed"


# ---------------------------------------------------------------------------------------------
# Readiness


def test_the_ready_subset_is_kept_and_children_drop_what_overlaps_their_parents_wait(tmp_path: Path) -> None:
    p = project(tmp_path, {
        "a": incremental("s.a", "ready_before(until := '2020-01-03')"),
        "b": incremental("s.b", sources="s.a"),
        "h": incremental("s.h", sources="s.a", cron="@hourly"),
        "other": incremental("s.other"),
    })
    hours = days("2020-01-02 20:00", "2020-01-03 04:00")
    r = readiness(p, {"s.a": [days("2020-01-01", "2020-01-06")], "s.b": [days("2020-01-01", "2020-01-06")],
                      "s.h": [hours], "s.other": [days("2020-01-01", "2020-01-06")]})
    assert {n: bf.intervals for n, bf in r.backfills.items()} == {
        "s.a": [days("2020-01-01", "2020-01-03")],
        "s.b": [days("2020-01-01", "2020-01-03")],
        "s.h": [days("2020-01-02 20:00", "2020-01-03")],
        "s.other": [days("2020-01-01", "2020-01-06")],
    }
    assert sorted(waits(r)) == [
        ("s.a", [days("2020-01-03", "2020-01-06")], "signal ready_before(until := '2020-01-03')"),
        ("s.b", [days("2020-01-03", "2020-01-06")], "upstream s.a"),
        ("s.h", [days("2020-01-03", "2020-01-03 04:00")], "upstream s.a"),
    ]
    log = LogLines()
    r.report(log, lambda n: n.replace("s.", "s__dev."))
    lines = log.lines
    assert lines[0] == "s__dev.a: waiting for signal ready_before(until := '2020-01-03') (2020-01-03 - 2020-01-05)"
    assert "s__dev.h: waiting for upstream s.a (2020-01-03 00:00:00 - 2020-01-03 03:59:59)" in lines


def test_signals_get_the_scheduler_batches_as_utc_datetimes_and_the_execution_time(tmp_path: Path) -> None:
    p = project(tmp_path, {"a": incremental("s.a", "ready_before(until := '2030-01-01')", extra=", batch_size 2")})
    calls().clear()
    readiness(p, {"s.a": [days("2020-01-01", "2020-01-04"), days("2020-01-05", "2020-01-07")]},
              execution="2020-01-07 06:30")
    batches = [batch for _, batch, _ in calls()]
    day = [datetime(2020, 1, d, tzinfo=UTC) for d in range(1, 8)]
    assert batches == [[(day[0], day[1]), (day[1], day[2])], [(day[2], day[3])], [(day[4], day[5]), (day[5], day[6])]]
    assert {when for _, _, when in calls()} == {datetime(2020, 1, 7, 6, 30, tzinfo=UTC)}
    assert all(d.tzinfo is UTC for batch in batches for pair in batch for d in pair)


def test_a_bool_answers_for_the_whole_batch_and_every_signal_must_pass(tmp_path: Path) -> None:
    p = project(tmp_path, {
        "yes": incremental("s.yes", "flag(value := true)"),
        "no": incremental("s.no", "flag(value := false)"),
        "both": incremental("s.both", "flag(value := true), ready_before(until := '2020-01-02')"),
    })
    r = readiness(p, {name: [days("2020-01-01", "2020-01-03")] for name in ("s.yes", "s.no", "s.both")})
    assert {n: bf.intervals for n, bf in r.backfills.items()} == {
        "s.yes": [days("2020-01-01", "2020-01-03")], "s.both": [days("2020-01-01", "2020-01-02")]}
    assert sorted(r.waiting) == ["s.both", "s.no"]


def test_ranges_may_be_epoch_milliseconds(tmp_path: Path) -> None:
    p = project(tmp_path, {"a": incremental("s.a", "as_epoch_ms")})
    r = readiness(p, {"s.a": [days("2020-01-01", "2020-01-04")]})
    assert r.backfills["s.a"].intervals == [days("2020-01-01", "2020-01-02")]


def test_a_model_that_depends_on_its_past_stops_at_its_first_waiting_interval(tmp_path: Path) -> None:
    history = ("MODEL (\n  name s.hist,\n  kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id),\n"
               "  signals (not_on(day := '2020-01-02'))\n);\n\nSELECT 1 AS id, CAST('2020-01-01' AS DATE) AS ds\n")
    p = project(tmp_path, {"hist": history, "plain": incremental("s.plain", "not_on(day := '2020-01-02')")})
    span = [days("2020-01-01", "2020-01-05")]
    r = readiness(p, {"s.hist": span, "s.plain": span})
    assert r.backfills["s.hist"].intervals == [days("2020-01-01", "2020-01-02")]
    assert r.backfills["s.plain"].intervals == [days("2020-01-01", "2020-01-02"), days("2020-01-03", "2020-01-05")]
    assert [w for w in waits(r) if w[0] == "s.hist"] == [
        ("s.hist", [days("2020-01-02", "2020-01-03")], "signal not_on(day := '2020-01-02')"),
        ("s.hist", [days("2020-01-03", "2020-01-05")], "its earlier intervals"),
    ]


def test_a_full_refresh_waits_from_its_first_waiting_interval_and_a_rebuild_waits_whole(tmp_path: Path) -> None:
    full = "MODEL (\n  name s.full,\n  kind FULL,\n  signals (not_on(day := '2020-01-03'))\n);\nSELECT 1 AS a\n"
    p = project(tmp_path, {"full": full, "plain": incremental("s.plain", "not_on(day := '2020-01-03')")})
    span = [days("2020-01-01", "2020-01-05")]
    r = readiness(p, {"s.full": span, "s.plain": span}, full=("s.full",), clear=("s.plain",))
    assert r.backfills["s.full"].intervals == [days("2020-01-01", "2020-01-03")]
    assert r.backfills["s.full"].full_refresh
    assert "s.plain" not in r.backfills
    assert ("s.plain", [days("2020-01-01", "2020-01-03"), days("2020-01-04", "2020-01-05")],
            "the rest of its rebuild") in waits(r)


def test_a_timeless_model_is_asked_about_its_last_complete_interval_and_its_children_wait_whole(
        tmp_path: Path) -> None:
    view = "MODEL (\n  name s.v,\n  kind VIEW,\n  signals (flag(value := false))\n);\nSELECT 1 AS id\n"
    p = project(tmp_path, {"v": view, "c": incremental("s.c", sources="s.v"), "free": incremental("s.free")})
    calls().clear()
    r = readiness(p, {"s.v": [ALL_TIME], "s.c": [days("2020-01-01", "2020-01-03")],
                      "s.free": [days("2020-01-01", "2020-01-03")]}, execution="2020-01-06 12:00")
    assert calls() == [("flag", [(datetime(2020, 1, 5, tzinfo=UTC), datetime(2020, 1, 6, tzinfo=UTC))], None)]
    assert sorted(r.backfills) == ["s.free"]
    assert waits(r) == [("s.v", [days("2020-01-05", "2020-01-06")], "signal flag(value := false)"),
                        ("s.c", [days("2020-01-01", "2020-01-03")], "upstream s.v")]


def test_a_model_with_nothing_left_is_skipped_and_one_without_signals_is_untouched(tmp_path: Path) -> None:
    p = project(tmp_path, {"a": incremental("s.a", "flag(value := false)"), "b": incremental("s.b")})
    original = Backfill("s.b", [days("2020-01-01", "2020-01-03")], False)
    r = check_readiness(p.signals, build_snapshots(p), {"s.a": Backfill("s.a", [days("2020-01-01", "2020-01-03")],
                                                                        False), "s.b": original},
                        p.dag.sorted(), ms("2020-01-06"))
    assert r.backfills == {"s.b": original}
    assert r.backfills["s.b"] is original


def test_a_bad_answer_names_the_signal_and_the_model(tmp_path: Path) -> None:
    p = project(tmp_path, {"a": incremental("s.a", "nonsense")})
    with pytest.raises(SignalError) as e:
        readiness(p, {"s.a": [days("2020-01-01", "2020-01-03")]})
    assert str(e.value).startswith("signals/__init__.py:")
    assert str(e.value).endswith("Signal nonsense() of model s.a returned 'yes': a signal returns True, False, or "
                                 "the ready (start, end) ranges of its batch (datetimes or epoch milliseconds)")


def test_a_raising_signal_is_one_line_at_the_signals_file_and_line(tmp_path: Path) -> None:
    p = project(tmp_path, {"a": incremental("s.a", "boom")})
    line = signals_line('    raise RuntimeError("the landing bucket is unreachable")')
    with pytest.raises(SignalError) as e:
        readiness(p, {"s.a": [days("2020-01-01", "2020-01-03")]})
    assert str(e.value) == (f"signals/__init__.py:{line}: Signal boom() of model s.a failed: RuntimeError: "
                            "the landing bucket is unreachable")


def test_a_signal_asking_for_spark_gets_it_or_a_clear_error(tmp_path: Path) -> None:
    p = project(tmp_path, {"a": incremental("s.a", "wants_spark")})
    span = {"s.a": [days("2020-01-01", "2020-01-03")]}
    assert readiness(p, span, spark=lambda: "a session").backfills["s.a"].intervals == span["s.a"]
    with pytest.raises(SignalError, match=r"Signal wants_spark\(\) of model s.a takes `spark`, but no SparkSession "
                                          r"is available here"):
        readiness(p, span, spark=lambda: None)


def test_a_stored_model_keeps_the_signal_it_was_planned_with(tmp_path: Path) -> None:
    old = project(tmp_path, {"a": incremental("s.a", "flag(value := false)")})
    snapshots = build_snapshots(old)
    new = project(tmp_path, {"a": incremental("s.a")}, signals="")  # the project no longer has it
    wanted = {"s.a": Backfill("s.a", [days("2020-01-01", "2020-01-02")], False)}
    r = check_readiness(new.signals, snapshots, wanted, ["s.a"], ms("2020-01-06"))
    assert r.backfills == {} and waits(r) == [("s.a", [days("2020-01-01", "2020-01-02")], "signal flag(value := false)")]


def test_a_snapshot_stored_before_captures_whose_signal_the_project_lost_is_an_error(tmp_path: Path) -> None:
    old = project(tmp_path, {"a": incremental("s.a", "flag(value := true)")})
    snapshots = {n: s.model_copy(update={"capture": None}) for n, s in build_snapshots(old).items()}
    new = project(tmp_path, {"a": incremental("s.a")}, signals="")
    with pytest.raises(ModelError, match="Model s.a uses unknown signal 'flag'"):
        check_readiness(new.signals, snapshots, {"s.a": Backfill("s.a", [days("2020-01-01", "2020-01-02")], False)},
                        ["s.a"], ms("2020-01-06"))
