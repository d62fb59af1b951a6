"""Text a person reads in a script or a message: which characters do not show, how to name
one, and how to show any text so that every character in it is seen."""

from __future__ import annotations

import bisect
import unicodedata

# Default_Ignorable_Code_Point of Unicode 14.0.0 (DerivedCoreProperties.txt; the version of
# Python 3.11's unicodedata, which has no such property): characters a font or terminal may
# draw as nothing, such as U+034F or the Hangul fillers. As (first, last) ranges.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# Characters that are not default-ignorable yet show as an empty cell: U+2800 BRAILLE PATTERN
# BLANK and U+1D159 MUSICAL SYMBOL NULL NOTEHEAD (to a shell or Python, each is a letter).
BLANK_LOOKING = frozenset("\u2800\U0001D159")
_FIRSTS = [first for first, _ in DEFAULT_IGNORABLE]


def is_invisible(char: str) -> bool:
    """Whether a character can pass unseen or reorder the text around it: a format character
    (Unicode category Cf: bidirectional controls, zero-width characters, the BOM, tags), a
    line or paragraph separator, a default-ignorable or a blank-looking character."""
    if char.isascii():
        return False
    if unicodedata.category(char) in ("Cf", "Zl", "Zp") or char in BLANK_LOOKING:
        return True
    index = bisect.bisect_right(_FIRSTS, ord(char)) - 1
    return index >= 0 and ord(char) <= DEFAULT_IGNORABLE[index][1]


def visible(text: str) -> str:
    """Return `text` with every character that does not show as itself (controls, separators
    but the space, invisible characters) escaped as Python would: `\\x1b`, `\\u202e`."""
    if text.isascii() and text.isprintable():  # nearly every name: nothing to look at
        return text
    return "".join(ascii(char)[1:-1] if not char.isprintable() or is_invisible(char) else char
                   for char in text)


def quoted(value: object) -> str:
    """Return a value for a message as Python writes it (a string in quotes), with every
    character that does not show as itself escaped, as `visible` does."""
    return visible(repr(value))


def find_invisible(text: str) -> str | None:
    """Return the first invisible character (is_invisible) in `text`, if any."""
    if text.isascii():
        return None
    return next((char for char in text if is_invisible(char)), None)


def describe_character(char: str) -> str:
    """Name a character the way Unicode does: `U+202E RIGHT-TO-LEFT OVERRIDE`."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")
