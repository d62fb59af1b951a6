"""Stage 1, load: bytes of a run file → plain Python data plus the position of every value.

YAML has traps a schema never sees (duplicate keys, tags, alias bombs, `3.10` read as a
number), so the loader is strict: it screens the bytes, then the event stream (iterative,
so depth is bounded before anything recurses), then measures the node graph with its aliases
expanded, and only then builds plain dicts, lists and scalars, recording where each value and
key came from.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml import events as ev
from ruamel.yaml.composer import Composer
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.resolver import VersionedResolver

from .diagnostics import Diagnostic, ObcError, field_path
from .project import shown
from .text import describe_character, find_invisible

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32
# What the document may expand to through aliases: a run file has a few hundred values and no
# more text than the file itself. These bound what an alias bomb ("billion laughs") could make
# obc build; they are checked on the node graph, before anything is built.
MAX_VALUES = 10_000
MAX_TEXT = 2 * MAX_FILE_BYTES

Path_ = tuple[str | int, ...]
# The field whose string names a file to embed, and whose mapping is embedded as a file.
CONFIG_FIELD: Path_ = ("trainer", "axolotl", "config")

_YAML_TAG = "tag:yaml.org,2002:"
_CORE_TAGS = {_YAML_TAG + name for name in ("str", "int", "float", "bool", "null")}
_STR, _NULL = _YAML_TAG + "str", _YAML_TAG + "null"
_TIMESTAMP = _YAML_TAG + "timestamp"
_MERGE = _YAML_TAG + "merge"


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


class LoadError(Exception):
    """Raised inside this module to stop loading one file with one located diagnostic."""

    def __init__(self, mark: Mark, message: str, hint: str | None = None,
                 path: Path_ = ()) -> None:
        super().__init__(message)
        self.mark, self.message, self.hint, self.path = mark, message, hint, path


def display_name(path: Path) -> str:
    """Return how a file is named in diagnostics and headers: relative, never absolute, and
    one line of visible text: bytes that are not UTF-8 as \\xe9, control and invisible
    characters as \\x1b or \\u202e (a name must not rewrite a terminal or the header)."""
    return shown(Path(os.path.relpath(path.absolute())))


def load_source(path: Path) -> tuple[Source, list[Diagnostic]]:
    """Read and parse the run file at `path`; problems come back as diagnostics."""
    source = Source(file=display_name(path), directory=path.parent)
    try:
        data = _read_bytes(path)
        source.sha256 = hashlib.sha256(data).hexdigest()
        text = _decode(data)
        node, loader = _compose(text)
        _Measure().check(node)
        source.data = _Builder(source, text, loader).build(node, ())
    except LoadError as problem:
        mark = problem.mark
        return source, [Diagnostic(source.file, mark.line, mark.column, field_path(problem.path),
                                   problem.message, problem.hint)]
    return source, []


def _read_bytes(path: Path) -> bytes:
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
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
        raise LoadError(_mark_of_offset(data, nul), "file contains a NUL byte",
                        "a run file is text; NUL cannot reach a shell script")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LoadError(_mark_of_offset(data, error.start),
                        f"file is not valid UTF-8 (byte 0x{data[error.start]:02x})",
                        "save the file as UTF-8") from error


def _mark_of_offset(data: bytes | str, offset: int) -> Mark:
    """Return the line and column of `offset` in `data` (columns count bytes or characters)."""
    newline = b"\n" if isinstance(data, bytes) else "\n"
    line_start = data.rfind(newline, 0, offset) + 1
    return Mark(data.count(newline, 0, offset) + 1, offset - line_start + 1)


def _yaml() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    # Composing recurses: bound it (for the run file, the event screen has done so already).
    yaml.max_depth = MAX_DEPTH
    # Reusing an anchor name is valid YAML; ruamel would print a warning on stderr.
    yaml.composer.warn_double_anchors = False
    return yaml


def _compose(text: str) -> tuple[Node, _EventLoader]:
    try:
        events, version = _screen_events(text)
        loader = _EventLoader(events, version)
        composer = Composer(loader)
        composer.warn_double_anchors = False  # reusing an anchor name is valid YAML
        node = composer.get_single_node()
    except MarkedYAMLError as error:
        raise syntax_error(error, text) from error
    except ReaderError as error:
        raise LoadError(_mark_of_offset(text, error.position),
                        f"file contains the control character U+{error.character:04X}, "
                        "which YAML does not allow",
                        "remove it; in a double-quoted string, an escape such as \\t "
                        "stands for a control character") from error
    except YAMLError as error:  # unmarked: rare, but never a traceback
        raise LoadError(Mark(1, 1), f"not valid YAML: {' '.join(str(error).split())}") from error
    except AssertionError as error:  # ruamel asserts on %YAML 1.0, 1.3, 1.11 (1.x, x not 1 or 2)
        directive = _VERSION_DIRECTIVE.search(text)
        if directive is None:
            raise
        raise _unsupported_version(_mark_of_offset(text, directive.start()),
                                   directive.group(1)) from error
    if node is None:
        raise LoadError(Mark(1, 1), "file is empty; a run file is a mapping with 'version', 'id', "
                        "'runtime' and 'trainer' or 'steps'")
    return node, loader


def _screen_events(text: str) -> tuple[list[ev.Event], tuple[int, int] | None]:
    """Reject what obc does not read (tags, several documents, YAML 1.1); bound depth and size.

    Returns the events, to be composed without parsing the text again (pure-Python parsing is
    most of what loading costs), and the YAML version the document declares, if any.
    """
    depth = documents = values = 0
    events: list[ev.Event] = []
    version = None
    with contextlib.closing(_parser().parse(io.StringIO(text))) as parsed:
        for event in parsed:
            events.append(event)
            mark = Mark(event.start_mark.line + 1, event.start_mark.column + 1)
            if isinstance(event, ev.DocumentStartEvent):
                documents += 1
                _screen_document(event, documents, mark)
                version = event.version
            values += isinstance(event, ev.ScalarEvent | ev.CollectionStartEvent)
            depth += isinstance(event, ev.CollectionStartEvent)
            depth -= isinstance(event, ev.CollectionEndEvent)
            if values > MAX_VALUES:  # stop early: pure-Python YAML reads ~10,000 values/second
                raise LoadError(mark, f"file holds more than {MAX_VALUES:,} values; a run file "
                                "has a few hundred", "put large content in files:")
            if depth > MAX_DEPTH:
                raise LoadError(mark, f"nesting is deeper than {MAX_DEPTH} levels")
            if getattr(event, "tag", None) is not None:
                raise LoadError(mark, f"YAML tag '{_shorthand(event.tag)}' is not allowed",
                                "remove the tag: obc reads plain YAML values only")
    return events, version


@cache
def _parser() -> YAML:
    """The YAML object that parses run files into events; it keeps no state between files."""
    return _yaml()


class _Replay:
    """What ruamel's Composer reads from a parser, served from events parsed already."""

    def __init__(self, events: list[ev.Event]) -> None:
        self.events, self.next = events, 0

    def check_event(self, *choices: type) -> bool:
        if self.next >= len(self.events):
            return False
        return not choices or isinstance(self.events[self.next], choices)

    def peek_event(self) -> ev.Event:
        return self.events[self.next]

    def get_event(self) -> ev.Event:
        self.next += 1
        return self.events[self.next - 1]


