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
_FORMAT = 2  # bumped whenever what is pickled changes shape


def content_key(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


class ProjectCache:
    def __init__(self, directory: Path, salt: str):
        self.path = directory / CACHE_FILE
        self.salt = salt
        self._models: dict[str, tuple[str, Any]] = {}
        self._rendered: dict[str, str | None] = {}
        self._other: dict[str, dict[str, Any]] = {}  # namespace -> content key -> value
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
            self._other = data.get("other", {})

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

    def get(self, namespace: str, key: str) -> Any | None:
        """A value stored under a content key (e.g. a seed's verdict, a model's output columns)."""
        return self._other.get(namespace, {}).get(key)

    def put(self, namespace: str, key: str, value: Any) -> None:
        self._other.setdefault(namespace, {})[key] = value
        self._dirty = True

    def save(self) -> None:
        """Write atomically; a cache that cannot be written is just not a cache."""
        if not self._dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if len(self._rendered) > 20000:  # keep the file from growing forever
                self._rendered = dict(list(self._rendered.items())[-10000:])
            for namespace, values in self._other.items():
                if len(values) > 20000:
                    self._other[namespace] = dict(list(values.items())[-10000:])
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".project.")
            with os.fdopen(fd, "wb") as f:
                pickle.dump({"format": _FORMAT, "salt": self.salt, "models": self._models,
                             "rendered": self._rendered, "other": self._other}, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
            self._dirty = False
        except OSError:
            pass
