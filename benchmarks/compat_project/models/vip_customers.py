from sqlmesh import model
from sqlmesh.core.macros import MacroEvaluator


@model("shop.vip_customers", is_sql=True, kind="FULL")
def entrypoint(evaluator: MacroEvaluator) -> str:
    return "SELECT customer_id, name, credit FROM shop.customers WHERE vip"
