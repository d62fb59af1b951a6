"""What obc knows of an Axolotl config: how to read one with its problems located in it, and
which of its values name files that Axolotl will look for in the run dir.

Axolotl runs in the run dir (a container's /workspace/run), so a relative path in its
config is a path in the run dir: it exists there only if the run file puts it there
(`files:`) or the job's steps make it. Absolute paths are on the machine that runs the job,
where obc cannot look.
"""

from __future__ import annotations

import io
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from ..core.diagnostics import Diagnostic, field_path, show
from ..model.defaults import DEFAULT_ON_SIGNAL, DEFAULT_RESUME
from ..model.runtimes import host_folder, mounts_of
from ..model.trainers import (
    AXOLOTL,
    TrainerKind,
    checkpoints_on_signal,
    config_field,
    trainer_kind,
)
from .load import Mark, Path_, Source
from .screen import MAX_DEPTH, syntax_error

# Where the job writes the config, in the run dir.
AXOLOTL_CONFIG_NAME = AXOLOTL.config_name
# The file that makes Axolotl save a checkpoint (utils/callbacks/dynamic_checkpoint.py).
TRIGGER_FILE = "axolotl_checkpoint.save"



@dataclass(frozen=True, slots=True)
class PathKeys:
    """Where a trainer's config names files it reads, by where they stand: top-level keys
    whose string is always a path, top-level keys whose string is a path or a Hugging Face
    hub id, and the keys of each item of top-level lists of datasets."""

    files: tuple[str, ...]
    files_or_hub: tuple[str, ...]
    dataset_lists: tuple[str, ...]
    dataset_keys: tuple[str, ...]


AXOLOTL_PATHS = PathKeys(("deepspeed",), (), ("datasets", "test_datasets",
                                             "pretraining_dataset"), ("path", "data_files"))
# Files a dataset's path names by its ending, when it could also be a hub id `org/name`.
DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet", ".arrow", ".txt", ".tsv", ".yaml",
                 ".yml")


class ConfigError(ValueError):
    """A config file that is not one YAML mapping, at a line and column of that file."""

    def __init__(self, message: str, mark: Mark, hint: str | None = None) -> None:
        super().__init__(message)
        self.mark, self.hint = mark, hint


def read_config(text: str, kind: TrainerKind | None = None) -> dict[str, Any]:
    """Return the mapping of a trainer's config file (`kind`'s, if known), with the position
    of every value; raise ConfigError at the place in the file where it is not one."""
    yaml = YAML(typ="rt", pure=True)
    yaml.max_depth = MAX_DEPTH  # composing recurses: a deep file is an error, not a crash
    try:
        data = yaml.load(io.StringIO(text))
    except DuplicateKeyError as error:
        mark = error.problem_mark
        key = re.search(r'found duplicate key "(.*)" with value', str(error.problem))
        raise ConfigError(f"duplicate key {key.group(1) if key else ''!r}",
                          Mark(mark.line + 1, mark.column + 1),
                          _duplicate_key_hint(kind)) from error
    except MarkedYAMLError as error:
        if "maximum depth" in str(error.problem):
            raise ConfigError(f"nesting is deeper than {MAX_DEPTH} levels",
                              Mark(error.problem_mark.line + 1,
                                   error.problem_mark.column + 1)) from error
        problem = syntax_error(error, text)
        raise ConfigError(problem.message, problem.mark, problem.hint) from error
    except YAMLError as error:
        raise ConfigError(f"not valid YAML: {str(error).splitlines()[0]}", Mark(1, 1)) from error
    if not isinstance(data, dict):
        raise ConfigError("does not hold a YAML mapping, as a trainer's config does", Mark(1, 1))
    return data


def _duplicate_key_hint(kind: TrainerKind | None) -> str:
    if kind is None:
        return "a trainer keeps only the last one, or refuses the file; remove one"
    if kind.refuses_duplicate_keys:
        return f"{kind.title} refuses it too; remove one"
    return f"{kind.title} would silently keep only the last one; remove one"


