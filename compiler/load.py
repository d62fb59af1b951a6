"""Stage 1, load: bytes of a run file → plain Python data plus the position of every value.

YAML has traps a schema never sees (duplicate keys, tags, alias bombs, `3.10` read as a
number), so the loader is strict: it screens the bytes, then the event stream (iterative,
so depth is bounded before anything recurses), then builds plain dicts, lists and scalars
from ruamel's node graph, recording where each value and key came from.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml import events as ev
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .diagnostics import Diagnostic, ObcError

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32
# Values built from the document, aliases expanded: a run file has a few hundred; this bounds
# what an alias bomb ("billion laughs") can make us build.
MAX_VALUES = 100_000

Path_ = tuple[str | int, ...]

_CORE_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"


@dataclass(frozen=True, slots=True)
class Mark:
    """A 1-based line and column."""

    line: int
    column: int


@dataclass(slots=True)
class Source:
    """A loaded run file: its plain data, and where each value and mapping key stands."""

    file: str
    directory: Path
    data: Any = None
    values: dict[Path_, Mark] = field(default_factory=dict)
    keys: dict[Path_, Mark] = field(default_factory=dict)
    raw: dict[Path_, str] = field(default_factory=dict)

    def mark(self, path: Path_, *, key: bool = False) -> Mark:
        """Return the position of the value at `path` (or of its key), else the nearest parent."""
        table = self.keys if key else self.values
        while path:
            if path in table:
                return table[path]
            path, table = path[:-1], self.values
        return self.values.get((), Mark(1, 1))


class LoadError(Exception):
    """Raised inside this module to stop loading one file with one located diagnostic."""

    def __init__(self, mark: Mark, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.mark, self.message, self.hint = mark, message, hint


def display_name(path: Path) -> str:
    """Return how a file is named in diagnostics and headers: relative, never absolute."""
    return Path(os.path.relpath(path.absolute())).as_posix()


def load_source(path: Path) -> tuple[Source, list[Diagnostic]]:
    """Read and parse the run file at `path`; problems come back as diagnostics."""
    source = Source(file=display_name(path), directory=path.parent)
    try:
        data = _read_bytes(path)
        text = _decode(data)
        node = _compose(text)
        source.data = _Builder(source, text).build(node, ())
    except LoadError as problem:
        mark = problem.mark
        return source, [Diagnostic(source.file, mark.line, mark.column, "", problem.message,
                                   problem.hint)]
    return source, []


def _read_bytes(path: Path) -> bytes:
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ObcError(f"{display_name(path)}: cannot read: {error.strerror}") from error
    if len(data) > MAX_FILE_BYTES:
        raise LoadError(Mark(1, 1), "file is larger than 1 MiB; a run file is a few dozen lines")
    return data


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        raise LoadError(Mark(1, 1), "file starts with a byte order mark (BOM)",
                        "save the file as UTF-8 without BOM")
    nul = data.find(b"\0")
    if nul >= 0:
        raise LoadError(_mark_of_offset(data, nul), "file contains a NUL byte",
                        "a run file is text; NUL cannot reach a shell script")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LoadError(_mark_of_offset(data, error.start),
                        f"file is not valid UTF-8 (byte 0x{data[error.start]:02x})") from error


def _mark_of_offset(data: bytes, offset: int) -> Mark:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return Mark(data.count(b"\n", 0, offset) + 1, offset - line_start + 1)


def _yaml() -> YAML:
    return YAML(typ="safe", pure=True)


def _compose(text: str) -> Node:
    yaml = _yaml()
    try:
        _screen_events(yaml, text)
        node = yaml.compose(io.StringIO(text))
    except MarkedYAMLError as error:
        raise _syntax_error(error, text) from error
    except YAMLError as error:  # unmarked: rare, but never a traceback
        raise LoadError(Mark(1, 1), f"not valid YAML: {error}") from error
    if node is None:
        raise LoadError(Mark(1, 1), "file is empty; a run file is a mapping with 'version', 'id', "
                        "'runtime' and 'trainer' or 'steps'")
    return node


def _screen_events(yaml: YAML, text: str) -> None:
    """Reject what obc does not read (tags, several documents) and bound the nesting depth."""
    depth = documents = 0
    for event in yaml.parse(io.StringIO(text)):
        mark = Mark(event.start_mark.line + 1, event.start_mark.column + 1)
        if isinstance(event, ev.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise LoadError(mark, "file holds more than one YAML document",
                                "a run file is one document: remove the second '---'")
        elif isinstance(event, ev.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise LoadError(mark, f"nesting is deeper than {MAX_DEPTH} levels")
        elif isinstance(event, ev.CollectionEndEvent):
            depth -= 1
        if getattr(event, "tag", None) is not None:
            raise LoadError(mark, f"YAML tags such as '{event.tag}' are not allowed",
                            "remove the tag; write the value as plain YAML")


def _syntax_error(error: MarkedYAMLError, text: str) -> LoadError:
    mark = error.problem_mark or error.context_mark
    where = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
    line = text.split("\n")[where.line - 1] if mark else ""
    if "\t" in line[: len(line) - len(line.lstrip())] or "'\\t'" in str(error.problem):
        return LoadError(where, "a tab is used for indentation",
                         "YAML indents with spaces only; replace the tab with spaces")
    problem = " ".join(str(part) for part in (error.context, error.problem) if part)
    return LoadError(where, f"YAML syntax error: {problem}")


class _Builder:
    """Builds plain data from a node graph, recording positions and bounding alias expansion."""

    def __init__(self, source: Source, text: str) -> None:
        self.source, self.text = source, text
        self.constructor = _yaml().constructor
        self.count = 0

    def build(self, node: Node, path: Path_) -> Any:
        self.count += 1
        if self.count > MAX_VALUES:
            raise LoadError(self._mark(node), f"document expands to more than {MAX_VALUES:,} "
                            "values through aliases", "an alias bomb? use fewer, smaller aliases")
        self.source.values[path] = self._mark(node)
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        if isinstance(node, SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self._scalar(node, path)

    def _mapping(self, node: MappingNode, path: Path_) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node)
            if key in result:
                first = self.source.keys[(*path, key)]
                raise LoadError(self._mark(key_node), f"duplicate key '{key}' (first at line "
                                f"{first.line}, column {first.column})",
                                "YAML keeps only one of them; remove or rename one")
            self.source.keys[(*path, key)] = self._mark(key_node)
            result[key] = self.build(value_node, (*path, key))
        return result

    def _key(self, node: Node) -> str:
        if isinstance(node, ScalarNode) and node.tag == _MERGE:
            raise LoadError(self._mark(node), "merge keys ('<<') are not supported",
                            "write the keys out, or use an alias (*name) for a whole value")
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            shown = node.value if isinstance(node, ScalarNode) else "a collection"
            raise LoadError(self._mark(node), f"mapping key {shown!s} is not a string",
                            f"quote it: '{shown}'" if isinstance(node, ScalarNode) else None)
        return node.value

    def _scalar(self, node: ScalarNode, path: Path_) -> Any:
        raw = self.text[node.start_mark.index:node.end_mark.index]
        if raw.startswith("&"):  # the anchor is part of the node's text, not of its value
            raw = raw.split(None, 1)[-1]
        self.source.raw[path] = raw
        if node.tag == _TIMESTAMP:
            return node.value  # a date is text to obc; keep exactly what was written
        if node.tag not in _CORE_TAGS:
            raise LoadError(self._mark(node), f"unsupported YAML type {node.tag}")
        try:
            value = self.constructor.construct_object(node, deep=True)
        except ValueError as error:  # e.g. an integer of more than 4,300 digits
            raise LoadError(self._mark(node), f"cannot read this number: {error}",
                            "quote it if it is text") from error
        if isinstance(value, str) and "\0" in value:
            raise LoadError(self._mark(node), "string holds a NUL character",
                            "NUL cannot reach a shell script or a process; remove it")
        if isinstance(value, str) and not _encodable(value):
            raise LoadError(self._mark(node), "string holds a lone surrogate (\\uD800-\\uDFFF), "
                            "which is not text")
        return value

    @staticmethod
    def _mark(node: Node) -> Mark:
        return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_attachment(source: Source, relative: str) -> str:
    """Return the text of a file named relative to the run file; raise OSError or ValueError."""
    path = source.directory / relative
    with path.open("rb") as stream:
        data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError("is larger than 1 MiB")
    if b"\0" in data:
        raise ValueError("contains a NUL byte; only text files can be embedded")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError("is not UTF-8 text") from error


def parse_mapping(text: str) -> dict[str, Any]:
    """Parse YAML text that must hold one mapping (an Axolotl config); raise ValueError."""
    try:
        data = _yaml().load(text)
    except YAMLError as error:
        raise ValueError(f"is not valid YAML: {str(error).splitlines()[0]}") from error
    if not isinstance(data, dict):
        raise ValueError("does not hold a YAML mapping")
    return data
