from sqlmesh import model
from sqlmesh.core.macros import MacroEvaluator
from sqlmesh.core.model.kind import ModelKindName


@model(
    "shop.revenue_by_sql",
    is_sql=True,
    kind=dict(name=ModelKindName.INCREMENTAL_BY_TIME_RANGE, time_column="order_date"),
    start="2024-01-01",
)
def entrypoint(evaluator: MacroEvaluator) -> str:
    """The columns of its parent and the interval's dates, read from the evaluator: a query per render."""
    columns = ", ".join(evaluator.columns_to_types("shop.daily_revenue"))
    start, end = evaluator.locals["start_ds"], evaluator.locals["end_ds"]
    return f"SELECT {columns} FROM shop.daily_revenue WHERE order_date BETWEEN '{start}' AND '{end}'"
