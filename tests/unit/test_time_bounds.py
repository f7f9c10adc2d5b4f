"""One decision bounds an interval on a time column, for writes and audits alike (no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.renderer import RenderContext, render_audit
from mesh_dagster.core.time.time_column import TimeColumnError, check_time_column, interval_bounds

JAN1 = datetime(2020, 1, 1, tzinfo=UTC)
JAN3 = datetime(2020, 1, 3, tzinfo=UTC)


def _bounds(column_type: str | None, fmt: str = "%Y-%m-%d") -> tuple[str, str]:
    low, high = interval_bounds(JAN1, JAN3, column_type, fmt)
    return low.sql(dialect="spark"), high.sql(dialect="spark")


@pytest.mark.parametrize("column_type, fmt, expected", [
    ("int", "%Y%m%d", ("20200101", "20200102")),
    ("BIGINT", "%Y%m%d", ("20200101", "20200102")),
    ("decimal(8,0)", "%Y%m%d", ("20200101", "20200102")),
    ("string", "%Y/%m/%d", ("'2020/01/01'", "'2020/01/02'")),
    ("VARCHAR(10)", "%Y%m%d", ("'20200101'", "'20200102'")),
    ("date", "%Y-%m-%d", ("CAST('2020-01-01' AS DATE)", "CAST('2020-01-02' AS DATE)")),
    ("timestamp", "%Y-%m-%d", ("CAST('2020-01-01 00:00:00.000000' AS TIMESTAMP)",
                               "CAST('2020-01-02 23:59:59.999999' AS TIMESTAMP)")),
    ("timestamp_ntz", "%Y-%m-%d", ("CAST('2020-01-01 00:00:00.000000' AS TIMESTAMP_NTZ)",
                                   "CAST('2020-01-02 23:59:59.999999' AS TIMESTAMP_NTZ)")),
    (None, "%Y-%m-%d", ("CAST('2020-01-01 00:00:00.000000' AS TIMESTAMP)",
                        "CAST('2020-01-02 23:59:59.999999' AS TIMESTAMP)")),
])
def test_bounds_are_literals_of_the_column_type(column_type, fmt, expected) -> None:
    assert _bounds(column_type, fmt) == expected


def test_a_numeric_column_needs_a_numeric_format() -> None:
    with pytest.raises(TimeColumnError, match="format '%Y-%m-%d' gives '2020-01-01', not a number"):
        _bounds("int")


def test_a_column_that_cannot_hold_time_is_refused() -> None:
    with pytest.raises(TimeColumnError, match="type boolean cannot hold time"):
        _bounds("boolean")


def test_the_loader_can_check_a_declared_type_before_anything_runs() -> None:
    check_time_column("INT", "%Y%m%d")
    check_time_column("STRING", "%d/%m/%Y")
    with pytest.raises(TimeColumnError, match="not a number"):
        check_time_column("BIGINT", "%Y-%m-%d")


def _incremental(columns: dict[str, str] | None, fmt: str = "%Y%m%d") -> Model:
    kind = ModelKind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds", time_column_format=fmt)
    return Model(name="db.m", kind=kind, query="SELECT 1 AS ds", columns=columns, path="models/m.sql", line=1)


def test_the_audit_filter_uses_the_physical_type_before_the_declared_one() -> None:
    """The evaluator passes the stored type; an INT `ds` is bounded with integers, never TIMESTAMPs."""
    ctx = RenderContext(start=JAN1, end=JAN3, this_model="mesh__db.db__m__1", time_column_type="int")
    sql = render_audit("SELECT * FROM @this_model", "spark", {}, _incremental(None), ctx, MacroRegistry())
    assert sql == "SELECT * FROM (SELECT * FROM mesh__db.db__m__1 WHERE `ds` BETWEEN 20200101 AND 20200102) AS db__m__1"
    declared = RenderContext(start=JAN1, end=JAN3, this_model="mesh__db.db__m__1")
    sql = render_audit("SELECT * FROM @this_model", "spark", {}, _incremental({"ds": "INT"}), declared, MacroRegistry())
    assert "`ds` BETWEEN 20200101 AND 20200102" in sql


def test_an_unboundable_time_column_names_the_model_file() -> None:
    ctx = RenderContext(start=JAN1, end=JAN3, this_model="t", time_column_type="int")
    with pytest.raises(ModelError, match=r"^models/m.sql:1: Cannot bound time_column ds: .*not a number"):
        render_audit("SELECT * FROM @this_model", "spark", {}, _incremental(None, "%Y-%m"), ctx, MacroRegistry())
