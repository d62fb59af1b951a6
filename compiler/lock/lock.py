"""`obc lock`: the image tags of run files → their digests in obc.lock; `--check` compares.

Run files are read as compile reads them (a file with problems locks nothing). Only the
tags are resolved, through a resolver from registry.py; images pinned by digest need no entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..core.diagnostics import Diagnostic
from ..core.text import quoted
from ..pipeline.build import build_jobs
from ..pipeline.pipeline import run_files
from ..read.load import Source
from ..read.lockfile import Lock, image_problem, lockable_image, read_lock
from .registry import ResolveError

Resolver = Callable[[str], str]
# Each tag, with the run files that use it.
Tags = dict[str, list[Source]]


@dataclass(slots=True)
class LockResult:
    """What `obc lock` would write (`digests`), what was there before, and every problem."""

    old: dict[str, str] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def lock_images(paths: Iterable[Path], lock_file: Path, resolve: Resolver, *,
                update: bool, allowed: tuple[Path, ...] = ()) -> LockResult:
    """Lock every tag the run files use: keep the digests already locked (all resolved again
    with `update`), resolve the others, drop the entries no run file uses. `allowed`: the
    folders outside the project that may be read (--allow-dir)."""
    tags, lock, problems = _read_inputs(paths, lock_file, allowed)
    if problems:
        return LockResult(lock.digests, diagnostics=problems)
    wanted = [image for image in sorted(tags) if update or image not in lock.digests]
    found, problems = _resolve_all(wanted, tags, resolve)
    if problems:
        return LockResult(lock.digests, diagnostics=sorted(problems))
    digests = {image: found.get(image) or lock.digests[image] for image in sorted(tags)}
    return LockResult(lock.digests, digests)


def check_lock(paths: Iterable[Path], lock_file: Path, resolve: Resolver,
               allowed: tuple[Path, ...] = ()) -> list[Diagnostic]:
    """Every way the lock differs from what `obc lock --update` would write: tags that moved,
    tags missing from it, entries no run file uses."""
    tags, lock, problems = _read_inputs(paths, lock_file, allowed)
    if problems:
        return problems
    locked = [image for image in sorted(tags) if image in lock.digests]
    found, problems = _resolve_all(locked, tags, resolve)
    for image, digest in found.items():
        if digest != lock.digests[image]:
            problems.append(lock.problem(image, f"moved: the registry now has {digest}, the "
                                                f"lock {lock.digests[image]}"))
    problems += [image_problem(source, f"{quoted(image)} is not in {lock.file}")
                 for image in sorted(set(tags) - set(lock.digests)) for source in tags[image]]
    problems += [lock.problem(image, "stale: no run file uses this image")
                 for image in sorted(set(lock.digests) - set(tags))]
    return sorted(problems)


def _read_inputs(paths: Iterable[Path], lock_file: Path,
                 allowed: tuple[Path, ...]) -> tuple[Tags, Lock, list[Diagnostic]]:
    tags, problems = find_tags(paths, allowed)
    lock, lock_problems = read_lock(lock_file, allowed)
    return tags, lock, sorted(problems + lock_problems)


def find_tags(paths: Iterable[Path],
              allowed: tuple[Path, ...] = ()) -> tuple[Tags, list[Diagnostic]]:
    """The image tags (not pinned by digest) the run files use, and their problems."""
    tags: Tags = {}
    problems: list[Diagnostic] = []
    for path in run_files(paths):
        built = build_jobs(path, {}, allowed)
        problems += built.problems
        for source, job in built.jobs:
            image = lockable_image(job)
            if image is None:
                continue
            users = tags.setdefault(image, [])
            # A sweep's runs that take the image from one place in it are one use of it.
            if image_problem(source, "") not in [image_problem(used, "") for used in users]:
                users.append(source)
    return tags, problems


def _resolve_all(images: list[str], tags: Tags,
                 resolve: Resolver) -> tuple[dict[str, str], list[Diagnostic]]:
    """Resolve each image; one that fails is a problem at each run file that uses it."""
    found: dict[str, str] = {}
    problems: list[Diagnostic] = []
    for image in images:
        try:
            found[image] = resolve(image)
        except ResolveError as error:
            problems += [image_problem(source, f"cannot resolve {quoted(image)}: {error}")
                         for source in tags[image]]
    return found, problems
