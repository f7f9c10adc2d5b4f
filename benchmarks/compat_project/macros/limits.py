"""Macros used where SQLMesh renders them around a query: inside an EMBEDDED model (rendered in
the models that inline it) and in an audit's argument."""

from macros.utils import CENT_DIGITS
from sqlmesh import macro


@macro()
def max_order_amount(evaluator):
    """The largest amount an order may have."""
    return 1000


@macro()
def cents(evaluator, value):
    return f"ROUND({value.sql(dialect=evaluator.dialect)}, {CENT_DIGITS})"
