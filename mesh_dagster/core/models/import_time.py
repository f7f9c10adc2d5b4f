"""Module-level values computed when a project's Python file is imported, as a plan stores them.

Stored code (core/models/python_env.py) runs a global's assignment again at every evaluation. For
`RATE = 3` or `PATTERN = re.compile("[a-z]+")` that is the same value every time. For
`RATE = int(os.environ.get("RATE", "1"))` or `MAP = json.loads((HERE / "map.json").read_text())` it
is not: `mesh run`, a Dagster materialization or the apply of an approved plan would compute prod
from the variable or file as it is then, and the plan would never have shown the change. So:

- An assignment whose expression **reads outside the code** (see below) is stored as the value it
  had when the project was loaded for the plan, when that value is **plain data**: None, bool,
  int, float, str, bytes, date, datetime (naive or at a fixed offset), time, timedelta, Decimal,
  and lists, tuples, dicts, sets and frozensets of them. Its stored text is that value, with the
  expression it came from as a comment (`RATE = 3  # as computed when the plan was made: ...`), at
  the assignment's file and line: the plan diff shows it, the data hash follows it, and every
  evaluation uses it without running the expression again.
- Such a value that is not plain data (an object built from a file or the environment) cannot be
  stored: it stays code, run again at each evaluation, and the plan says so in one line naming the
  value, its file and line, and the models using it (`UncapturedValue`).
- Every other assignment stays code, as written: literals, and values computed from the code alone
  (`re.compile("...")`, `logging.getLogger(__name__)`, a StructType of literals, `HERE =
  Path(__file__).parent`), which give the same value at every evaluation. So a project whose
  values read nothing outside the code keeps its fingerprints.

An expression reads outside the code when it uses (directly, or through the project's functions,
classes or not-storable values it calls or reads) one of: the process environment (`os.environ`,
`os.getenv`, `sys.argv`, `input`, `load_dotenv`), the file system (`open`, `read`, `read_text`,
`read_*` such as `pandas.read_csv`, `load`/`*_load` such as `json.load` and `yaml.safe_load`,
`glob`, `iterdir`, `listdir`, `exists`, `stat`, `cwd`, `home`, `expanduser`...), the clock (`now`,
`today`, `utcnow`, the `time` module) or chance and the host (`random`, `secrets`, `uuid`, `socket`,
`subprocess`, `platform`, `getpass`, `tempfile`, `requests`, `urllib.request`). These are
recognised by name: a library function reading a file under another name is not.
"""

from __future__ import annotations

import ast
import builtins
import datetime
import decimal
import inspect
import math
import os
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

# Attribute and function names that read the environment, files or the clock.
_READING_NAMES = frozenset({
    "environ", "environb", "getenv", "getenvb", "argv", "input", "open", "read", "load", "glob", "rglob",
    "iterdir", "listdir", "scandir", "walk", "exists", "isfile", "isdir", "is_file", "is_dir", "stat",
    "getsize", "getmtime", "cwd", "getcwd", "home", "expanduser", "expandvars", "urlopen", "get_data",
    "now", "today", "utcnow",
})
_READING_PREFIXES = ("read_", "readline", "load_")  # read_text, read_csv, readlines, load_dotenv...
_READING_SUFFIXES = ("_load",)  # safe_load, full_load
# Modules any function of which reads outside the code.
_READING_MODULES = frozenset({"random", "secrets", "uuid", "time", "socket", "subprocess", "platform", "getpass",
                              "glob", "tempfile", "urllib.request", "requests"})
# Where functions imported by name come from (`from os import getenv`, `from os.path import exists`).
_READING_FUNCTION_MODULES = _READING_MODULES | {"os", "posix", "nt", "genericpath", "io"}
_READ_OBJECTS = (os.environ, os.environb, sys.argv)
_MISSING: Any = object()


class UncapturedValue(BaseModel):
    """A global computed at import from outside the code that is not plain data: its code runs
    again at every evaluation, and may not give what was planned."""

    model_config = ConfigDict(frozen=True)

    name: str
    path: str
    line: int
    kind: str  # its type's name
    reads: str  # what it reads, as written (`os.environ`, `read_text`)

    def message(self, users: Iterable[str]) -> str:
        return (f"{self.path}:{self.line}: {self.name} (a {self.kind}) is computed when its file is imported and reads "
                f"outside the code ({self.reads}), but is not plain data, so the plan cannot store its value: every "
                f"evaluation of {', '.join(sorted(users))} computes it again and may not get what was planned. Make it "
                "plain data (numbers, strings, dates, lists, dicts), or read the setting as a variable "
                "(context.var / @VAR), which the plan captures")


