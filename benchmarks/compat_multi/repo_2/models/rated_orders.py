import typing as t
from datetime import datetime

import pandas as pd
from helpers.rates import RATES
from sqlmesh import ExecutionContext, model


@model(
    "silver.rated_orders",
    kind="FULL",
    columns={"order_id": "int", "rated_amount": "double"},
    depends_on=["bronze.orders"],
)
def execute(context: ExecutionContext, start: datetime, end: datetime, execution_time: datetime,
            **kwargs: t.Any) -> pd.DataFrame:
    orders = context.fetchdf(f"SELECT order_id, amount FROM {context.resolve_table('bronze.orders')}")
    return pd.DataFrame({"order_id": orders["order_id"].astype("int32"),
                         "rated_amount": orders["amount"] * RATES["standard"]})
