from sqlmesh import macro


@macro()
def net_amount(evaluator, amount, rate):
    """The amount after a discount `rate`, rounded to cents."""
    return f"ROUND({amount.sql(dialect=evaluator.dialect)} * (1 - {rate.sql(dialect=evaluator.dialect)}), 2)"
