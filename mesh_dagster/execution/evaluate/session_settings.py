"""A model's Spark session settings (`session_properties`), in effect for its queries only.

Spark's SQL settings belong to the session, and the models of an apply or a run are evaluated by
several threads on one session (`concurrent_tasks`, `batch_concurrency`): a setting made for one
model would leak into the queries of every model running beside it. A fresh session per model
(`newSession()`) is no way out: Spark Connect sessions have none, and a Python model's output is a
temporary view of the session that writes it. So evaluations pass a gate: any number of models
without settings run side by side; a model with settings waits until the others are done, runs
alone with its settings set, and restores the previous values before the others go on (a model
waiting with settings goes before models arriving after it, so it is never starved). Only projects
that use settings pay for it, and only while such a model runs.

Other processes (Dagster runs, the CLI) have sessions of their own (their own Spark Connect
session, or their own local Spark): a setting never crosses them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from mesh_dagster.core.errors import EngineError, ModelError
from mesh_dagster.core.models.model import Model
from mesh_dagster.execution.ports import Engine


class SettingsGate:
    """Shared for evaluations without settings, exclusive for one with settings."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0  # evaluations without settings in progress
        self._alone = False  # an evaluation with settings in progress
        self._waiting = 0  # evaluations with settings waiting for the others

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._alone and not self._waiting)
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._alone and not self._running)
            self._waiting -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()


_GATES: dict[int, SettingsGate] = {}
_GATES_LOCK = threading.Lock()


def gate_for(engine: Engine) -> SettingsGate:
    """One gate per Spark session in this process (engines built on one session share it)."""
    session = getattr(engine.session, "spark", None)  # test engines may have none
    key = id(session if session is not None else engine)
    with _GATES_LOCK:
        return _GATES.setdefault(key, SettingsGate())


@contextmanager
def model_settings(engine: Engine, model: Model) -> Iterator[None]:
    """The block runs with the model's session settings set (and alone), or beside other models
    without settings; a setting Spark refuses fails the model, at its line, before anything runs."""
    gate = gate_for(engine)
    if not model.session_properties:
        with gate.shared():
            yield
        return
    with gate.exclusive():
        try:
            previous = engine.session.set_session_settings(model.session_properties)
        except EngineError as e:
            raise ModelError(f"session_properties of {model.name}: {e.message}", model.path,
                             model.line_of("session_properties")) from e
        try:
            yield
        finally:
            engine.session.restore_session_settings(previous)

