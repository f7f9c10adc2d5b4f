"""A development plan's data diff without Spark: which models are diffed, the bounds of
`plan.data_diff` (max_rows samples keys, sample_rows limits the rows shown, timeout_s stops
starting queries, enabled: false reads nothing), a failing query never fails anything, and what a
reviewer reads. The numbers on real data: tests/spark/test_plan_data_diff_spark.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from project_builder import CONFIG, record_plan, write_project

from mesh_dagster.context import Context
from mesh_dagster.core.config.diff_settings import DataDiffSettings
from mesh_dagster.core.errors import ConfigError
from mesh_dagster.core.plan.data_diff import DataDiff, diff_candidates, markdown
from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.project.project import load_project
from mesh_dagster.execution.plans.data_diffs import plan_data_diffs
from mesh_dagster.state.store import StateStore

FILES = {
    "models/m.sql": "MODEL (name s.m, kind FULL, grain (id));\nSELECT 1 AS id, 2 AS v\n",
    "models/n.sql": "MODEL (name s.n, kind FULL);\nSELECT id FROM s.m\n",
    "models/w.sql": "MODEL (name s.w, kind VIEW, grain (id));\nSELECT id FROM s.m\n",
}


def dev_plan(tmp_path: Path, environment: str = "dev", config: str = "") -> Plan:
    """A plan of `environment` after prod was recorded, changing every model directly."""
    root = write_project(tmp_path / f"p{len(list(tmp_path.iterdir()))}", FILES, CONFIG + config)
    with StateStore(f"sqlite:///{root / 'state.db'}") as state:
        record_plan(build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-04"), state)
        for name in ("m", "n", "w"):
            path = root / "models" / f"{name}.sql"
            path.write_text(path.read_text().replace("SELECT", "SELECT 7 AS extra,"))
        return build_plan(load_project(root, use_cache=False), state, environment, execution_time="2020-01-04")


class ScriptedEngine:
    """Answers the diff's queries with fixed numbers and records them."""

    def __init__(self, rows: int = 10, fail: str | None = None):
        self.rows, self.fail = rows, fail
        self.sql: list[str] = []
        self.new_tables: set[str] = set()  # these have the column `extra` too
        self.session = self.catalog = self  # the parts of an engine a diff asks

    def table_exists(self, name: str) -> bool:
        return True

    def columns(self, name: str) -> dict[str, str]:
        return {"extra": "int", "id": "int", "v": "int"} if name in self.new_tables else {"id": "int", "v": "int"}

    def fetchall(self, sql: str) -> list[tuple]:
        self.sql.append(sql)
        if self.fail and self.fail in sql:
            raise RuntimeError("Spark query failed: boom\nat line 2")
        if "LIMIT" in sql:
            return [(1, 3, None)]
        if "FULL OUTER JOIN" in sql:  # only new, only old, paired, changed, changed per column (v)
            return [(1, 2, 8, 3, 3)]
        if sql.startswith("SELECT (SELECT COUNT(*)"):
            return [(self.rows, self.rows)]
        return [(3,)]


def test_the_directly_modified_models_with_tables_of_a_dev_plan_are_diffed(tmp_path):
    plan = dev_plan(tmp_path)
    assert diff_candidates(plan) == ["s.m", "s.n"]  # a view has no data of its own
    assert diff_candidates(dev_plan(tmp_path, "prod")) == []  # prod's apply is what changes prod

    engine = ScriptedEngine()
    engine.new_tables = {s.table_name for s in plan.snapshots.values()}
    diffs = plan_data_diffs(plan, engine, DataDiffSettings())
    m, n = diffs["s.m"], diffs["s.n"]
    assert (m.status, m.old_rows, m.new_rows, m.only_new, m.only_old, m.changed, m.unchanged) == (
        "compared", 10, 10, 1, 2, 3, 5)
    assert m.columns_added == ["extra"] and m.column_changes == {"v": 3} and m.sampled is None
    assert m.sample_columns == ["id", "new v", "old v"] and m.sample == [["1", "3", "NULL"]]
    assert m.old_table == plan.previous["s.m"].table_name and m.new_table == plan.snapshots["s.m"].table_name
    assert (n.status, n.note, n.only_new) == ("counts only", "no grain: counts only", None)
    assert not any("xxhash64" in q for q in engine.sql)
    assert any(q.endswith("LIMIT 5") for q in engine.sql)


def test_a_change_that_keeps_its_table_is_not_diffed(tmp_path):
    """A change writing into the table the environment already serves (forward-only) has no new
    table to compare: diffing the table with itself would report "no change" for a change."""
    plan = dev_plan(tmp_path)
    plan.previous["s.m"] = plan.snapshots["s.m"]
    assert diff_candidates(plan) == ["s.n"]


