"""Signals: the user's functions that say which of a model's intervals are ready to be computed.

A model lists them (`signals (files_landed(folder := 'raw'))`); the functions live in the
project's `signals/` folder (its `__init__.py` and `*.py` files), marked with `@signal()`:

    from mesh_dagster import signal

    @signal()
    def files_landed(batch, folder: str, execution_time):
        return [(start, end) for start, end in batch if landed(folder, start)]

This module loads and checks them, with no Spark and no state: every reference must name a
defined signal, and its arguments must fit the function's parameters and convert to their
annotations (as a Python macro's do, core/macros/coercion.py) — so a typo or a bad value is an error at
the model's file and line when the project loads, never a surprise in the middle of a run.
Calling them, and what their answers mean for a backfill, is execution's business
(execution/intervals/readiness.py): a signal may ask for the SparkSession, which only exists there.

The names `execution_time` and `spark` are given by the scheduler, not written by the model.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot.errors import ParseError, TokenError

from mesh_dagster.core.config.user_modules import UserPackage
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.coercion import CoercionError, UnsupportedAnnotation, coerce, resolved_annotations
from mesh_dagster.core.models.model import Model, SignalRef

USER_SIGNALS_PACKAGE = "mesh_user_signals"
# Parameters the scheduler fills in; a model cannot write them.
INJECTED = ("execution_time", "spark")
_SIGNAL_ATTR = "__mesh_signal__"


class SignalError(ModelError):
    """A signal raised, or answered something that is neither a bool nor ready ranges."""


def signal(fn: Callable | str | None = None, *, name: str | None = None) -> Any:
    """Mark a function of `signals/*.py` as a signal: `@signal()`, `@signal`, `@signal(name="x")`.

    The function is only tagged, not registered anywhere global, so two projects loaded in one
    process never share signals.
    """
    if callable(fn):  # bare `@signal`
        return signal(name=name)(fn)
    chosen = name or fn

    def tag(function: Callable) -> Callable:
        setattr(function, _SIGNAL_ATTR, (chosen or function.__name__).lower())
        return function

    return tag


@dataclass(frozen=True)
class SignalParameter:
    name: str  # as the function spells it
    annotation: Any
    required: bool


@dataclass(frozen=True)
class SignalFunction:
    """One `@signal` function and what a call of it may pass."""

    name: str
    fn: Callable
    path: str  # signals/x.py
    line: int | None
    parameters: dict[str, SignalParameter]  # lower-case name -> a parameter models write
    takes_any_keyword: bool  # **kwargs: arguments of any name are passed on unconverted
    takes_execution_time: bool
    takes_spark: bool

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


@dataclass(frozen=True)
class BoundSignal:
    """A model's reference to a signal with its arguments converted: ready to be called."""

    ref: SignalRef
    function: SignalFunction
    kwargs: dict[str, Any]
    model: str
    model_path: str | None

    def describe(self) -> str:
        return self.ref.describe()


