"""A run file's YAML events from libyaml (PyYAML's C parser), as ruamel's parser gives them.

ruamel's pure-Python parser is most of what reading a run file costs; libyaml parses the same
text about five times as fast. But libyaml reads YAML 1.1, and where 1.1 and 1.2 part (tabs
and NEL as separators or line breaks, anchor names, tags, `?` in flow mappings, directives)
or where libyaml marks otherwise (an empty value), it would give other events. So libyaml reads
only a text whose characters and indicators are among those where both read alike
(tests/unit/test_libyaml_events.py compares them on random texts and every corpus), and any
event stream it cannot give exactly (an error, an empty value, an anchor, more events than a
run file may hold) is read by ruamel again, whose events and diagnostics are obc's. Scalars
are resolved later, from the composed nodes, by YAML 1.2 either way.
"""

from __future__ import annotations

import re

import yaml
from ruamel.yaml import events as ev
from ruamel.yaml.error import FileMark

try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml: every text is ruamel's
    CParser = None

# The characters libyaml may read: printable YAML text without tab, carriage return, NEL,
# LS, PS and BOM, which YAML 1.1 reads as separators or line breaks where 1.2 does not.
_UNREAD_CHARACTER = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd"
                               "\U00010000-\U0010ffff]")
# Indicators where a token may start (a tag, an anchor, an alias, a complex key, a reserved
# indicator), directives, document end markers (after which the two begin the next document
# otherwise), a '#' no space precedes (libyaml starts a comment right after a block scalar's
# '|') and lines of spaces only (which ruamel measures against a block scalar's indentation,
# libyaml not): where the two read otherwise.
_UNREAD_INDICATOR = re.compile(r"(?:^|[\s\[\]{},:])[!&*?@`]|^%|^\.\.\.|(?<=\S)#|^ +$",
                               re.MULTILINE)
# More events than this, and the screen refuses the file anyway: ruamel reads it, and stops
# where the screen does (libyaml would make them all first).
MAX_EVENTS = 30_000
# ruamel names a text read from a stream so; its marks are FileMarks.
_NAME = "<file>"


def is_read_alike(text: str) -> bool:
    """Whether libyaml may read `text`: none of what YAML 1.1 and 1.2 read otherwise, and a
    last line that ends (where it does not, the two mark the document's end otherwise)."""
    return text.endswith("\n") and _UNREAD_CHARACTER.search(text) is None \
        and _UNREAD_INDICATOR.search(text) is None


def read_events(text: str) -> list[ev.Event] | None:
    """Return the events ruamel's parser gives for `text`, made by libyaml, or None where
    libyaml may not read it or cannot give them exactly."""
    if CParser is None or not is_read_alike(text):
        return None
    parser = CParser(text)
    events: list[ev.Event] = []
    try:
        while (event := parser.get_event()) is not None:
            converted = _convert(event)
            if converted is None or len(events) == MAX_EVENTS:
                return None
            events.append(converted)
    except yaml.YAMLError:
        return None
    finally:
        parser.dispose()
    return events


def _mark(mark) -> FileMark:
    return FileMark(_NAME, mark.index, mark.line, mark.column)


def _convert(event: yaml.Event) -> ev.Event | None:
    """Return ruamel's event for libyaml's, or None where they would differ."""
    start, end = _mark(event.start_mark), _mark(event.end_mark)
    kind = type(event)
    if kind in _MARKS_ONLY:
        return _MARKS_ONLY[kind](start, end)
    if kind is yaml.DocumentStartEvent:
        return ev.DocumentStartEvent(start, end, explicit=event.explicit,
                                     version=event.version, tags=event.tags)
    if kind is yaml.DocumentEndEvent:
        return ev.DocumentEndEvent(start, end, explicit=event.explicit)
    if kind is yaml.AliasEvent or event.anchor is not None:
        return None
    if kind is yaml.ScalarEvent:
        return _scalar(event, start, end)
    return _COLLECTION_STARTS[kind](None, event.tag, event.implicit, start, end,
                                    flow_style=event.flow_style)


def _scalar(event: yaml.ScalarEvent, start: FileMark, end: FileMark) -> ev.ScalarEvent | None:
    if not event.style and not event.value:
        return None  # an empty value: ruamel marks it at the next token, libyaml here
    return ev.ScalarEvent(None, event.tag, event.implicit, event.value, start, end,
                          style=event.style or None)  # libyaml's plain style is ''


_MARKS_ONLY = {yaml.MappingEndEvent: ev.MappingEndEvent,
               yaml.SequenceEndEvent: ev.SequenceEndEvent,
               yaml.StreamStartEvent: ev.StreamStartEvent,
               yaml.StreamEndEvent: ev.StreamEndEvent}
_COLLECTION_STARTS = {yaml.MappingStartEvent: ev.MappingStartEvent,
                      yaml.SequenceStartEvent: ev.SequenceStartEvent}
