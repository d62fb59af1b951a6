"""A run file's node graph from libyaml (PyYAML's C parser and composer), as ruamel composes it.

ruamel's pure-Python parser and composer are most of what reading a run file costs; libyaml
parses and composes the same text over ten times as fast. But libyaml reads YAML 1.1, and
where 1.1 and 1.2 part (tabs and NEL as separators or line breaks, anchor names, tags, `?` in
flow mappings, directives) or where libyaml marks otherwise (an empty value), it would give
other nodes. So libyaml reads only a text whose characters and indicators are among those
where both read alike: without tags, anchors, aliases and directives, which its composer
would not show. Each node's tag is resolved by ruamel's YAML 1.2 resolver, and the nodes are
PyYAML's, with the same values and marks as ruamel's (tests/unit/test_libyaml_events.py
compares them, and what is loaded from them, on random texts and every corpus). A text it
cannot compose exactly (an error, an empty value, nodes nested or counted past what the screen
allows, no document) is read by ruamel again, whose events and diagnostics are obc's.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import yaml
from ruamel.yaml import nodes as ruamel_nodes
from ruamel.yaml.resolver import BaseResolver

try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml: every text is ruamel's
    CParser = None

# The characters libyaml may not read: all but printable YAML text without tab, carriage
# return, NEL, LS, PS and BOM, which YAML 1.1 reads as separators or line breaks where 1.2
# does not. Written as the few ranges refused rather than the many allowed (`[^\n\x20-\x7e
# \xa0-\u2027 ... \U00010000-\U0010ffff]`, the same code points): that class took 3 ms of
# every obc's start to compile.
_UNREAD_CHARACTER = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff"
                               "\ufffe\uffff]")
# Indicators where a token may start (a tag, an anchor, an alias, a complex key, a reserved
# indicator), directives, document end markers (after which the two begin the next document
# otherwise), a '#' no space precedes (libyaml starts a comment right after a block scalar's
# '|') and lines of spaces only (which ruamel measures against a block scalar's indentation,
# libyaml not): where the two read otherwise. Each starts with its own character and looks
# behind it for what precedes (a line's start is a newline or none), so that a search tries
# only where one of those characters stands: a third of the time of `^` or a class in front.
_UNREAD_INDICATOR = re.compile(r"[!&*?@`](?<![^\s\[\]{},:].)"  # where a token may start
                               r"|%(?<![^\n]%)|\.\.\.(?<![^\n]\.\.\.)"  # at a line's start
                               r"|#(?<=\S#)"  # after a non-blank
                               r"| (?<![^\n] ) *$",  # a line of spaces only
                               re.MULTILINE)
# ruamel's resolver is asked by ruamel's kind of node.
_RUAMEL_KINDS = {yaml.ScalarNode: ruamel_nodes.ScalarNode,
                 yaml.SequenceNode: ruamel_nodes.SequenceNode,
                 yaml.MappingNode: ruamel_nodes.MappingNode}


def is_read_alike(text: str) -> bool:
    """Whether libyaml may read `text`: none of what YAML 1.1 and 1.2 read otherwise, and a
    last line that ends (where it does not, the two mark the document's end otherwise)."""
    return text.endswith("\n") and _UNREAD_CHARACTER.search(text) is None \
        and _UNREAD_INDICATOR.search(text) is None


def compose_alike(text: str, resolver: BaseResolver, *, max_depth: int,
                  max_values: int) -> yaml.Node | None:
    """Return the root node that ruamel's Composer makes of `text` (ruamel's tags, PyYAML's
    nodes), composed by libyaml, or None where libyaml may not read it or cannot compose it
    exactly, or where its nodes nest deeper than `max_depth` or number more than `max_values`
    (the screen refuses those: ruamel reads them and says where)."""
    if CParser is None or not is_read_alike(text):
        return None
    composer = _Composer(text, resolver, max_depth, max_values)
    try:
        return composer.get_single_node()
    except (yaml.YAMLError, _NotAlike):
        return None
    finally:
        composer.dispose()


class _NotAlike(Exception):
    """Raised while composing where ruamel would compose otherwise or the screen refuse."""


class _Composer(CParser or object):  # (made only where PyYAML has libyaml)
    """libyaml's composer, with the hooks it calls at each node: the tag from ruamel's
    resolver, and the screen's bounds on depth and values, checked before it goes deeper (it
    recurses in C, where no recursion limit stops it)."""

    def __init__(self, text: str, resolver: BaseResolver, max_depth: int,
                 max_values: int) -> None:
        super().__init__(text)
        self.resolver, self.max_depth, self.max_values = resolver, max_depth, max_values
        self.depth = self.values = 0

    def descend_resolver(self, parent: yaml.Node | None, index: Any) -> None:
        """Count a node (libyaml calls this before each but an alias): a scalar deepens as a
        collection does, as in ruamel's Composer."""
        self.depth += 1
        self.values += 1
        if self.depth > self.max_depth or self.values > self.max_values:
            raise _NotAlike

    def ascend_resolver(self) -> None:
        self.depth -= 1

    def resolve(self, kind: type[yaml.Node], value: str | None, implicit: Any) -> str:
        plain = kind is yaml.ScalarNode and implicit[0]
        if plain and not value:
            raise _NotAlike  # an empty value: ruamel marks it at the next token, libyaml here
        if plain and len(value) > _CACHED_LENGTH:
            return _ruamel_tag(self.resolver, kind, value, implicit)
        return _cached_tag(self.resolver, kind, value if plain else None, implicit)


def _ruamel_tag(resolver: BaseResolver, kind: type[yaml.Node], value: str | None,
                implicit: Any) -> str:
    """Return ruamel's tag for a node of `kind`, of which only a plain scalar's value decides
    (others may pass None)."""
    return str(resolver.resolve(_RUAMEL_KINDS[kind], value, implicit))


# Tags of the values of a run file, which recur from file to file (ruamel takes microseconds
# to resolve one), up to a length that keeps what the cache holds small.
_cached_tag = lru_cache(maxsize=4096)(_ruamel_tag)
_CACHED_LENGTH = 200