@dataclass(frozen=True, slots=True)
class FileValue:
    """A value of the config that names a file in the run dir: where it stands in the config
    (`keys`), and at which line and column of the config file, if it is one."""

    keys: Path_
    value: str
    mark: Mark | None


def run_dir_files(config: dict[str, Any], paths: PathKeys = AXOLOTL_PATHS) -> \
        Iterator[FileValue]:
    """Yield every value of `config` that names a file relative to the run dir."""
    for keys, value in _file_values(config, paths):
        if isinstance(value, str) and _relative_local_path(keys, value, paths):
            yield FileValue(keys, value, _mark(config, keys))


def _file_values(config: dict[str, Any], paths: PathKeys) -> Iterator[tuple[Path_, Any]]:
    for key in (*paths.files, *paths.files_or_hub):
        if key in config:
            yield (key,), config[key]
    for name in paths.dataset_lists:
        datasets = config.get(name)
        for i, dataset in enumerate(datasets if isinstance(datasets, list) else ()):
            if not isinstance(dataset, dict):
                yield (name, i), dataset
                continue
            for key in paths.dataset_keys:
                value = dataset.get(key)
                for j, item in enumerate(value if isinstance(value, list) else ()):
                    yield (name, i, key, j), item
                if not isinstance(value, list):
                    yield (name, i, key), value


def _relative_local_path(keys: Path_, value: str, paths: PathKeys) -> bool:
    """Whether the trainer reads `value` as a path in the run dir, rather than an absolute
    path or a Hugging Face hub id (`tatsu-lab/alpaca`, or a canonical one such as `squad`):
    a dataset's or model's path is local when it starts with `./` or `../`, ends like a data
    file, or has more folders than a hub id's one `/`."""
    if not value or value.startswith(("/", "~")) or "://" in value:
        return False
    if keys[0] in paths.files or "data_files" in keys:
        return True
    return (value.startswith(("./", "../")) or value.count("/") > 1
            or PurePosixPath(value).suffix.lower() in DATA_SUFFIXES)


def _mark(config: Any, keys: Path_, *, key: bool = False) -> Mark | None:
    """The line and column of the value at `keys` (or of its key) in a round-trip loaded
    file, if known."""
    node = config
    for step in keys[:-1]:
        node = node[step]
    if isinstance(node, CommentedMap):
        line, column = (node.lc.key if key else node.lc.value)(keys[-1])
        return Mark(line + 1, column + 1)
    if isinstance(node, CommentedSeq):
        line, column = node.lc.item(keys[-1])
        return Mark(line + 1, column + 1)
    return None


def in_run_dir(value: str, embedded: list[str]) -> bool:
    """Whether the run dir will hold `value`: one of the embedded files, or a folder of one."""
    path = posixpath.normpath(value)
    return any(name == path or name.startswith(path + "/") for name in embedded)


def missing_file_hint(value: str) -> str:
    return (f"put it in the run dir with files: {{{value}: <a file of the project>}}, mount "
            "it and give its absolute path, or name a Hugging Face dataset")


# Keys every Axolotl config has, or most do, and no run file.
CONFIG_KEYS = ("base_model", "datasets", "adapter", "sequence_len", "micro_batch_size")


def looks_like_config(data: Any) -> bool:
    """Whether `data`, given as a run file, is an Axolotl config instead."""
    return (isinstance(data, dict) and "version" not in data and "runtime" not in data
            and any(key in data for key in CONFIG_KEYS))


def config_place(source: Source, config_text: str | None, config_name: str) -> ConfigPlace:
    """Return a run file's trainer config, read with its positions: inline (`config_text`
    None), or the file `config_name` whose text is `config_text`."""
    field = config_field(source.data)
    assert field is not None  # a trainer with a config
    config = source.data["trainer"][field[1]]["config"] if config_text is None \
        else read_config(config_text)
    return ConfigPlace(source, config, config_name, field)


