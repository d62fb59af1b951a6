"""Text a person reads in a script or a message: which characters do not show, how to name
one, and how to show any text so that every character in it is seen."""

from __future__ import annotations

import unicodedata


def visible(text: str) -> str:
    """Return `text` with every character that does not print (controls, format characters,
    separators) escaped as Python would: `\\x1b`, `\\u202e`."""
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)


def find_invisible(text: str) -> str | None:
    """Return the first format character (Unicode category Cf: bidirectional controls,
    zero-width characters, the BOM, tags) or line or paragraph separator in `text`."""
    if text.isascii():
        return None
    return next((char for char in text
                 if unicodedata.category(char) in ("Cf", "Zl", "Zp")), None)


def describe_character(char: str) -> str:
    """Name a character the way Unicode does: `U+202E RIGHT-TO-LEFT OVERRIDE`."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")
