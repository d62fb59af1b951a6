"""Where a script came from: one hash of every input that shaped it, for its header.

The hash covers the run file's bytes, each file it embeds, and the lock entry of its image,
if one applied; not paths, times or the machine. A reviewer sees in a script's diff whether
its inputs changed, and anyone can recompute it from the listing `input_lines` describes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from ..core.diagnostics import field_path
from ..read.load import Path_


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_lines(run_file: str, attachments: Mapping[Path_, str],
                lock_entry: tuple[str, str] | None) -> list[str]:
    """Return the listing the inputs hash is taken of, one input a line: `run-file HEX`, then
    `FIELD HEX` for each embedded file by the field that names it, sorted, then
    `lock IMAGE DIGEST` when the lock gave the image its digest. HEX is the sha256 of a
    file's bytes, and `run_file` the run file's."""
    lines = [f"run-file {run_file}"]
    lines += sorted(f"{field_path(path)} {sha256(text.encode())}"
                    for path, text in attachments.items())
    if lock_entry is not None:
        lines.append(f"lock {lock_entry[0]} {lock_entry[1]}")
    return lines


def inputs_digest(run_file: str, attachments: Mapping[Path_, str],
                  lock_entry: tuple[str, str] | None) -> str:
    """Return `sha256:HEX` of the listing of the inputs, each line ending in a newline."""
    listing = "".join(line + "\n" for line in input_lines(run_file, attachments, lock_entry))
    return f"sha256:{sha256(listing.encode())}"


def lock_entry(image: str | None, digests: Mapping[str, str]) -> tuple[str, str] | None:
    """Return the lock entry (tag, digest) that gave a job's image, as the job runs it, its
    digest, if one did (a default image too; not an enroot 3 job's, which takes none)."""
    tag, at, digest = (image or "").rpartition("@")
    return (tag, digest) if at and digests.get(tag) == digest else None
