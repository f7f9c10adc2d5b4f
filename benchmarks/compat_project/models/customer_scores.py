import typing as t
from datetime import datetime

import pandas as pd
from compat_helpers import tier_of
from sqlglot import exp
from sqlmesh import ExecutionContext, model


@model(
    "shop.customer_scores",
    kind="FULL",
    columns={"customer_id": "int", "score": "double", "tier": "text"},
    grain="customer_id",
    audits=[("number_of_rows", {"threshold": 3})],
)
def execute(
    context: ExecutionContext,
    start: datetime,
    end: datetime,
    execution_time: datetime,
    **kwargs: t.Any,
) -> pd.DataFrame:
    table = exp.to_table(context.resolve_table("shop.customer_totals"), dialect=context.engine_adapter.dialect)
    query = exp.select("customer_id", "total_amount", "vip").from_(table).order_by("customer_id")
    df = context.fetchdf(query, quote_identifiers=True)
    bonus = float(context.var("vip_bonus", 0))
    scores = [
        round(float(total) / 10 + (bonus if bool(vip) else 0.0), 3)
        for total, vip in zip(df["total_amount"], df["vip"])
    ]
    return pd.DataFrame(
        {
            "customer_id": df["customer_id"].astype("int64"),
            "score": scores,
            "tier": [tier_of(s) for s in scores],
        }
    )
