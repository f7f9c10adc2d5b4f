"""Stand-ins for objects only a JVM makes, for unit tests that must not start one."""

from __future__ import annotations


class JavaException:
    """A Java exception as Py4J exposes it to PySpark: a message and a cause chain."""

    def __init__(self, message: str | None, cause: JavaException | None = None):
        self._message, self._cause = message, cause

    def getMessage(self) -> str | None:  # noqa: N802 - Java's name
        return self._message

    def getCause(self) -> JavaException | None:  # noqa: N802
        return self._cause
