"""An on-disk cache of parsed models and rendered queries, so warm plans skip sqlglot.

Entries are keyed by what determines them: a model file's content (plus everything project-wide
that changes how files are read: config defaults, variables, macro sources, our version and
sqlglot's), and a snapshot identifier for rendered queries. A stale key simply misses.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

CACHE_FILE = "project.pickle"
_FORMAT = 1


def content_key(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


class ProjectCache:
    def __init__(self, directory: Path, salt: str):
        self.path = directory / CACHE_FILE
        self.salt = salt
        self._models: dict[str, tuple[str, Any]] = {}
        self._rendered: dict[str, str | None] = {}
        self._dirty = False
        self._load()

    def _load(self) -> None:
        try:
            with self.path.open("rb") as f:
                data = pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError, TypeError):
            return
        if isinstance(data, dict) and data.get("format") == _FORMAT and data.get("salt") == self.salt:
            self._models = data.get("models", {})
            self._rendered = data.get("rendered", {})

    def model(self, rel_path: str, key: str) -> Any | None:
        entry = self._models.get(rel_path)
        return entry[1] if entry is not None and entry[0] == key else None

    def put_model(self, rel_path: str, key: str, value: Any) -> None:
        self._models[rel_path] = (key, value)
        self._dirty = True

    def rendered(self, identifier: str) -> tuple[bool, str | None]:
        if identifier in self._rendered:
            return True, self._rendered[identifier]
        return False, None

    def put_rendered(self, identifier: str, sql: str | None) -> None:
        self._rendered[identifier] = sql
        self._dirty = True

    def save(self) -> None:
        """Write atomically; a cache that cannot be written is just not a cache."""
        if not self._dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if len(self._rendered) > 20000:  # keep the file from growing forever
                self._rendered = dict(list(self._rendered.items())[-10000:])
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".project.")
            with os.fdopen(fd, "wb") as f:
                pickle.dump({"format": _FORMAT, "salt": self.salt, "models": self._models,
                             "rendered": self._rendered}, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
            self._dirty = False
        except OSError:
            pass