class _EventLoader:
    """What ruamel's Composer and constructor need of a loader: the replayed events, a
    resolver for the document's YAML version (1.2 unless it declares one), the depth bound."""

    max_depth = MAX_DEPTH

    def __init__(self, events: list[ev.Event], version: tuple[int, int] | None) -> None:
        self._parser = _Replay(events)
        self._resolver = VersionedResolver(version=version, loader=self)




def _screen_document(event: ev.DocumentStartEvent, number: int, mark: Mark) -> None:
    if number > 1:
        raise LoadError(mark, "file holds more than one YAML document",
                        "a run file is one document: remove the second '---'")
    if event.version not in (None, (1, 2)):
        raise _unsupported_version(mark, ".".join(map(str, event.version)))


def _unsupported_version(mark: Mark, version: str) -> LoadError:
    return LoadError(mark, f"obc reads YAML 1.2, not YAML {version}", "remove the %YAML directive")


_VERSION_DIRECTIVE = re.compile(r"^%YAML[ \t]+([0-9]+\.[0-9]+)", re.MULTILINE)


def _shorthand(tag: str) -> str:
    """Return a tag the way it is usually written: `!!binary` rather than its full name."""
    return "!!" + tag.removeprefix(_YAML_TAG) if tag.startswith(_YAML_TAG) else tag


