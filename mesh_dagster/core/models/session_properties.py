"""`session_properties (key = value, ...)`: Spark session settings for one model's queries.

SQLMesh applies a model's session properties to the engine session while that model is evaluated;
on Spark they are SQL configuration settings (`spark.sql.shuffle.partitions = 4`,
`'spark.sql.session.timeZone' = 'America/New_York'`). Here they are set before the model's pre-
statements and restored after its audits, and a model with settings is evaluated alone
(execution/evaluate/evaluator.py, engine `session_settings`): Spark's settings belong to the whole
session, which concurrent models share, so another model never runs under them.
`model_defaults.session_properties` gives every model settings; the model's own win, key by key.
As in SQLMesh they are metadata: a change is a metadata change, the table is kept.

What cannot be set while a session runs is refused: at load, the settings known to be static (and
the one mesh's writes depend on); on Spark, any other the session refuses, before the model writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mesh_dagster.core.config.spark_settings import check_setting, setting_text
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import Value


def read_session_properties(value: Value, path: str) -> dict[str, str]:
    """`session_properties (key = value, ...)`: a key is a name (dotted or quoted), a value a string,
    a number or a boolean."""
    if value.kind != "group":
        raise ModelError("session_properties is written `session_properties (key = value, ...)`", path, value.line)
    settings: dict[str, str] = {}
    for item in value.items:
        key, text = _pair(item.raw, item.key, item.value)
        if key is None or text is None:
            raise ModelError(f"Session properties are written `key = value`, got '{item.raw}'", path, item.line)
        try:
            check_setting(key)
        except ValueError as e:
            raise ModelError(str(e), path, item.line) from None
        if key in settings:
            raise ModelError(f"Session property {key} is set twice", path, item.line)
        settings[key] = text
    return settings


def _pair(raw: str, key: str | None, value: Value | None) -> tuple[str | None, str | None]:
    """(key, value text) of one item: `key = value` is read by the definition reader when the key is
    one token; a dotted key (`spark.sql.x = 1`) is split here at its `=`."""
    if key is not None and value is not None and value.kind in ("string", "number", "scalar"):
        return key.strip("`\"'"), value.text
    name, eq, rest = raw.partition("=")
    if not eq or not name.strip() or not rest.strip():
        return None, None
    text = rest.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1].replace(text[0] * 2, text[0])
    return name.strip().strip("`\"'"), text


def merged(defaults: Mapping[str, Any], own: Mapping[str, str]) -> dict[str, str]:
    """`model_defaults.session_properties` under the model's own (the model wins, key by key)."""
    out = {key: setting_text(value) for key, value in defaults.items()}
    lowered = {key.lower(): key for key in out}
    for key, value in own.items():
        out.pop(lowered.get(key.lower(), key), None)
        out[key] = value
    return out
