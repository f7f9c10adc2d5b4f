import typing as t
from datetime import datetime

import pandas as pd
from sqlmesh import ExecutionContext, model
from sqlmesh.core.model.kind import ModelKindName
from sqlmesh.utils.date import to_ds


@model(
    "shop.settled_units",
    kind=dict(name=ModelKindName.INCREMENTAL_BY_TIME_RANGE, time_column="order_date"),
    start="2024-01-01",
    columns={"order_date": "date", "units": "bigint"},
    signals=[("settled_before", {"cutoff": "2024-01-04"})],
)
def execute(
    context: ExecutionContext,
    start: datetime,
    end: datetime,
    execution_time: datetime,
    **kwargs: t.Any,
) -> pd.DataFrame:
    table = context.resolve_table("shop.daily_item_units")
    df = context.fetchdf(
        f"SELECT order_date, SUM(units) AS units FROM {table} "
        f"WHERE order_date BETWEEN '{to_ds(start)}' AND '{to_ds(end)}' GROUP BY order_date"
    )
    df["order_date"] = pd.to_datetime(df["order_date"]).dt.date
    return df[["order_date", "units"]]