def test_above_max_rows_both_sides_keep_the_same_keys(tmp_path):
    engine = ScriptedEngine(rows=1000)
    diffs = plan_data_diffs(dev_plan(tmp_path), engine, DataDiffSettings(max_rows=100, sample_rows=2))
    assert diffs["s.m"].sampled == 0.1
    (summary,) = [q for q in engine.sql if "FULL OUTER JOIN" in q and "LIMIT" not in q]
    assert summary.count("pmod(xxhash64(`id`), 1000000) < 100000") == 2  # the join's two sides
    assert any(q.endswith("LIMIT 2") for q in engine.sql)
    assert "10.00% sample of keys" in diffs["s.m"].headline()


def test_no_sample_rows_and_disabled(tmp_path):
    engine = ScriptedEngine()
    plan = dev_plan(tmp_path)
    assert plan_data_diffs(plan, engine, DataDiffSettings(sample_rows=0))["s.m"].sample == []
    assert not any("LIMIT" in q for q in engine.sql)
    engine = ScriptedEngine()
    assert plan_data_diffs(plan, engine, DataDiffSettings(enabled=False)) == {} and engine.sql == []


def test_no_query_starts_once_the_time_budget_is_spent(tmp_path):
    ticks = iter(range(100))
    engine = ScriptedEngine()
    diffs = plan_data_diffs(dev_plan(tmp_path), engine, DataDiffSettings(timeout_s=3), clock=lambda: next(ticks))
    assert diffs["s.m"].status == "skipped" and "plan.data_diff.timeout_s: 3" in diffs["s.m"].note
    assert diffs["s.n"].status == "skipped"
    assert len(engine.sql) < 3


def test_a_failing_query_is_reported_not_raised(tmp_path):
    diffs = plan_data_diffs(dev_plan(tmp_path), ScriptedEngine(fail="FULL OUTER JOIN"), DataDiffSettings())
    assert (diffs["s.m"].status, diffs["s.m"].note) == ("failed", "Spark query failed: boom")
    assert diffs["s.n"].status == "counts only"  # the others are still compared


def test_what_the_reviewer_reads_is_fenced_user_text():
    d = DataDiff(model="s.m", new_table="a", old_table="b", old_environment="prod", grain=["id"], old_rows=2,
                 new_rows=3, only_new=1, only_old=0, changed=1, unchanged=1, column_changes={"v": 1, "w": 0},
                 sample_columns=["id", "new v", "old v"], sample=[["1", "x | *y*", "\x1b[8m"]])
    text = "\n".join(markdown({"s.m": d}, ["s.m"]))
    assert "| `s.m` | `id` | 2 → 3 | 1 | 0 | 1 | 1 |  |" in text and "`v` changed in 1 rows" in text
    assert "`w`" not in text  # unchanged columns are not listed
    assert "| `1` | `x \\| *y*` | `\\x1b[8m` |" in text
    assert markdown({}, ["s.m"])[-1] == "Pending for `s.m`: computed once the apply has built the new tables."
    assert markdown({}, []) == []


# ---------------------------------------------------------------------------------------------
# `plan.data_diff` in config.yaml: each key changes what the diff reads, or is refused
# (tests/unit/test_accepted_keys.py runs these probes).

def _diffs_under(tmp_path: Path, data_diff: str, clock: Any = None) -> tuple[dict[str, DataDiff], ScriptedEngine]:
    plan = dev_plan(tmp_path, config=f"plan:\n  data_diff:\n{data_diff}")
    settings = load_config(max(tmp_path.iterdir(), key=lambda p: p.stat().st_mtime)).plan.data_diff
    engine = ScriptedEngine(rows=1000)
    return plan_data_diffs(plan, engine, settings, **({"clock": clock} if clock else {})), engine


def _refused(tmp_path: Path, text: str, fragment: str) -> None:
    root = write_project(tmp_path / f"bad{len(list(tmp_path.iterdir()))}", {}, CONFIG + text)
    with pytest.raises(ConfigError) as e:
        load_config(root)
    assert fragment in str(e.value) and "config.yaml" in str(e.value), str(e.value)


def probe_data_diff(tmp_path: Path) -> None:
    assert set(_diffs_under(tmp_path, "    {}\n")[0]) == {"s.m", "s.n"}  # on by default
    _refused(tmp_path, "plan:\n  data_diff:\n    nosuchkey: 1\n", "nosuchkey")


def probe_enabled(tmp_path: Path) -> None:
    diffs, engine = _diffs_under(tmp_path, "    enabled: false\n")
    assert diffs == {} and engine.sql == []


