"""Reading the files users write: UTF-8 text (with or without a byte-order mark), or one clear error.

Every user file (models, audits, seeds, config, external models) is decoded here, so a BOM that an
editor added never changes what a file means, and a binary or Latin-1 file is reported with its
name and the line and column of the first byte that is not text, instead of a UnicodeDecodeError
traceback from somewhere deep in the loader.
"""

from __future__ import annotations

import codecs
import os
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


def outside_project(path: Path, root: Path, what: str) -> str | None:
    """Why `path` (named `what` in the message) is not read: it leads outside the project folder
    `root`; None when it stays inside.

    A symbolic link, a `..` or an absolute path in a project would let whoever pushes a branch make
    the loader read any file of the host (`/etc/passwd`, a key) and show its first line in an
    error. Links that stay inside the project are fine. The message says where the path leads,
    never a word of what that file holds (nothing of it is read).
    """
    target = Path(os.path.realpath(path))
    if target.is_relative_to(os.path.realpath(root)):
        return None
    return (f"{what} leads to {target}, outside the project: a project reads files inside its own folder only "
            f"(copy the file into the project)")


def parse_yaml(text: str, shown: str, error: type[MeshError] = ModelError) -> Any:
    """The YAML document in `text` (None when empty) from the file `shown`; invalid YAML (a duplicate
    key, an alias bomb included) is an `error` at its line."""
    try:
        return load_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise error(f"Invalid YAML: {getattr(e, 'problem', e)}", shown, mark.line + 1 if mark else None) from None


def load_yaml(text: str) -> Any:
    """The document in `text`, read by `ProjectYamlLoader`; a yaml.YAMLError says what is wrong where."""
    loader = ProjectYamlLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def compose_yaml(text: str) -> yaml.Node | None:
    """The node tree of `text` (lines of keys), with the checks of `ProjectYamlLoader`."""
    loader = ProjectYamlLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


# What aliases may add to one document, in nodes: far above any real use of `<<: *defaults`, far
# below what takes seconds or gigabytes ("billion laughs": nine aliases of nine aliases of ...).
ALIAS_NODE_BUDGET = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


class ProjectYamlLoader(yaml.SafeLoader):
    """The one YAML reader of project files (config, external models, unit tests, fixtures).

    PyYAML keeps the last of two equal keys without a word (a second `protected_environments: {}`
    would silently unprotect prod) and lets aliases expand without bound (a few lines that become
    billions of nodes when a dict is walked or printed). Both are refused here, as marked YAML
    errors, so every caller reports them like any other YAML mistake: at their line.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._alias_nodes = 0
        self._sizes: dict[int, int] = {}

    def compose_document(self) -> yaml.Node | None:
        self._alias_nodes = 0
        return super().compose_document()

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None:
                self._count_alias(event, node)
        try:
            return super().compose_node(parent, index)
        except RecursionError:
            raise yaml.MarkedYAMLError(problem="nested too deeply", problem_mark=self.peek_event().start_mark) from None

    def compose_mapping_node(self, anchor: str | None) -> yaml.MappingNode:
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_TAG:
                continue
            first = seen.setdefault((key.tag, key.value), key.start_mark.line + 1)
            if first != key.start_mark.line + 1:
                raise yaml.MarkedYAMLError(
                    problem=f"duplicate key '{key.value}' (first on line {first}): YAML would silently keep only "
                            f"the last one, remove or rename one of them", problem_mark=key.start_mark)
        return node

    def _count_alias(self, event: yaml.AliasEvent, node: yaml.Node) -> None:
        if node.end_mark is None:  # still being composed: the alias is inside the node it names
            raise yaml.MarkedYAMLError(problem=f"alias *{event.anchor} is used inside the node it names",
                                       problem_mark=event.start_mark)
        self._alias_nodes += self._size(node)
        if self._alias_nodes > ALIAS_NODE_BUDGET:
            raise yaml.MarkedYAMLError(
                problem=f"aliases expand to more than {ALIAS_NODE_BUDGET:,} values (at *{event.anchor}): "
                        f"refused as an alias bomb, write the values out or use fewer nested aliases",
                problem_mark=event.start_mark)

    def _size(self, node: yaml.Node) -> int:
        """How many nodes `node` stands for once its aliases are expanded (each node counted once)."""
        known = self._sizes.get(id(node))
        if known is not None:
            return known
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(self._size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(self._size(k) + self._size(v) for k, v in node.value)
        self._sizes[id(node)] = size
        return size


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
