"""obc.lock: the digest each image tag of the run files resolved to, as `obc lock` wrote it.

compile reads it like any other input, without the network, and renders a locked tag as
IMAGE@DIGEST. The file is one `IMAGE DIGEST` line per tag, sorted, after a comment header:
a tag that moves is a one-line diff.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..core.diagnostics import Diagnostic, ObcError
from ..core.project import git_work_tree
from ..core.text import quoted
from ..model.job import Job
from .load import MAX_FILE_BYTES, Source
from .sources import SourceError, TooLargeError, decode_text, find_project, read_inside

LOCK_NAME = "obc.lock"
HEADER = (
    "# obc.lock: the digest of each image tag the run files use, written by `obc lock`.\n"
    "# obc compile renders a tag listed here as IMAGE@DIGEST, without using the network.\n"
)
_ENTRY = re.compile(r"(?P<image>[^\s@]+) (?P<digest>sha256:[0-9a-f]{64})")


@dataclass(frozen=True, slots=True)
class Lock:
    """The entries of a lock file (tag → digest), and the line each stands on."""

    file: str
    digests: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def problem(self, image: str, message: str) -> Diagnostic:
        """A problem with the entry of `image`, located at its line."""
        return Diagnostic(self.file, self.lines[image], 1, image, message)


def default_lock_path(paths: Iterable[Path]) -> Path:
    """Return where the project's lock is: obc.lock at the top of the git work tree that
    holds the run files, else in the current directory."""
    roots = {git_work_tree(path if path.is_dir() else path.parent) for path in paths}
    if len(roots) > 1:
        found = ", ".join(sorted(str(root or Path.cwd()) for root in roots))
        raise ObcError(f"the run files are in different projects ({found}): name the lock "
                       "file with --lock FILE")
    root = roots.pop() if roots else None
    return Path(os.path.relpath(root / LOCK_NAME)) if root else Path(LOCK_NAME)


def read_lock(path: Path, allowed: tuple[Path, ...] = ()) -> tuple[Lock, list[Diagnostic]]:
    """Read a lock file as obc reads every file it is given: a regular file in its project
    (allowed: the folders of --allow-dir), of at most MAX_FILE_BYTES of UTF-8 text, checked
    before it is opened. A missing one is an empty lock."""
    lock = Lock(str(path))
    if not os.path.lexists(path):
        return lock, []
    try:
        text = decode_text(read_inside(find_project(path, allowed), path, MAX_FILE_BYTES))
    except SourceError as error:
        limit = f"; a lock file holds at most {MAX_FILE_BYTES:,} bytes" \
            if isinstance(error, TooLargeError) else ""
        return lock, [Diagnostic(lock.file, 1, 1, "", f"this lock file {error}{limit}",
                                 error.hint)]
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        entry = _ENTRY.fullmatch(line)
        if entry is None:
            problems.append(Diagnostic(lock.file, number, 1, "", _why_not_entry(line)))
        elif entry["image"] in lock.digests:
            problems.append(Diagnostic(lock.file, number, 1, entry["image"],
                                       f"listed twice (line {lock.lines[entry['image']]})"))
        else:
            lock.digests[entry["image"]] = entry["digest"]
            lock.lines[entry["image"]] = number
    return lock, problems


def _why_not_entry(line: str) -> str:
    image = line.split(maxsplit=1)[0]
    if "@" in image:
        return f"{quoted(image)} is pinned by digest already; a pinned image needs no entry"
    return ("expected 'IMAGE sha256:<64 lower-case hex digits>', one space between them, got "
            f"{quoted(line)}")


def format_lock(digests: Mapping[str, str]) -> str:
    """Return the text of a lock file holding `digests`, sorted by image."""
    return HEADER + "".join(f"{image} {digests[image]}\n" for image in sorted(digests))


def is_pinned(image: str) -> bool:
    return "@" in image


def image_problem(source: Source, message: str) -> Diagnostic:
    """A problem with a run file's image, located at `runtime.image` (or `runtime` when the
    default image is used)."""
    path = ("runtime", "image") if "image" in source.data["runtime"] else ("runtime",)
    return source.problem(path, message)


def lockable_image(job: Job) -> str | None:
    """The image tag of `job` that obc.lock pins, if it is not pinned already: a container's,
    or the registry image of an enroot 4 job (enroot 3 takes no digest)."""
    if job.container is not None:
        image = job.container.image
    elif job.enroot is not None and job.enroot.takes_digest and not job.enroot.image_is_file:
        image = job.enroot.image
    else:
        return None
    return None if is_pinned(image) else image


def unpinned_images(source: Source, job: Job, lock_file: Path) -> list[Diagnostic]:
    """The problem `--require-digests` reports: an image neither pinned nor locked."""
    enroot = job.enroot
    if enroot is not None and not enroot.takes_digest and not enroot.image_is_file:
        return [image_problem(source, f"{quoted(enroot.image)} is not pinned by digest; import it "
                                      "into a squashfs file (enroot import) and give its "
                                      "path, or, with enroot 4, lock it (obc lock) or write "
                                      "NAME:TAG@sha256:<digest>")]
    image = lockable_image(job)
    if image is None:
        return []
    return [image_problem(source, f"{quoted(image)} is neither pinned by digest nor locked in "
                                  f"{lock_file}; run obc lock, or write the image as "
                                  "NAME:TAG@sha256:<digest>")]
