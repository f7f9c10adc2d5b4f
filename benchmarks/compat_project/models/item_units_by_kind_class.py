"""A Python model as SQLMesh's docs write one: a kind class, no `context` parameter (SQLMesh passes
it by keyword) and `context.table`, with a helper from models/."""

import typing as t
from datetime import datetime

import pandas as pd
from models.shared.units import UNIT_COLUMNS, per_day_and_item
from sqlmesh import model
from sqlmesh.core.model.kind import IncrementalByTimeRangeKind, TimeColumn
from sqlmesh.utils.date import to_ds


@model(
    "shop.item_units_by_kind_class",
    kind=IncrementalByTimeRangeKind(time_column=TimeColumn(column="order_date", format="%Y-%m-%d"), batch_size=3),
    start="2024-01-01",
    columns={"order_date": "date", "item_id": "int", "units": "bigint"},
)
def execute(start: datetime, end: datetime, **kwargs: t.Any) -> pd.DataFrame:
    context = kwargs["context"]
    df = context.fetchdf(
        f"SELECT order_date, item_id, quantity FROM {context.table('shop.order_lines')} "
        f"WHERE order_date BETWEEN '{to_ds(start)}' AND '{to_ds(end)}'"
    )
    out = per_day_and_item(df)
    out["order_date"] = pd.to_datetime(out["order_date"]).dt.date
    return out[UNIT_COLUMNS]
