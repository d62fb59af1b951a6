"""Stage 1's YAML screen: the text of a run file → a node graph that is safe to build.

libyaml composes the texts it reads as ruamel does, bounding depth and size as it goes
(libyaml_events.py). ruamel reads all others: their event stream is screened first
(iterative, so depth is bounded before anything recurses: no tags, one document, YAML 1.2,
bounded size), then composed into nodes from the same events without parsing again
(pure-Python parsing is most of what loading costs). Either graph is then measured with its
aliases expanded. load.py builds plain data from the nodes, ruamel's or PyYAML's: both name
their kind in `id` and mark where they stand alike.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

import yaml
from ruamel.yaml import YAML
from ruamel.yaml import events as ev
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import Node
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.resolver import VersionedResolver

from .libyaml_events import compose_alike

MAX_DEPTH = 32
# What the document may expand to through aliases: a run file has a few hundred values and no
# more text than the file itself (twice load.MAX_FILE_BYTES). These bound what an alias bomb
# ("billion laughs") could make obc build; they are checked on the node graph, before
# anything is built.
MAX_VALUES = 10_000
MAX_TEXT = 2 * 1024 * 1024
YAML_TAG = "tag:yaml.org,2002:"
DEFAULT_VERSION = (1, 2)

Path_ = tuple[str | int, ...]
AnyNode = Node | yaml.Node


@dataclass(frozen=True, slots=True)
class Mark:
    """A 1-based line and column."""

    line: int
    column: int


class LoadError(Exception):
    """Raised here and in load.py to stop loading one file with one located diagnostic."""

    def __init__(self, mark: Mark, message: str, hint: str | None = None,
                 path: Path_ = ()) -> None:
        super().__init__(message)
        self.mark, self.message, self.hint, self.path = mark, message, hint, path


def mark_of_offset(data: bytes | str, offset: int) -> Mark:
    """Return the line and column of `offset` in `data` (columns count bytes or characters)."""
    newline = b"\n" if isinstance(data, bytes) else "\n"
    line_start = data.rfind(newline, 0, offset) + 1
    return Mark(data.count(newline, 0, offset) + 1, offset - line_start + 1)


def node_mark(node: AnyNode | ev.Event) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


event_mark = node_mark


def compose(text: str) -> tuple[AnyNode, DocumentLoader]:
    """Return the node graph of a run file's text, screened and measured, and the loader that
    constructs its scalars; raise LoadError at the first problem."""
    node = compose_alike(text, _resolver(None), max_depth=MAX_DEPTH, max_values=MAX_VALUES)
    if node is not None:
        loader = DocumentLoader(None)  # libyaml reads no %YAML directive: the version is 1.2
    else:
        node, loader = _compose_by_ruamel(text)
    _Measure().check(node)
    return node, loader


def _compose_by_ruamel(text: str) -> tuple[Node, DocumentLoader]:
    """Return ruamel's node graph of `text`, composed from its screened events, and the loader
    for its YAML version."""
    try:
        events, version = _screen_events(text)
        loader = DocumentLoader(version, events)
        composer = Composer(loader)
        composer.warn_double_anchors = False  # reusing an anchor name is valid YAML
        node = composer.get_single_node()
    except MarkedYAMLError as error:
        raise syntax_error(error, text) from error
    except ReaderError as error:
        raise LoadError(mark_of_offset(text, error.position),
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
        raise _unsupported_version(mark_of_offset(text, directive.start()),
                                   directive.group(1)) from error
    if node is None:
        raise LoadError(Mark(1, 1), "file is empty; a run file is a mapping with 'version', 'id', "
                        "'runtime' and 'trainer' or 'steps'")
    return node, loader


def _screen_events(text: str) -> tuple[list[ev.Event], tuple[int, int] | None]:
    """Reject what obc does not read (tags, several documents, YAML 1.1); bound depth and size.

    Returns the events, to be composed without parsing the text again (parsing is most of
    what loading costs), and the YAML version the document declares, if any.
    """
    with contextlib.closing(_parser().parse(io.StringIO(text))) as parsed:
        return _screened(parsed)


def _screened(parsed: Iterable[ev.Event]) -> tuple[list[ev.Event], tuple[int, int] | None]:
    depth = documents = values = 0
    events: list[ev.Event] = []
    version = None
    for event in parsed:
        events.append(event)
        if isinstance(event, ev.DocumentStartEvent):
            documents += 1
            _screen_document(event, documents, event_mark(event))
            version = event.version
        values += isinstance(event, ev.ScalarEvent | ev.CollectionStartEvent)
        depth += isinstance(event, ev.CollectionStartEvent)
        depth -= isinstance(event, ev.CollectionEndEvent)
        if values > MAX_VALUES:  # stop early: pure-Python YAML reads ~10,000 values/second
            raise LoadError(event_mark(event), f"file holds more than {MAX_VALUES:,} values; "
                            "a run file has a few hundred", "put large content in files:")
        if depth > MAX_DEPTH:
            raise LoadError(event_mark(event), f"nesting is deeper than {MAX_DEPTH} levels")
        if getattr(event, "tag", None) is not None:
            raise LoadError(event_mark(event), f"YAML tag '{shorthand(event.tag)}' is not "
                            "allowed", "remove the tag: obc reads plain YAML values only")
    return events, version


def _parser() -> YAML:
    """A YAML object that parses one run file into events. One per file (60 µs beside the
    milliseconds of parsing): ruamel's keeps the YAML version a file declares, and would scan
    the files after a `%YAML 1.1` one as 1.1."""
    return YAML(typ="safe", pure=True)


class _Replay:
    """What ruamel's Composer reads from a parser, served from events parsed already."""

    def __init__(self, events: Sequence[ev.Event]) -> None:
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