def outside_read(node: ast.AST, namespace: Mapping[str, Any], own: Callable[[str], bool]) -> str | None:
    """The first thing the code `node` reads outside the code, as written; None when it reads nothing
    (as far as the names it uses tell: see the module docstring). `namespace` is its module's globals;
    `own` tells the project's modules, whose functions are followed by the caller instead."""
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute) and _is_reading_name(child.attr):
            return f"{child.value.id}.{child.attr}" if isinstance(child.value, ast.Name) else child.attr
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
            value = namespace.get(child.id, getattr(builtins, child.id, _MISSING))
            if _reads(value, own):
                return child.id
    return None


def _is_reading_name(name: str) -> bool:
    return name in _READING_NAMES or name.startswith(_READING_PREFIXES) or name.endswith(_READING_SUFFIXES)


def _reads(value: Any, own: Callable[[str], bool]) -> bool:
    """Whether an object a name holds reads outside the code when used."""
    if any(value is known for known in _READ_OBJECTS):
        return True
    if isinstance(value, types.ModuleType):
        return value.__name__ in _READING_MODULES
    if not inspect.isroutine(value):
        return False
    module = _routine_module(value)
    if module is None or own(module):
        return False
    return module in _READING_FUNCTION_MODULES or _is_reading_name(getattr(value, "__name__", ""))


def _routine_module(value: Any) -> str | None:
    """The module a function belongs to; for a bound method (`from random import random`), its object's."""
    module = getattr(value, "__module__", None)
    if module is None:
        owner = getattr(value, "__self__", None)
        module = getattr(owner if isinstance(owner, type) else type(owner), "__module__", None)
    return module


def captured_text(name: str, value: Any, expression: ast.expr) -> str | None:
    """The stored statement of a value computed at import: `name = <value>` and, as a comment, the
    expression it came from; None when the value is not plain data."""
    text = plain_text(value)
    if text is None:
        return None
    written = ast.unparse(expression).replace("\n", "\\n")
    return f"{name} = {text}  # as computed when the plan was made: {written}"


def plain_text(value: Any) -> str | None:
    """Python text giving `value` back, when it is plain data (see the module docstring); None when
    it is not. Deterministic: sets are written in order, whatever the process's hash seed."""
    try:
        return _plain(value)
    except RecursionError:  # a container holding itself
        return None


def _plain(value: Any) -> str | None:
    kind = type(value)
    if value is None or kind in (bool, int, str, bytes, complex):
        return repr(value)
    if kind is float:
        return repr(value) if math.isfinite(value) else f"float('{value}')"
    if kind in (list, tuple, set, frozenset):
        written = [_plain(item) for item in value]
        items = [text for text in written if text is not None]
        return _container(kind, items) if len(items) == len(written) else None
    if kind is dict:
        pairs = [(_plain(k), _plain(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    return _temporal(value)


def _container(kind: type, written: list[str]) -> str:
    if kind is list:
        return "[" + ", ".join(written) + "]"
    if kind is tuple:
        return "(" + ", ".join(written) + ("," if len(written) == 1 else "") + ")"
    inside = ", ".join(sorted(written))
    if kind is set:
        return "{" + inside + "}" if written else "set()"
    return "frozenset({" + inside + "})" if written else "frozenset()"


def _temporal(value: Any) -> str | None:
    """Dates, times, durations and decimals, built from their modules (nothing else is in scope)."""
    kind = type(value)
    if kind in (datetime.datetime, datetime.time) and value.tzinfo is not None \
            and type(value.tzinfo) is not datetime.timezone:
        return None  # a named zone (zoneinfo) is not written back by its offset
    if kind in (datetime.datetime, datetime.date, datetime.time):
        return f"__import__('datetime').{kind.__name__}.fromisoformat({value.isoformat()!r})"
    if kind is datetime.timedelta:
        return f"__import__('datetime').timedelta(days={value.days}, seconds={value.seconds}, " \
               f"microseconds={value.microseconds})"
    if kind is decimal.Decimal:
        return f"__import__('decimal').Decimal({str(value)!r})"
    return None