# What commonly goes wrong, by the text of ruamel's problem: (message, hint).
_SYNTAX_HINTS = {
    "mapping values are not allowed here": (
        "a ': ' here starts a mapping where none can be",
        "quote a value that holds ': ', or check the indentation of this line"),
    "expected <block end>": (
        "this line's indentation does not match the lines above it",
        "align it with the other keys of its mapping or the other items of its list"),
    "that cannot start any token": (
        "a plain value cannot start with this character",
        "quote the value"),
}


def syntax_error(error: MarkedYAMLError, text: str) -> LoadError:
    """Return the located problem a YAML syntax error is, said as plainly as it can be."""
    mark = error.problem_mark or error.context_mark
    problem, context = str(error.problem or ""), str(error.context or "")
    unclosed = "end of stream" in problem or "<stream end>" in problem
    if unclosed and ("quoted" in context or "flow sequence" in context
                     or "flow mapping" in context):
        mark = error.context_mark  # where the quote or bracket opens
    where = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
    if "'\\t'" in problem:
        line = text.split("\n")[where.line - 1]
        if line[: where.column].strip():
            return LoadError(where, "a tab separates values here",
                             "YAML separates with spaces; replace the tab with a space")
        return LoadError(where, "a tab is used for indentation",
                         "YAML indents with spaces only; replace the tab with spaces")
    if unclosed and "quoted" in context:
        return LoadError(where, "this quoted string is never closed", "add the closing quote")
    if unclosed:
        return LoadError(where, "the file ends inside a [...] or {...} that is never closed",
                         "add the closing ']' or '}'")
    for known, (message, hint) in _SYNTAX_HINTS.items():
        if known in problem:
            return LoadError(where, f"YAML syntax error: {message}", hint)
    detail = " ".join(str(part) for part in (error.context, error.problem) if part)
    return LoadError(where, f"YAML syntax error: {detail}")


@dataclass(frozen=True, slots=True)
class _Size:
    """What a node expands to: values, characters of text, and nesting height."""

    values: int
    text: int
    height: int


class _Measure:
    """Sizes the node graph with aliases expanded, once per node, before anything is built.

    Aliases share nodes, so a few lines can stand for billions of values, nest far deeper than
    the text does, or (`&a [*a]`) contain themselves; each of those is refused here, at the
    collection that holds the offending alias. The walk is in document order, so an alias
    leads to a node measured already or to one still open (itself or a parent): it never
    recurses deeper than the text, which the event screen has bounded.
    """

    def __init__(self) -> None:
        self.sizes: dict[int, _Size] = {}
        self.open: set[int] = set()

    def check(self, root: Node) -> None:
        self._size(root, 0)

    def _size(self, node: Node, outer: int) -> _Size:
        """Return the size of `node`, which `outer` collections enclose."""
        if id(node) in self.sizes:
            return self.sizes[id(node)]
        if isinstance(node, ScalarNode):
            return _Size(1, len(node.value), 0)
        children = [n for pair in node.value for n in pair] if isinstance(node, MappingNode) \
            else node.value
        self.open.add(id(node))
        sizes = []
        for child in children:
            if id(child) in self.open:
                raise LoadError(_mark(node), "an alias refers to the value that contains it",
                                "an alias (*name) can only repeat a value defined before it")
            sizes.append(self._size(child, outer + 1))
        self.open.discard(id(node))
        size = _Size(1 + sum(s.values for s in sizes), sum(s.text for s in sizes),
                     1 + max((s.height for s in sizes), default=0))
        if outer + size.height > MAX_DEPTH:
            raise LoadError(_mark(node), f"nesting is deeper than {MAX_DEPTH} levels once "
                            "aliases are expanded")
        if size.values > MAX_VALUES or size.text > MAX_TEXT:
            raise LoadError(_mark(node), f"aliases expand this to more than {MAX_VALUES:,} values "
                            f"or {MAX_TEXT:,} characters", "an alias bomb? repeat less through "
                            "aliases")
        self.sizes[id(node)] = size
        return size


