"""SQL for comparing one model's data in two environments, joined on its grain."""

from __future__ import annotations

from dataclasses import dataclass


def _q(c: str) -> str:
    return f"`{c}`"


@dataclass
class TableDiffQueries:
    summary: str  # source rows, target rows, source-only, target-only, joined
    columns: str | None  # per non-key column: joined rows whose values differ
    sample_sql: str

    def sample(self, limit: int) -> str:
        return f"{self.sample_sql} LIMIT {int(limit)}"


def table_diff_queries(source: str, target: str, keys: list[str], columns: list[str]) -> TableDiffQueries:
    key_eq = " AND ".join(f"s.{_q(k)} <=> t.{_q(k)}" for k in keys)
    s_key_null = " AND ".join(f"s.{_q(k)} IS NULL" for k in keys)
    t_key_null = " AND ".join(f"t.{_q(k)} IS NULL" for k in keys)
    joined = f"FROM {source} AS s FULL OUTER JOIN {target} AS t ON {key_eq}"
    summary = (
        f"SELECT (SELECT COUNT(*) FROM {source}), (SELECT COUNT(*) FROM {target}), "
        f"SUM(CASE WHEN {t_key_null} THEN 1 ELSE 0 END), SUM(CASE WHEN {s_key_null} THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN NOT ({t_key_null}) AND NOT ({s_key_null}) THEN 1 ELSE 0 END) {joined}"
    )
    cols = None
    if columns:
        parts = ", ".join(f"SUM(CASE WHEN NOT (s.{_q(c)} <=> t.{_q(c)}) THEN 1 ELSE 0 END)" for c in columns)
        cols = f"SELECT {parts} FROM {source} AS s INNER JOIN {target} AS t ON {key_eq}"
    differs = " OR ".join([f"NOT (s.{_q(c)} <=> t.{_q(c)})" for c in columns] + [s_key_null, t_key_null])
    select = ", ".join([f"COALESCE(s.{_q(k)}, t.{_q(k)}) AS {_q(k)}" for k in keys]
                       + [f"s.{_q(c)} AS {_q('s__' + c)}, t.{_q(c)} AS {_q('t__' + c)}" for c in columns])
    sample = f"SELECT {select} {joined} WHERE {differs}"
    return TableDiffQueries(summary, cols, sample)


# Keys are sampled in parts per million of their hash: the same keys on both sides, so a sampled
# diff compares whole rows, never a row of one side with nothing because the other side drew
# another random subset.
_SAMPLE_SCALE = 1_000_000


def key_sample(table: str, keys: list[str], fraction: float) -> str:
    """`table` restricted to the rows whose grain keys hash into the first `fraction` of the hash
    space (deterministic: both sides of a diff keep the same keys), as a subquery."""
    cut = max(1, int(fraction * _SAMPLE_SCALE))
    hashed = ", ".join(_q(k) for k in keys)
    return f"(SELECT * FROM {table} WHERE pmod(xxhash64({hashed}), {_SAMPLE_SCALE}) < {cut})"


def diff_counts_query(source: str, target: str, keys: list[str], columns: list[str]) -> str:
    """One pass over the join on `keys`: rows only in source, only in target, paired, paired with
    any of `columns` different, then per column the paired rows where it differs."""
    key_eq = " AND ".join(f"s.{_q(k)} <=> t.{_q(k)}" for k in keys)
    in_s = "NOT (" + " AND ".join(f"s.{_q(k)} IS NULL" for k in keys) + ")"
    in_t = "NOT (" + " AND ".join(f"t.{_q(k)} IS NULL" for k in keys) + ")"
    paired = f"{in_s} AND {in_t}"
    differs = [f"NOT (s.{_q(c)} <=> t.{_q(c)})" for c in columns]
    sums = [f"NOT ({in_t})", f"NOT ({in_s})", paired, f"{paired} AND ({' OR '.join(differs) or 'FALSE'})"]
    sums += [f"{paired} AND {d}" for d in differs]
    parts = ", ".join(f"SUM(CASE WHEN {cond} THEN 1 ELSE 0 END)" for cond in sums)
    return f"SELECT {parts} FROM {source} AS s FULL OUTER JOIN {target} AS t ON {key_eq}"
