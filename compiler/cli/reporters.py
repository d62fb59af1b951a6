"""How diagnostics are shown: text on stderr, or JSON / GitHub annotations on stdout."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import TextIO

from ..core.diagnostics import Diagnostic


def use_colour(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def report_text(diagnostics: list[Diagnostic], stream: TextIO) -> None:
    colour = use_colour(stream)
    for diagnostic in diagnostics:
        text = diagnostic.text()
        if colour:
            location, _, rest = text.partition(" error: ")
            text = f"\033[1m{location}\033[0m \033[1;31merror:\033[0m {rest}"
        print(text, file=stream)


def report_json(diagnostics: list[Diagnostic], stream: TextIO) -> None:
    print(json.dumps([asdict(d) for d in diagnostics], indent=2, ensure_ascii=False), file=stream)


def _github_escape(text: str, *, property_value: bool = False) -> str:
    # The escapes GitHub's workflow-command parser undoes (actions/toolkit, command.ts).
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def report_github(diagnostics: list[Diagnostic], stream: TextIO) -> None:
    for d in diagnostics:
        message = f"{d.field}: {d.message}" if d.field else d.message
        if d.hint:
            message += f"\nhint: {d.hint}"
        print(f"::error file={_github_escape(d.file, property_value=True)},line={d.line},"
              f"col={d.column},title=obc::{_github_escape(message)}", file=stream)


Reporter = Callable[[list[Diagnostic], TextIO], None]
REPORTERS: dict[str, Reporter] = {"text": report_text, "json": report_json,
                                  "github": report_github}
