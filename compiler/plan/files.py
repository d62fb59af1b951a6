"""What changed inside an embedded file, for `obc plan`: the record keeps a file as its hash,
but the script on disk holds the file itself, in the here-document that writes it.

The old text is taken from there and trusted only if it has the recorded hash, so a script
written otherwise reads as "changed" and nothing worse. A YAML mapping (an Axolotl config)
is compared key by key (`learning_rate 0.0002 → 0.0001`); any other file by its lines.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from ..core import shell
from ..read.axolotl import ConfigError, read_config
from ..render.provenance import sha256

# A line of the script that writes an embedded file: obc_write_file PATH [chomp] <<'DELIM'
_WRITE = re.compile(r" *obc_write_file (?P<path>.+?)(?P<chomp> chomp)? <<'(?P<delimiter>[^']+)'")
# Key changes named in one line; a config rewritten as a whole says how many more. A list or
# mapping longer than MAX_VALUE as JSON is named by its size.
MAX_KEYS = 8
MAX_VALUE = 60


def embedded_text(script: str, path: str, digest: str) -> str | None:
    """Return the text the script writes to `path` if its sha256 is `digest` (HEX), else
    None."""
    lines = script.split("\n")
    for number, line in enumerate(lines):
        found = _WRITE.fullmatch(line)
        if found is None or found["path"] != shell.quote(path):
            continue
        body = lines[number + 1:]
        if found["delimiter"] not in body:
            return None
        text = "".join(f"{line}\n" for line in body[:body.index(found["delimiter"])])
        text = text[:-1] if found["chomp"] else text
        return text if sha256(text.encode()) == digest else None
    return None


def file_change(old: str, new: str) -> str:
    """Return what changed from `old` to `new`: the keys of two YAML mappings, else lines."""
    keys = _key_changes(old, new)
    if keys is not None:
        shown = keys[:MAX_KEYS] + ([f"{len(keys) - MAX_KEYS} more keys"]
                                   if len(keys) > MAX_KEYS else [])
        return ", ".join(shown) or "comments and layout only"
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0))
    added = sum(line.startswith("+") and not line.startswith("+++") for line in diff)
    removed = sum(line.startswith("-") and not line.startswith("---") for line in diff)
    return f"+{added} -{removed} lines"


def _key_changes(old: str, new: str) -> list[str] | None:
    try:
        before, after = _flat(read_config(old)), _flat(read_config(new))
    except ConfigError:
        return None
    changes = []
    for key in [*after, *(key for key in before if key not in after)]:
        if key not in before:
            changes.append(f"{key} added ({_value(after[key])})")
        elif key not in after:
            changes.append(f"{key} removed")
        elif before[key] != after[key]:
            changes.append(f"{key} {_value(before[key])} → {_value(after[key])}")
    return changes


def _flat(mapping: dict, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as `a.b` keys; a list is one value."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _value(value: Any) -> str:
    if isinstance(value, list | dict):
        text = json.dumps(value, default=str, ensure_ascii=False)
        return text if len(text) <= MAX_VALUE else f"a {type(value).__name__} of {len(value)}"
    if value is None or isinstance(value, bool):
        return json.dumps(value)  # as YAML writes them: null, true
    return shell.quote(str(value))