class DocumentLoader:
    """What ruamel's Composer and constructor need of a loader: a resolver for the document's
    YAML version (1.2 unless it declares one), the depth bound, and the replayed events that
    the Composer reads (none where libyaml composed the nodes)."""

    max_depth = MAX_DEPTH

    def __init__(self, version: tuple[int, int] | None, events: Sequence[ev.Event] = ()) -> None:
        self._parser = _Replay(events)
        self._resolver = _resolver(version)


class _DocumentResolver(VersionedResolver):
    """ruamel's resolver for the YAML version it is made for, which ruamel would look for at
    every value in a scanner, a loader's settings or a dumper's (none of them here) first."""

    @property
    def processing_version(self) -> tuple[int, int]:
        return self._loader_version or DEFAULT_VERSION


@cache
def _resolver(version: tuple[int, int] | None) -> _DocumentResolver:
    """The resolver for a YAML version: it keeps no state between files but its table of
    patterns, which it makes at its first value."""
    return _DocumentResolver(version=version)


def _screen_document(event: ev.DocumentStartEvent, number: int, mark: Mark) -> None:
    if number > 1:
        raise LoadError(mark, "file holds more than one YAML document",
                        "a run file is one document: remove the second '---'")
    if event.version not in (None, (1, 2)):
        raise _unsupported_version(mark, ".".join(map(str, event.version)))


def _unsupported_version(mark: Mark, version: str) -> LoadError:
    return LoadError(mark, f"obc reads YAML 1.2, not YAML {version}", "remove the %YAML directive")


_VERSION_DIRECTIVE = re.compile(r"^%YAML[ \t]+([0-9]+\.[0-9]+)", re.MULTILINE)


def shorthand(tag: str) -> str:
    """Return a tag the way it is usually written: `!!binary` rather than its full name."""
    return "!!" + tag.removeprefix(YAML_TAG) if tag.startswith(YAML_TAG) else tag


# What ruamel counts as a line break when it marks a line (a lone CR too).
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
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
        line = _LINE_BREAK.split(text)[where.line - 1]
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
    recurses deeper than the text, whose depth is bounded already (as libyaml composes, or by
    the event screen).
    """

    def __init__(self) -> None:
        self.sizes: dict[int, _Size] = {}
        self.open: set[int] = set()

    def check(self, root: AnyNode) -> None:
        if root.id != "scalar":  # a scalar alone is no larger than the text
            self._size(root, 0)

    def _size(self, node: AnyNode, outer: int) -> _Size:
        """Return the size of the collection `node`, which `outer` collections enclose."""
        if id(node) in self.sizes:
            return self.sizes[id(node)]
        children = [n for pair in node.value for n in pair] if node.id == "mapping" \
            else node.value
        self.open.add(id(node))
        values, text, height = 1, 0, 0
        for child in children:
            if child.id == "scalar":  # most values: sized here rather than by a call
                values += 1
                text += len(child.value)
                continue
            if id(child) in self.open:
                raise LoadError(node_mark(node), "an alias refers to the value that contains it",
                                "an alias (*name) can only repeat a value defined before it")
            size = self._size(child, outer + 1)
            values, text = values + size.values, text + size.text
            height = max(height, size.height)
        self.open.discard(id(node))
        size = _Size(values, text, height + 1)
        if outer + size.height > MAX_DEPTH:
            raise LoadError(node_mark(node), f"nesting is deeper than {MAX_DEPTH} levels once "
                            "aliases are expanded")
        if size.values > MAX_VALUES or size.text > MAX_TEXT:
            raise LoadError(node_mark(node), f"aliases expand this to more than {MAX_VALUES:,} "
                            f"values or {MAX_TEXT:,} characters", "an alias bomb? repeat less "
                            "through aliases")
        self.sizes[id(node)] = size
        return size
