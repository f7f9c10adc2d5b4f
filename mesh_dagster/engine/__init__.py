"""The one place that speaks Spark.

Names are resolved lazily so that importing `mesh_dagster.engine.java` (or this package) does not
import pyspark: planning never touches Spark and should not pay for loading it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # re-exported lazily by __getattr__ below; imported here for type checkers
    from mesh_dagster.engine.adapter import SparkEngine, quote_identifier, quote_name  # noqa: F401
    from mesh_dagster.engine.java import MINIMUM_JAVA, check_java, find_java  # noqa: F401
    from mesh_dagster.engine.session import SparkSQLError, build_session, spark_error_message, to_engine_error  # noqa: F401

_EXPORTS = {
    "SparkEngine": "adapter",
    "quote_identifier": "adapter",
    "quote_name": "adapter",
    "MINIMUM_JAVA": "java",
    "check_java": "java",
    "find_java": "java",
    "SparkSQLError": "session",
    "build_session": "session",
    "spark_error_message": "session",
    "to_engine_error": "session",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
