"""Reading the files users write: UTF-8 text (with or without a byte-order mark), or one clear error.

Every user file (models, audits, seeds, config, external models) is decoded here, so a BOM that an
editor added never changes what a file means, and a binary or Latin-1 file is reported with its
name and the line and column of the first byte that is not text, instead of a UnicodeDecodeError
traceback from somewhere deep in the loader.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import yaml

from mesh_dagster.core.errors import MeshError, ModelError

UTF8_BOM = codecs.BOM_UTF8
_UTF8_NAMES = {"utf8", "utf_8", "utf-8", "utf-8-sig", "utf_8_sig", "u8"}


def read_text(path: Path, shown: str, error: type[MeshError] = ModelError, encoding: str = "utf-8") -> str:
    """The text of `path` (named `shown` in errors), decoded by `decode_text`."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise error(f"Cannot read the file: {e.strerror or e}", shown) from None
    return decode_text(data, shown, error, encoding)


def parse_yaml(text: str, shown: str) -> Any:
    """The YAML document in `text` (None when empty) from the file `shown`; invalid YAML is a
    ModelError at its line."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ModelError(f"Invalid YAML: {getattr(e, 'problem', e)}", shown, mark.line + 1 if mark else None) from None


def decode_text(data: bytes, shown: str, error: type[MeshError] = ModelError, encoding: str = "utf-8") -> str:
    """`data` as text; a leading UTF-8 BOM is dropped; NUL bytes or undecodable bytes are refused.

    `encoding` is UTF-8 unless the user named another one (a seed's `csv_settings (encoding = ...)`).
    """
    is_utf8 = encoding.lower().replace(" ", "") in _UTF8_NAMES
    if is_utf8 and data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    if is_utf8 and b"\x00" in data:
        line, column = _position(data, data.index(b"\x00"))
        raise error(f"Binary file, not text (NUL byte at column {column}): mesh reads UTF-8 text files only",
                    shown, line)
    try:
        return data.decode("utf-8" if is_utf8 else encoding)
    except UnicodeDecodeError as e:
        line, column = _position(data, e.start)
        name = "UTF-8" if is_utf8 else encoding
        raise error(f"Not {name} text: byte 0x{data[e.start]:02x} at column {column} cannot be decoded "
                    f"(save the file as {name})", shown, line) from None
    except LookupError:
        raise error(f"Unknown text encoding '{encoding}'", shown) from None


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of `offset`."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1
