"""A PySpark DataFrame that refuses to bring its rows to the driver, for Python models in tests.

A model returning `NoCollect(df)` proves, from the Python side, that mesh never collects its
output: every DataFrame method that moves rows to the driver raises, and what mesh did with the
frame is recorded in `EVENTS` (a real module: the model's stored code imports it by name).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.classic.dataframe import DataFrame

EVENTS: list[str] = []
DRIVER_METHODS = ("collect", "toPandas", "toLocalIterator", "take", "head", "first", "tail", "toArrow",
                  "_collect_as_arrow", "show", "toJSON", "foreach", "foreachPartition")


class NoCollect(DataFrame):
    def __init__(self, df: DataFrame):
        super().__init__(df._jdf, df.sparkSession)

    def createOrReplaceTempView(self, name: str) -> None:
        EVENTS.append("registered")
        super().createOrReplaceTempView(name)

    @property
    def rdd(self) -> Any:
        self._refuse("rdd")


def _refusing(method: str) -> Any:
    def refuse(self: NoCollect, *args: Any, **kwargs: Any) -> Any:
        self._refuse(method)

    return refuse


def _refuse(self: NoCollect, method: str) -> None:
    EVENTS.append(method)
    raise AssertionError(f"{method}() would bring the model's rows to the driver")


NoCollect._refuse = _refuse  # type: ignore[attr-defined]
for _method in DRIVER_METHODS:
    setattr(NoCollect, _method, _refusing(_method))