def config_problems(where: ConfigPlace, embedded: list[str],
                    paths: PathKeys = AXOLOTL_PATHS) -> Iterator[Diagnostic]:
    """Yield a problem for each file the trainer's config names in the run dir that nothing
    will put there, and for what keeps train from checkpointing where the job looks."""
    for keys, message, hint in _checkpoint_problems(where.source.data, where.config):
        yield where.problem(keys, message, hint)
    for found in run_dir_files(where.config, paths):
        if not in_run_dir(found.value, embedded):
            yield where.problem(found.keys, f"{show(found.value)} is a path in the run dir, "
                                "where nothing puts it", missing_file_hint(found.value))


@dataclass(frozen=True, slots=True)
class ConfigPlace:
    """Locates problems of a run file's trainer config (at `field`), inline or in a file of
    its own: at the inline config's own value, or at the run file's `config` for a config
    file (whose line the message gives)."""

    source: Source
    config: Any
    name: str
    field: Path_

    def problem(self, keys: Path_, message: str, hint: str | None, *,
                key: bool = False) -> Diagnostic:
        """At the inline config's value at `keys` (or its key); for a config file, at the run
        file's `config`, the message naming the config file's line."""
        source = self.source
        if not self.name:
            return source.problem(self.field + keys, message, hint, key=key)
        inside = _mark(self.config, keys, key=key) if keys else None
        mark = source.mark(self.field)
        where = f"{self.name}:{inside.line}:{inside.column}: " if inside else f"{self.name}: "
        what = f"{field_path(keys)}: " if keys else ""
        return Diagnostic(source.file, mark.line, mark.column, field_path(self.field),
                          f"{where}{what}{message}", hint)


def _checkpoint_problems(data: dict[str, Any], config: dict[str, Any]) -> \
        Iterator[tuple[Path_, str, str]]:
    """What keeps resume or checkpoint-on-signal from working with this config."""
    kind = trainer_kind(data) or AXOLOTL
    resume = data["trainer"][kind.name].get("resume", DEFAULT_RESUME) != "never"
    on_signal = checkpoints_on_signal(data) and \
        data.get("checkpoint", {}).get("on_signal", DEFAULT_ON_SIGNAL)
    if not (resume or on_signal):
        return
    output_dir = config.get("output_dir", kind.output_dir)
    if not isinstance(output_dir, str) or re.search(r'["\\\x00-\x1f]', output_dir):
        yield (("output_dir",) if "output_dir" in config else ()), \
            "output_dir must be a plain path: the job looks for checkpoints in it", \
            f"or set trainer.{kind.name}.resume: never" + \
            (" and checkpoint.on_signal: false" if checkpoints_on_signal(data) else "")
    elif posixpath.normpath(output_dir).split("/")[0] == "..":
        yield ("output_dir",), f"{show(output_dir)} leaves the run dir, and no check " \
            "covers where it leads", "keep it in the run dir, or make it absolute: the job " \
            "then checks that folder as it checks the run dir"
    elif output_dir.startswith("/") and data["runtime"]["kind"] != "native" and \
            host_folder(output_dir, mounts_of(data["runtime"])) is None:
        yield ("output_dir",), f"{show(output_dir)} is in no folder the container mounts, " \
            "so the job cannot find its checkpoints", \
            "use a path in the run dir (relative, or under /workspace/run) or under a mount"
    dynamic = config.get("dynamic_checkpoint")
    if on_signal and isinstance(dynamic, dict) and not dynamic.get("enabled", False):
        yield ("dynamic_checkpoint",), "turns off dynamic_checkpoint, which " \
            "checkpoint.on_signal needs", "remove it, or set checkpoint.on_signal: false"
    key = kind.term_checkpoint_key
    if on_signal and key and key in config and not config[key]:
        yield (key,), f"turns off {key}, which checkpoint.on_signal needs", \
            "remove it, or set checkpoint.on_signal: false"