def probe_max_rows(tmp_path: Path) -> None:
    assert _diffs_under(tmp_path, "    max_rows: 2000\n")[0]["s.m"].sampled is None
    assert _diffs_under(tmp_path, "    max_rows: 250\n")[0]["s.m"].sampled == 0.25
    _refused(tmp_path, "plan:\n  data_diff:\n    max_rows: 0\n", "max_rows")


def probe_sample_rows(tmp_path: Path) -> None:
    _, engine = _diffs_under(tmp_path, "    sample_rows: 3\n")
    assert any(q.endswith("LIMIT 3") for q in engine.sql)
    _refused(tmp_path, "plan:\n  data_diff:\n    sample_rows: 1000\n", "sample_rows")


def probe_timeout_s(tmp_path: Path) -> None:
    ticks = iter(range(0, 1000, 10))
    diffs, _ = _diffs_under(tmp_path, "    timeout_s: 15\n", clock=lambda: next(ticks))
    assert diffs["s.m"].status == "skipped" and "timeout_s: 15" in (diffs["s.m"].note or "")
    _refused(tmp_path, "plan:\n  data_diff:\n    timeout_s: 0\n", "timeout_s")


def probe_masked_columns(tmp_path: Path) -> None:
    diffs, _ = _diffs_under(tmp_path, "    masked_columns: [v]\n")
    assert diffs["s.m"].sample == [["1", "***", "NULL"]] and diffs["s.m"].masked_columns == ["v"]
    _refused(tmp_path, "plan:\n  data_diff:\n    masked_columns: ['*_hash']\n", "'*_hash' is not a column name pattern")


def probe_no_samples(tmp_path: Path) -> None:
    diffs, engine = _diffs_under(tmp_path, "    no_samples: [s.m]\n")
    assert diffs["s.m"].sample == [] and diffs["s.m"].note_text() == "no sample rows (plan.data_diff.no_samples)"
    assert not any("LIMIT" in q for q in engine.sql)
    root = write_project(tmp_path / "typo", FILES, CONFIG + "plan:\n  data_diff:\n    no_samples: [s.mm]\n")
    with pytest.raises(ConfigError) as e:
        Context(root).plans.plan("dev", execution_time="2020-01-04")  # refused when a plan is made
    line = CONFIG.count("\n") + 3
    assert str(e.value) == f"config.yaml:{line}: plan.data_diff.no_samples 's.mm' matches no model. Did you mean: s.m?"


DATA_DIFF_PROBES = {
    "plan.data_diff": probe_data_diff,
    "plan.data_diff.enabled": probe_enabled,
    "plan.data_diff.masked_columns": probe_masked_columns,
    "plan.data_diff.max_rows": probe_max_rows,
    "plan.data_diff.no_samples": probe_no_samples,
    "plan.data_diff.sample_rows": probe_sample_rows,
    "plan.data_diff.timeout_s": probe_timeout_s,
}


@pytest.mark.parametrize("key", sorted(DATA_DIFF_PROBES))
def test_data_diff_settings(tmp_path: Path, key: str) -> None:
    DATA_DIFF_PROBES[key](tmp_path)


def test_a_forward_only_preview_is_diffed_and_says_so(tmp_path):
    incremental = ("MODEL (name s.m, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), grain (id));\n"
                   "SELECT 1 AS id, 2 AS v, CAST(@start_ds AS DATE) AS ds\n")
    root = write_project(tmp_path / "fo", {"models/m.sql": incremental}, CONFIG + "plan:\n  forward_only: true\n")
    with StateStore(f"sqlite:///{root / 'state.db'}") as state:
        record_plan(build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-04"), state)
        (root / "models" / "m.sql").write_text(incremental.replace("2 AS v", "3 AS v"))
        plan = build_plan(load_project(root, use_cache=False), state, "dev", execution_time="2020-01-04")
    assert plan.previews == ["s.m"] and diff_candidates(plan) == ["s.m"]
    engine = ScriptedEngine()
    d = plan_data_diffs(plan, engine, DataDiffSettings())["s.m"]
    assert d.new_table != d.old_table and d.status == "compared"
    assert d.note_text() == ("preview of a forward-only change: rows of `ds` in 2020-01-03 - 2020-01-03 (its preview "
                             "range) compared")
    # both sides cut to the preview's range: prod's older rows are not counted as removed
    window = ("WHERE `ds` BETWEEN CAST('2020-01-03 00:00:00.000000' AS TIMESTAMP) "
              "AND CAST('2020-01-03 23:59:59.999999' AS TIMESTAMP)")
    assert all(f"FROM {t} {window})" in sql for t in (d.new_table, d.old_table) for sql in engine.sql), engine.sql