@dataclass
class SignalRegistry:
    """A project's signals by lower-case name, and the package they were imported as."""

    functions: dict[str, SignalFunction] = field(default_factory=dict)
    package: UserPackage | None = None

    def get(self, name: str) -> SignalFunction | None:
        return self.functions.get(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self.functions

    def __len__(self) -> int:
        return len(self.functions)

    def names(self) -> list[str]:
        return sorted(self.functions)

    def bind(self, model: Model) -> list[BoundSignal]:
        """The model's signals, each with its arguments converted; any that does not fit is a
        `ModelError` at the model's file and the signal's line."""
        return [self._bind_one(model, ref) for ref in model.signals]

    def _bind_one(self, model: Model, ref: SignalRef) -> BoundSignal:
        line = ref.line or model.line_of("signals")
        function = self.get(ref.name)
        if function is None:
            raise ModelError(f"Model {model.name} uses unknown signal '{ref.name}'{self._hint(ref.name)}",
                             model.path, line)
        label = f"Signal {ref.name} of model {model.name}"
        kwargs: dict[str, Any] = {}
        for key, text in ref.args.items():
            if key in INJECTED:
                raise ModelError(f"{label}: argument '{key}' is given by the scheduler; do not write it",
                                 model.path, line)
            param = function.parameters.get(key.lower())
            if param is None and not function.takes_any_keyword:
                known = ", ".join(p.name for p in function.parameters.values()) or "none"
                raise ModelError(f"{label} has no argument '{key}' (its arguments: {known}; defined at "
                                 f"{function.where})", model.path, line)
            value = _parse(text, model.dialect, label, key, model.path, line)
            if param is None:
                kwargs[key] = value
                continue
            try:
                kwargs[param.name] = coerce(value, param.annotation, model.dialect)
            except CoercionError as e:
                raise ModelError(f"{label}: argument '{key}' {e}", model.path, line) from None
            except UnsupportedAnnotation as e:
                raise ModelError(f"Signal {ref.name}: parameter '{param.name}' {e}", function.path,
                                 function.line) from None
        missing = [p.name for p in function.parameters.values() if p.required and p.name not in kwargs]
        if missing:
            raise ModelError(f"{label} is missing argument '{missing[0]}' (write `{ref.name}({missing[0]} := ...)`)",
                             model.path, line)
        return BoundSignal(ref, function, kwargs, model.name, model.path)

    def _hint(self, name: str) -> str:
        if not self.functions:
            return " (the project's signals/ folder defines none)"
        close = difflib.get_close_matches(name.lower(), self.names(), n=3, cutoff=0.6)
        if close:
            return f". Did you mean {' or '.join(close)}?"
        return f" (signals defined: {', '.join(self.names())})"


def _parse(text: str, dialect: str, label: str, key: str, path: str | None, line: int) -> Any:
    try:
        parsed = sqlglot.parse_one(text, read=dialect)
    except (ParseError, TokenError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ModelError(f"{label}: argument '{key}' is not a SQL value: {first}", path, line) from None
    if parsed is None:
        raise ModelError(f"{label}: argument '{key}' is empty", path, line)
    return parsed


def load_signals(signals_dir: Path) -> SignalRegistry:
    """Import `signals/` as the package `mesh_user_signals` and collect its `@signal` functions."""
    package = UserPackage(USER_SIGNALS_PACKAGE, Path(signals_dir), "signals")
    registry = SignalRegistry(package=package)
    for module in package.import_all():
        for value in list(vars(module).values()):
            name = getattr(value, _SIGNAL_ATTR, None) if callable(value) else None
            if not isinstance(name, str):
                continue
            existing = registry.functions.get(name)
            if existing is not None and existing.fn is not value:
                raise ModelError(f"Signal '{name}' is defined twice (also in {existing.where})",
                                 *package.defined_in(value))
            registry.functions[name] = describe_signal(name, value, *package.defined_in(value))
    return registry


def describe_signal(name: str, fn: Callable, path: str, line: int | None) -> SignalFunction:
    """What a call of `fn` (defined at `path:line`) may pass: the batch first, then keyword arguments."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise ModelError(f"Signal '{name}' is not a function mesh can call", path, line) from None
    if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                            inspect.Parameter.POSITIONAL_OR_KEYWORD):
        raise ModelError(f"Signal '{name}' must take the batch of intervals as its first parameter "
                         f"(`def {fn.__name__}(batch, ...)`)", path, line)
    hints = resolved_annotations(fn)
    parameters: dict[str, SignalParameter] = {}
    injected: set[str] = set()
    takes_any_keyword = False
    for p in params[1:]:
        if p.kind == p.VAR_KEYWORD:
            takes_any_keyword = True
        elif p.kind == p.VAR_POSITIONAL:
            continue
        elif p.name in INJECTED:
            injected.add(p.name)
        elif p.kind == p.POSITIONAL_ONLY:
            if p.default is p.empty:
                raise ModelError(f"Signal '{name}': parameter '{p.name}' is positional-only, but models pass "
                                 "arguments by name", path, line)
        else:
            parameters[p.name.lower()] = SignalParameter(p.name, hints.get(p.name, Any), p.default is p.empty)
    return SignalFunction(name, fn, path, line, parameters, takes_any_keyword,
                          "execution_time" in injected, "spark" in injected)


def check_signals(models: dict[str, Model], registry: SignalRegistry) -> None:
    """Every model's signals name a defined signal with arguments it takes (see `SignalRegistry.bind`)."""
    for model in models.values():
        if not model.signals:
            continue
        if model.kind.is_symbolic:
            raise ModelError(f"{model.kind.name.value} models cannot have signals: they are never computed",
                             model.path, model.line_of("signals"))
        registry.bind(model)
