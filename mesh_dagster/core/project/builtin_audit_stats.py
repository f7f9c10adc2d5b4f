"""Built-in audits over a whole column: counts, proportions and statistics.

Each aggregates the audited rows into one row and returns it only when the check fails. Written
from SQLMesh's documented meaning; the formulas are spelled out where the documentation names
only the statistic.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from mesh_dagster.core.project.builtin_audits import Arguments, outside, sql, where

# A value seen in one column only has probability 0 in the other, where the divergence is
# infinite: such values count as this small probability instead, so the audit fails clearly.
KL_FLOOR = 1e-6


def _one(aggregates: str, args: Arguments, failing: str) -> str:
    return f"SELECT * FROM (SELECT {aggregates} FROM @this_model{where(args)}) AS a WHERE {failing}"


def number_of_rows(args: Arguments) -> str:
    """The model must have more rows than `threshold`."""
    return _one("COUNT(*) AS n", args, f"n <= {sql(args['threshold'])}")


def at_least_one(args: Arguments) -> str:
    return _one(f"COUNT({sql(args['column'])}) AS n", args, "n = 0")


def not_constant(args: Arguments) -> str:
    """At least two distinct non-NULL values."""
    return _one(f"COUNT(DISTINCT {sql(args['column'])}) AS n", args, "n < 2")


def not_null_proportion(args: Arguments) -> str:
    """The share of NULLs is no greater than `threshold` (an empty model passes)."""
    column = sql(args["column"])
    return _one(f"COUNT(*) AS n, COUNT(*) - COUNT({column}) AS nulls", args,
                f"n > 0 AND nulls / n > {sql(args['threshold'])}")


def _aggregate_in_range(function: str) -> Callable[[Arguments], str]:
    def build(args: Arguments) -> str:
        failing = outside(exp.column("v"), args)
        return _one(f"{function}({sql(args['column'])}) AS v", args, sql(failing))
    return build


mean_in_range = _aggregate_in_range("AVG")
stddev_in_range = _aggregate_in_range("STDDEV_SAMP")


def z_score(args: Arguments) -> str:
    """Rows with ABS((value - mean) / NULLIF(stddev, 0)) above `threshold`."""
    column = sql(args["column"])
    return (f"SELECT * FROM (SELECT *, ABS(({column} - AVG({column}) OVER ()) / "
            f"NULLIF(STDDEV_SAMP({column}) OVER (), 0)) AS __z_score FROM @this_model{where(args)}) AS z "
            f"WHERE __z_score > {sql(args['threshold'])}")


def _frequencies(column: str, args: Arguments) -> str:
    """Each non-NULL value of `column` with its share of the column's non-NULL values."""
    rows = where(args, exp.Not(this=exp.Is(this=exp.column("__v"), expression=exp.null())))
    return (f"SELECT __v AS value, COUNT(*) / SUM(COUNT(*)) OVER () AS p "
            f"FROM (SELECT {column} AS __v, * FROM @this_model) AS f{rows} GROUP BY __v")


def kl_divergence(args: Arguments) -> str:
    """Symmetrised KL divergence SUM((p - q) * LN(p / q)) of the two columns' value frequencies.

    Values are compared as they are (categories); one seen in only one column counts with
    probability KL_FLOOR in the other.
    """
    p, q = _frequencies(sql(args["column"]), args), _frequencies(sql(args["target_column"]), args)
    return (f"SELECT * FROM (SELECT SUM((pp - qq) * LN(pp / qq)) AS divergence FROM ("
            f"SELECT COALESCE(p.p, {KL_FLOOR}) AS pp, COALESCE(q.p, {KL_FLOOR}) AS qq "
            f"FROM ({p}) AS p FULL OUTER JOIN ({q}) AS q ON p.value = q.value) AS d) AS k "
            f"WHERE divergence > {sql(args['threshold'])}")


def chi_square(args: Arguments) -> str:
    """Pearson's chi-square of the two columns' contingency table (rows with both non-NULL)."""
    a, b = sql(args["column"]), sql(args["target_column"])
    rows = where(args, exp.and_(*(exp.Not(this=exp.Is(this=exp.column(c), expression=exp.null()))
                                  for c in ("__a", "__b"))))
    pairs = f"SELECT __a, __b FROM (SELECT {a} AS __a, {b} AS __b, * FROM @this_model) AS t{rows}"
    return (f"WITH pairs AS ({pairs}), "
            "n AS (SELECT COUNT(*) AS n FROM pairs), "
            "ra AS (SELECT __a, COUNT(*) AS na FROM pairs GROUP BY __a), "
            "rb AS (SELECT __b, COUNT(*) AS nb FROM pairs GROUP BY __b), "
            "o AS (SELECT __a, __b, COUNT(*) AS observed FROM pairs GROUP BY __a, __b), "
            "e AS (SELECT ra.__a, rb.__b, ra.na * rb.nb / n.n AS expected FROM ra CROSS JOIN rb CROSS JOIN n) "
            "SELECT * FROM (SELECT SUM(POWER(COALESCE(o.observed, 0) - e.expected, 2) / e.expected) AS chi "
            "FROM e LEFT JOIN o ON e.__a = o.__a AND e.__b = o.__b) AS c "
            f"WHERE chi > {sql(args['critical_value'])}")
