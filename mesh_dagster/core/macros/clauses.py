"""Clause operators: `@WITH`, `@JOIN`, `@WHERE`, `@GROUP_BY`, `@HAVING`, `@ORDER_BY`, `@LIMIT`.

`@WHERE(condition) x > 1` writes `WHERE x > 1` when the condition holds at render time and
nothing otherwise: the clause is left out up to where the next one starts (the next clause
keyword or clause operator at the same parenthesis depth, the end of the enclosing parentheses,
`;`, or the end of the query). `LEFT OUTER @JOIN(cond) t ON ...` leaves the join type out with it.
The condition is evaluated like `@IF`'s (constants, macro variables, comparisons).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mesh_dagster.core.macros.registry import Builtin, arguments, builtin, truthy
from mesh_dagster.core.macros.syntax import Call, Clause

if TYPE_CHECKING:
    from mesh_dagster.core.macros.evaluator import MacroEvaluator

_SET_OPERATIONS = ("UNION", "INTERSECT", "EXCEPT", "MINUS")
# Keywords that start each clause, in the order clauses follow one another in a SELECT.
_CLAUSE_ORDER: list[tuple[str, tuple[str, ...]]] = [
    ("WHERE", ("WHERE",)),
    ("GROUP_BY", ("GROUP",)),
    ("HAVING", ("HAVING",)),
    ("QUALIFY", ("QUALIFY", "WINDOW")),
    ("ORDER_BY", ("ORDER", "SORT", "CLUSTER", "DISTRIBUTE")),
    ("LIMIT", ("LIMIT",)),
    ("OFFSET", ("OFFSET", "FETCH")),
]
_JOIN_TYPES = frozenset({"LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "SEMI", "ANTI", "NATURAL"})
_JOIN_STARTS = _JOIN_TYPES | {"JOIN", "LATERAL", "PIVOT", "UNPIVOT", "@JOIN"}
_STATEMENT_STARTS = frozenset({"SELECT", "FROM", "VALUES", "TABLE", "INSERT", "UPDATE", "DELETE", "MERGE"})


def _after(clause: str) -> frozenset[str]:
    """What may follow `clause`: the later clauses' keywords and operators, and set operations."""
    names = [name for name, _ in _CLAUSE_ORDER]
    later = _CLAUSE_ORDER[names.index(clause) + 1:] if clause in names else _CLAUSE_ORDER
    return frozenset({word for _, words in later for word in words} | {f"@{name}" for name, _ in later}
                     | set(_SET_OPERATIONS))


def _operator(keyword: str, next_clauses: frozenset[str], leading: frozenset[str] = frozenset(),
              ends_at_comma: bool = False) -> Builtin:
    def clause(ev: MacroEvaluator, call: Call) -> Clause:
        args = arguments(ev, call, ["condition"], 1)
        keep = truthy(ev, ev.evaluate(args["condition"]), args["condition"].line)
        return Clause(keyword, keep, next_clauses, leading, ends_at_comma)

    clause.__doc__ = f"`@{keyword.replace(' ', '_')}(condition) ...`: the {keyword} clause when the condition holds."
    return clause


builtin("WITH")(_operator("WITH", _STATEMENT_STARTS))
builtin("JOIN")(_operator("JOIN", _JOIN_STARTS | _after("JOIN"), leading=_JOIN_TYPES, ends_at_comma=True))
builtin("WHERE")(_operator("WHERE", _after("WHERE")))
builtin("GROUP_BY")(_operator("GROUP BY", _after("GROUP_BY")))
builtin("HAVING")(_operator("HAVING", _after("HAVING")))
builtin("ORDER_BY")(_operator("ORDER BY", _after("ORDER_BY")))
builtin("LIMIT")(_operator("LIMIT", _after("LIMIT")))
