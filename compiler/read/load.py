"""Stage 1, load: bytes of a run file → plain Python data plus the position of every value.

YAML has traps a schema never sees (duplicate keys, tags, alias bombs, `3.10` read as a
number), so the loader is strict: it screens the bytes here, then the event stream and the
node graph with its aliases expanded (screen.py), and only then builds plain dicts, lists and
scalars, recording where each value and key came from.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml.constructor import SafeConstructor

from ..core.diagnostics import Diagnostic, ObcError, field_path
from ..core.files import read_at_most
from ..core.project import relative_name
from ..core.text import describe_character, find_invisible, quoted
from .screen import (
    YAML_TAG,
    AnyNode,
    DocumentLoader,
    LoadError,
    Mark,
    Path_,
    compose,
    mark_of_offset,
    node_mark,
    shorthand,
)

MAX_FILE_BYTES = 1024 * 1024

_CORE_TAGS = {YAML_TAG + name for name in ("str", "int", "float", "bool", "null")}
_STR, _NULL = YAML_TAG + "str", YAML_TAG + "null"
_TIMESTAMP = YAML_TAG + "timestamp"
_MERGE = YAML_TAG + "merge"


@dataclass(slots=True)
class Source:
    """A loaded run file: its plain data, and where each value and mapping key stands."""

    file: str
    directory: Path
    data: Any = None
    values: dict[Path_, Mark] = field(default_factory=dict)
    keys: dict[Path_, Mark] = field(default_factory=dict)
    raw: dict[Path_, str] = field(default_factory=dict)
    # The sha256 of the file's bytes: the script's header names its inputs by hash.
    sha256: str = ""

    def mark(self, path: Path_, *, key: bool = False) -> Mark:
        """Return the position of the value at `path` (or of its key), else the nearest parent."""
        table = self.keys if key else self.values
        while path:
            if path in table:
                return table[path]
            path, table = path[:-1], self.values
        return self.values.get((), Mark(1, 1))

    def problem(self, path: Path_, message: str, hint: str | None = None, *,
                key: bool = False) -> Diagnostic:
        """A problem with the value at `path` (or its key), located where `mark` finds it."""
        mark = self.mark(path, key=key)
        return Diagnostic(self.file, mark.line, mark.column, field_path(path), message, hint)


def display_name(path: Path) -> str:
    """Return how a file is named in diagnostics and headers: relative, never absolute, and
    one line of visible text: bytes that are not UTF-8 as \\xe9, control and invisible
    characters as \\x1b or \\u202e (a name must not rewrite a terminal or the header)."""
    return relative_name(path)


def load_source(path: Path) -> tuple[Source, list[Diagnostic]]:
    """Read and parse the run file at `path`; problems come back as diagnostics."""
    source = Source(file=display_name(path), directory=path.parent)
    try:
        data = _read_bytes(path)
    except LoadError as problem:
        return source, [_located(source, problem)]
    return parse_source(source, data)


def parse_source(source: Source, data: bytes) -> tuple[Source, list[Diagnostic]]:
    """Parse the bytes of a YAML file read as `source` (a run file, a site policy) into its
    data and positions, as strictly as a run file; problems come back as diagnostics."""
    try:
        source.sha256 = hashlib.sha256(data).hexdigest()
        text = _decode(data)
        node, loader = compose(text)
        source.data = _Builder(source, text, loader).build(node, ())
    except LoadError as problem:
        return source, [_located(source, problem)]
    return source, []


def _located(source: Source, problem: LoadError) -> Diagnostic:
    mark = problem.mark
    return Diagnostic(source.file, mark.line, mark.column, field_path(problem.path),
                      problem.message, problem.hint)


def _read_bytes(path: Path) -> bytes:
    try:
        with path.open("rb") as stream:
            data = read_at_most(stream, MAX_FILE_BYTES)
    except OSError as error:
        raise ObcError(f"{display_name(path)}: cannot read: {error.strerror}") from error
    if len(data) > MAX_FILE_BYTES:
        raise LoadError(Mark(1, 1), "file is larger than 1 MiB; a run file is a few dozen lines",
                        "put large content in files: and name it from the run file")
    return data


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        raise LoadError(Mark(1, 1), "file starts with a byte order mark (BOM)",
                        "save the file as UTF-8 without BOM")
    nul = data.find(b"\0")
    if nul >= 0:
        raise LoadError(mark_of_offset(data, nul), "file contains a NUL byte",
                        "a run file is text; NUL cannot reach a shell script")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LoadError(mark_of_offset(data, error.start),
                        f"file is not valid UTF-8 (byte 0x{data[error.start]:02x})",
                        "save the file as UTF-8") from error


class _Builder:
    """Builds plain data from a measured node graph (ruamel's nodes or PyYAML's, screen.py),
    recording positions."""

    def __init__(self, source: Source, text: str, loader: DocumentLoader) -> None:
        self.source, self.text = source, text
        self.constructor = _ScalarConstructor(loader=loader)

    def build(self, node: AnyNode, path: Path_) -> Any:
        self.source.values[path] = self._position(node)
        if node.id == "mapping":
            return self._mapping(node, path)
        if node.id == "sequence":
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self._scalar(node, path)

    def _position(self, node: AnyNode) -> Mark:
        if node.id == "scalar" and node.start_mark.index == node.end_mark.index:
            # An empty value: ruamel marks the next token, often lines below; point just
            # after the ':' or '-' that precedes it instead.
            before = self.text[: node.start_mark.index].rstrip()
            return mark_of_offset(self.text, len(before))
        return node_mark(node)

    def _mapping(self, node: AnyNode, path: Path_) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node, path)
            if key in result:
                first = self.source.keys[(*path, key)]
                raise LoadError(node_mark(key_node), f"duplicate key {quoted(key)}: also at line "
                                f"{first.line}, column {first.column}",
                                "YAML would silently keep only the last one; remove or "
                                "rename one", (*path, key))
            self.source.keys[(*path, key)] = node_mark(key_node)
            result[key] = self.build(value_node, (*path, key))
        return result

    def _key(self, node: AnyNode, path: Path_) -> str:
        if node.id == "scalar" and node.tag == _MERGE:
            raise LoadError(node_mark(node), "merge keys ('<<') are not supported",
                            "write the keys out, or use an alias (*name) for a whole value",
                            path)
        if node.id != "scalar":
            raise LoadError(node_mark(node), "a mapping key must be a string, not a "
                            f"{'mapping' if node.id == 'mapping' else 'list'}",
                            None, path)
        if node.tag != _STR:
            raw = self._raw(node)
            shown = f"{raw} as {node.tag.removeprefix(YAML_TAG)}" if raw else \
                "an empty key as null"
            raise LoadError(node_mark(node), f"a mapping key must be a string; YAML reads {shown}",
                            f"quote it: \"{raw}\"", path)
        return _text(node, node.value, (*path, node.value))

    def _raw(self, node: AnyNode) -> str:
        """Return the text of a scalar as written in the file, without its anchor."""
        raw = self.text[node.start_mark.index:node.end_mark.index]
        if raw.startswith("&"):
            raw = raw.split(None, 1)[-1]
        return raw

    def _scalar(self, node: AnyNode, path: Path_) -> Any:
        self.source.raw[path] = self._raw(node)
        if node.tag == _TIMESTAMP:
            return node.value  # a date is text to obc; keep exactly what was written
        if node.tag not in _CORE_TAGS:  # the screen refused explicit tags already
            raise LoadError(node_mark(node), f"unsupported YAML type {shorthand(node.tag)}",
                            "quote the value", path)
        try:
            value = self.constructor.construct_object(node, deep=True)
        except ValueError as error:  # e.g. an integer of more than 4,300 digits
            raise LoadError(node_mark(node), "this number is too large to read",
                            "quote it if it is text", path) from error
        return _text(node, value, path) if isinstance(value, str) else value


class _ScalarConstructor(SafeConstructor):
    """ruamel's constructor of scalars, for PyYAML's scalar nodes too (ruamel's own check that
    a node is a scalar knows its own class only)."""

    def construct_scalar(self, node: AnyNode) -> str:
        return node.value


# Control characters other than tab and newline: YAML refuses them raw, but a double-quoted
# escape ("\r", "\e") lets them in, and a terminal showing the script would then show
# something else than what runs (a carriage return hides what precedes it on the line).
_CONTROL = re.compile("[\x01-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_NAMES = {"\r": "carriage return", "\x1b": "escape", "\b": "backspace"}


def _text(node: AnyNode, value: str, path: Path_) -> str:
    """Return a string read from the file, refusing what double-quoted escapes can put in."""
    if "\0" in value:
        raise LoadError(node_mark(node), "string holds a NUL character",
                        "NUL cannot reach a shell script or a process; remove it", path)
    control = _CONTROL.search(value)
    if control:
        char = control.group()
        name = f" ({_CONTROL_NAMES[char]})" if char in _CONTROL_NAMES else ""
        raise LoadError(node_mark(node), f"string holds the control character U+{ord(char):04X}"
                        f"{name}", "a terminal would show the script differently from what "
                        "it runs; remove it", path)
    if value.isascii():  # most are: neither a surrogate nor an invisible character is
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise LoadError(node_mark(node), "string holds a lone surrogate (\\uD800-\\uDFFF), "
                        "which is not text", "remove the escape", path) from error
    invisible = find_invisible(value) if is_script_text(path) else None
    if invisible:
        raise LoadError(node_mark(node), f"string holds {describe_character(invisible)}, which is "
                        "invisible or reorders the text around it", "the script would show "
                        "differently from what it runs (Trojan Source); remove it", path)
    return value


def is_script_text(path: Path_) -> bool:
    """Whether a string reaches the script as code or header text: all but extension keys
    (`x-*`, ignored) and an inline trainer config, which is embedded content, kept exact."""
    top = path[0] if path else ""
    inline_config = len(path) > 3 and top == "trainer" and path[2] == "config"
    return not (isinstance(top, str) and top.startswith("x-")) and not inline_config
