import typing as t
from datetime import datetime

import pandas as pd
from sqlmesh import ExecutionContext, model
from sqlmesh.core.model.kind import ModelKindName
from sqlmesh.utils.date import to_ds


@model(
    "shop.daily_item_units",
    kind=dict(name=ModelKindName.INCREMENTAL_BY_TIME_RANGE, time_column="order_date"),
    start="2024-01-01",
    columns={"order_date": "date", "item_id": "int", "units": "bigint"},
)
def execute(
    context: ExecutionContext,
    start: datetime,
    end: datetime,
    execution_time: datetime,
    **kwargs: t.Any,
) -> pd.DataFrame:
    table = context.resolve_table("shop.order_lines")
    df = context.fetchdf(
        f"SELECT order_date, item_id, quantity FROM {table} "
        f"WHERE order_date BETWEEN '{to_ds(start)}' AND '{to_ds(end)}'"
    )
    out = df.groupby(["order_date", "item_id"], as_index=False)["quantity"].sum()
    out = out.rename(columns={"quantity": "units"})
    out["order_date"] = pd.to_datetime(out["order_date"]).dt.date
    return out[["order_date", "item_id", "units"]]