class _Builder:
    """Builds plain data from a measured node graph, recording positions."""

    def __init__(self, source: Source, text: str, loader: _EventLoader) -> None:
        self.source, self.text = source, text
        self.constructor = SafeConstructor(loader=loader)

    def build(self, node: Node, path: Path_) -> Any:
        self.source.values[path] = self._position(node)
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        if isinstance(node, SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self._scalar(node, path)

    def _position(self, node: Node) -> Mark:
        if isinstance(node, ScalarNode) and node.start_mark.index == node.end_mark.index:
            # An empty value: ruamel marks the next token, often lines below; point just
            # after the ':' or '-' that precedes it instead.
            before = self.text[: node.start_mark.index].rstrip()
            return _mark_of_offset(self.text, len(before))
        return _mark(node)

    def _mapping(self, node: MappingNode, path: Path_) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node, path)
            if key in result:
                first = self.source.keys[(*path, key)]
                raise LoadError(_mark(key_node), f"duplicate key {key!r}: also at line "
                                f"{first.line}, column {first.column}",
                                "YAML would silently keep only the last one; remove or "
                                "rename one", (*path, key))
            self.source.keys[(*path, key)] = _mark(key_node)
            result[key] = self.build(value_node, (*path, key))
        return result

    def _key(self, node: Node, path: Path_) -> str:
        if isinstance(node, ScalarNode) and node.tag == _MERGE:
            raise LoadError(_mark(node), "merge keys ('<<') are not supported",
                            "write the keys out, or use an alias (*name) for a whole value",
                            path)
        if not isinstance(node, ScalarNode):
            raise LoadError(_mark(node), "a mapping key must be a string, not a "
                            f"{'mapping' if isinstance(node, MappingNode) else 'list'}",
                            None, path)
        if node.tag != _STR:
            raw = self._raw(node)
            shown = f"{raw} as {node.tag.removeprefix(_YAML_TAG)}" if raw else \
                "an empty key as null"
            raise LoadError(_mark(node), f"a mapping key must be a string; YAML reads {shown}",
                            f"quote it: \"{raw}\"", path)
        return _text(node, node.value, (*path, node.value))

    def _raw(self, node: ScalarNode) -> str:
        """Return the text of a scalar as written in the file, without its anchor."""
        raw = self.text[node.start_mark.index:node.end_mark.index]
        if raw.startswith("&"):
            raw = raw.split(None, 1)[-1]
        return raw

    def _scalar(self, node: ScalarNode, path: Path_) -> Any:
        self.source.raw[path] = self._raw(node)
        if node.tag == _TIMESTAMP:
            return node.value  # a date is text to obc; keep exactly what was written
        if node.tag not in _CORE_TAGS:  # the screen refused explicit tags already
            raise LoadError(_mark(node), f"unsupported YAML type {_shorthand(node.tag)}",
                            "quote the value", path)
        try:
            value = self.constructor.construct_object(node, deep=True)
        except ValueError as error:  # e.g. an integer of more than 4,300 digits
            raise LoadError(_mark(node), "this number is too large to read",
                            "quote it if it is text", path) from error
        return _text(node, value, path) if isinstance(value, str) else value


def _mark(node: Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


# Control characters other than tab and newline: YAML refuses them raw, but a double-quoted
# escape ("\r", "\e") lets them in, and a terminal showing the script would then show
# something else than what runs (a carriage return hides what precedes it on the line).
_CONTROL = re.compile("[\x01-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_NAMES = {"\r": "carriage return", "\x1b": "escape", "\b": "backspace"}


def _text(node: Node, value: str, path: Path_) -> str:
    """Return a string read from the file, refusing what double-quoted escapes can put in."""
    if "\0" in value:
        raise LoadError(_mark(node), "string holds a NUL character",
                        "NUL cannot reach a shell script or a process; remove it", path)
    control = _CONTROL.search(value)
    if control:
        char = control.group()
        name = f" ({_CONTROL_NAMES[char]})" if char in _CONTROL_NAMES else ""
        raise LoadError(_mark(node), f"string holds the control character U+{ord(char):04X}"
                        f"{name}", "a terminal would show the script differently from what "
                        "it runs; remove it", path)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise LoadError(_mark(node), "string holds a lone surrogate (\\uD800-\\uDFFF), "
                        "which is not text", "remove the escape", path) from error
    invisible = find_invisible(value) if is_script_text(path) else None
    if invisible:
        raise LoadError(_mark(node), f"string holds {describe_character(invisible)}, which is "
                        "invisible or reorders the text around it", "the script would show "
                        "differently from what it runs (Trojan Source); remove it", path)
    return value


def is_script_text(path: Path_) -> bool:
    """Whether a string reaches the script as code or header text: all but extension keys
    (`x-*`, ignored) and an inline Axolotl config, which is embedded content, kept exact."""
    top = path[0] if path else ""
    inline_config = len(path) > len(CONFIG_FIELD) and path[:len(CONFIG_FIELD)] == CONFIG_FIELD
    return not (isinstance(top, str) and top.startswith("x-")) and not inline_config
