"""Which model and column names mesh_dagster accepts, decided once, at load time.

A name becomes part of Hive metastore object names (`mesh__<schema>.<schema>__<table>__<version>`,
views `<schema>__<env>.<table>`) and of the SQL we send to Spark. The Hive metastore accepts
letters, digits and underscores only (its `validateName`), stores names in lower case, and keeps
database names in a VARCHAR(128) and table names in a VARCHAR(256) (package.jdo of
hive-metastore 2.3). The engine quotes exactly these identifiers (`quote_identifier`). Checking
the same rule here means a name that cannot be created is refused with its file and line before
any table exists, instead of failing halfway through an apply.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from mesh_dagster.core.errors import PlanError

IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
# Column names may also be words separated by spaces or hyphens (`"country code"`, as SQLMesh
# projects write them): Spark 4 keeps such names in Parquet files, partition paths and the
# metastore's table schema (verified on Spark 4.3), and every statement we generate quotes them.
# Anything else (dots, quotes, `=`, `/`, control characters) would be misread in partition paths
# or in DESCRIBE output, so it stays refused.
COLUMN = re.compile(r"[A-Za-z0-9_]+(?:[ -]+[A-Za-z0-9_]+)*")
COLUMN_RULE = "use letters, digits and underscores (words may be separated by spaces or hyphens)"
# The Hive metastore stores schema names in DBS.NAME VARCHAR(128) (hive-metastore 2.3's
# package.jdo, the schema Spark's embedded Derby and a Postgres-backed metastore both use); a
# 129-character name fails inside CREATE SCHEMA, i.e. in the middle of an apply.
MAX_DATABASE_NAME = 128
MAX_TABLE_NAME = 256  # Hive metastore TBLS.TBL_NAME
PHYSICAL_SCHEMA_PREFIX = "mesh__"
PROD = "prod"
TEMP_PREFIX = "__mesh_tmp_"  # staging tables and temporary views: a crash may leave them, the janitor drops them
_VERSION_DIGITS = 10  # versions are unsigned crc32 values written in decimal
_QUOTES = "`\"'"


def unquote(part: str) -> str:
    part = part.strip()
    if len(part) >= 2 and part[0] == part[-1] and part[0] in _QUOTES:
        return part[1:-1]
    return part


def check_identifier(name: str, what: str) -> str:
    """A schema or table name part without quotes, lower case; ValueError when the metastore cannot hold it."""
    bare = unquote(name)
    if not IDENTIFIER.fullmatch(bare):
        raise ValueError(f"{what} '{bare}' is not supported: use letters, digits and underscores only")
    return bare.lower()


def check_column(name: str, what: str = "Column name") -> str:
    """A column name without quotes, lower case; ValueError when it is not one we can quote everywhere."""
    bare = unquote(name)
    if not COLUMN.fullmatch(bare):
        raise ValueError(f"{what} '{bare}' is not supported: {COLUMN_RULE}")
    return bare.lower()


def check_model_name(text: str) -> str:
    """`schema.table` (or a bare `table`, in schema `default`), lower case, checked part by part."""
    parts = [p for p in _split_name(text)]
    if not 1 <= len(parts) <= 2 or any(not p.strip() for p in parts):
        raise ValueError(f"Model name '{text.strip()}' is not supported: write it as schema.table "
                         "(catalogs are not supported; no empty parts)")
    schema, table = (["default"] + parts)[-2:]
    schema = check_identifier(schema, "Model name part")
    table = check_identifier(table, "Model name part")
    longest_schema = MAX_DATABASE_NAME - len(PHYSICAL_SCHEMA_PREFIX)
    if len(schema) > longest_schema:
        raise ValueError(f"Schema name '{schema}' is too long: at most {longest_schema} characters "
                         "(the metastore limits database names to 128)")
    longest_table = MAX_TABLE_NAME - len("____") - _VERSION_DIGITS
    if len(schema) + len(table) > longest_table:
        raise ValueError(f"Model name '{schema}.{table}' is too long: schema and table together at most "
                         f"{longest_table} characters (the metastore limits table names to 256)")
    return f"{schema}.{table}" if len(parts) == 2 else table


def _split_name(text: str) -> list[str]:
    """Split on dots outside quotes: "`a.b`.c" is two parts, the first of which is refused later."""
    parts, current, quote = [], "", None
    for ch in text.strip():
        if quote:
            current += ch
            if ch == quote:
                quote = None
        elif ch in _QUOTES:
            quote = ch
            current += ch
        elif ch == ".":
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


_NOT_IN_TABLES = re.compile(r"[^A-Za-z0-9_]")


def _sanitize(part: str) -> str:
    return _NOT_IN_TABLES.sub("_", part)


def physical_schema(schema: str) -> str:
    return f"{PHYSICAL_SCHEMA_PREFIX}{_sanitize(schema)}"


@lru_cache(maxsize=8192)  # a plan asks every snapshot's table several times (`Snapshot.table_name`)
def physical_table(model_name: str, version: str) -> str:
    schema, _, table = model_name.rpartition(".")
    schema = schema or "default"
    return f"{physical_schema(schema)}.{_sanitize(schema)}__{_sanitize(table)}__{version}"


_NOT_IN_NAMES = re.compile(r"[^a-z0-9_]")


class EnvironmentNameError(PlanError):
    """An environment name that cannot be used; `reason` says why."""

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason
        super().__init__(f"Invalid environment name '{name}': {reason}")


def normalize_environment(name: str) -> str:
    """The environment `name` stands for. Names become part of schema names (`schema__env`), so
    they are lower-cased and every character outside `[a-z0-9_]` becomes `_` (`feature/x` ->
    `feature_x`, so git branch names work; the CLI warns when the name changes).

    Refused rather than guessed: an empty name (it used to mean prod, so `mesh plan ""` planned
    production), a name with no letter or digit, and any spelling of prod but `prod` itself:
    every other normalised name lands in a development sandbox, but prod is where plans replace
    what everyone reads, with different rules (no --start, approvals, no expiry), so `PROD` or a
    git branch named `Prod` must not reach it by lower-casing.
    """
    normalized = _NOT_IN_NAMES.sub("_", name.strip().lower())
    if not name.strip():
        raise EnvironmentNameError(name, "it is empty")
    if not normalized.strip("_"):
        raise EnvironmentNameError(name, "it has no letter or digit")
    if normalized == PROD and name != PROD:
        raise EnvironmentNameError(name, "only 'prod' names the production environment")
    return normalized


def environment_spelling_notice(name: str) -> str | None:
    """What to tell users when the name they gave is not the name used (`my-env` -> `my_env`).

    Two spellings can land on one environment (`my-env` and `my_env`); saying so each time is
    how neither is merged silently.
    """
    normalized = normalize_environment(name)
    return None if normalized == name else f"environment '{name}' is used as '{normalized}'"


def check_environment_fits(environment: str, schemas: Iterable[str]) -> None:
    """Refuse an environment whose view schemas (`schema__env`) the metastore cannot store.

    Checked when planning, before anything is created, instead of failing in CREATE SCHEMA.
    """
    env = normalize_environment(environment)
    if env == PROD:
        return
    longest = max((view_schema(s, env) for s in schemas), key=len, default="")
    if len(longest) > MAX_DATABASE_NAME:
        allowed = len(env) - (len(longest) - MAX_DATABASE_NAME)
        raise EnvironmentNameError(
            _shorten(env),
            f"{len(env)} characters make the schema '{_shorten(longest)}' {len(longest)} characters long, "
            f"over the metastore's limit of {MAX_DATABASE_NAME}; use at most {max(allowed, 0)} characters",
        )


def _shorten(text: str, keep: int = 40) -> str:
    return text if len(text) <= keep else text[:keep] + "..."


@lru_cache(maxsize=8192)  # a plan shows every model's view several times (`Plan.view`)
def view_name(model_name: str, environment: str) -> str:
    """`schema.table` in prod, `schema__env.table` elsewhere."""
    return _view(model_name, normalize_environment(environment))


def view_names(model_names: Iterable[str], environment: str) -> dict[str, str]:
    """{view: model} of the models `model_names` in `environment` (its name normalized once)."""
    env = normalize_environment(environment)
    return {_view(name, env): name for name in model_names}


def _view(model_name: str, env: str) -> str:
    schema, _, table = model_name.rpartition(".")
    schema = schema or "default"
    return f"{schema}.{table}" if env == PROD else f"{schema}__{env}.{table}"


def view_schema(schema: str, environment: str) -> str:
    env = normalize_environment(environment)
    return schema if env == PROD else f"{schema}__{env}"


VIEW_SCHEMA_RULE = "a schema ending in `__<environment>` holds that environment's views"


def environment_readings(schema: str) -> list[tuple[str, str]]:
    """Each reading of `schema` as the view schema `<model schema>__<environment>` of a development
    environment (`a__b__c` is `a__b` in `c`, and `a` in `b__c`). Environment names may hold `__`,
    so a schema name alone cannot say which environment it serves: a model named `a__dev.t` has the
    name that `a.t`'s view takes in `dev`."""
    readings = []
    for found in re.finditer(r"(?=__)", schema):
        model_schema, env = schema[:found.start()], schema[found.start() + 2:]
        if model_schema and env.strip("_") and env != PROD:  # `a__prod` is no view schema: prod's are `a`
            readings.append((model_schema, env))
    return readings
