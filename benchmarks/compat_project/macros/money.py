from macros.utils import CENT_DIGITS, SHARE_DIGITS, rounded
from sqlmesh import macro


@macro()
def net_amount(evaluator, amount, rate):
    """The amount after a discount `rate`, rounded to cents."""
    net = f"{amount.sql(dialect=evaluator.dialect)} * (1 - {rate.sql(dialect=evaluator.dialect)})"
    return rounded(net, CENT_DIGITS)


@macro()
def share(evaluator, part, whole):
    """`part` as a percentage of `whole`."""
    ratio = f"100.0 * {part.sql(dialect=evaluator.dialect)} / {whole.sql(dialect=evaluator.dialect)}"
    return rounded(ratio, SHARE_DIGITS)
