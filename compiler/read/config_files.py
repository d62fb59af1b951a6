"""Trainer config files a sweep patches (Axolotl's, TRL's): read once (from the project, like
any embedded file), as the trainer reads them (PyYAML: YAML 1.1), and handed to the runs as
plain data to patch and embed inline."""

from __future__ import annotations

import io
import warnings
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from ..core.diagnostics import Diagnostic
from ..core.text import quoted
from ..model.trainers import config_field, trainer_kind
from .axolotl import ConfigError, read_config
from .load import Mark, Source, display_name
from .sources import Embedding, SourceError


class ConfigFiles:
    """The config files of one run file's sweep, by the name the run file gives them."""

    class Unreadable(Exception):
        """A config file that cannot be patched, with the problems that say why."""

        def __init__(self, problems: list[Diagnostic]) -> None:
            super().__init__(problems[0].message)
            self.problems = problems

    def __init__(self, source: Source, embedding: Embedding) -> None:
        self.source, self.embedding = source, embedding
        self.read: dict[str, dict[str, Any] | ConfigFiles.Unreadable] = {}

    def load(self, name: str) -> dict[str, Any]:
        """Return the mapping of the config file `name`; raise Unreadable if it has none."""
        if name not in self.read:
            try:
                self.read[name] = self._load(name)
            except ConfigFiles.Unreadable as error:
                self.read[name] = error
        found = self.read[name]
        if isinstance(found, ConfigFiles.Unreadable):
            raise found
        return found

    def _load(self, name: str) -> dict[str, Any]:
        path = self.source.directory / name
        try:
            text = self.embedding.read(path)
            read_config(text, trainer_kind(self.source.data))  # its problems, located in it
            return load_as_trainer(text)
        except ConfigError as error:
            raise self.Unreadable([Diagnostic(display_name(path), error.mark.line,
                                              error.mark.column, "", str(error),
                                              error.hint)]) from error
        except SourceError as error:
            field = config_field(self.source.data)
            assert field is not None  # only a trainer's config names a config file
            raise self.Unreadable([self.source.problem(
                field, f"file {quoted(name)}: {error}", error.hint)]) from error


def load_as_trainer(text: str) -> dict[str, Any]:
    """Return a config's values as Axolotl and TRL read them (PyYAML): YAML 1.1 (`yes` is
    true, `0777` is octal), as plain dicts, lists and scalars."""
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)
    with warnings.catch_warnings():
        # ruamel warns that YAML 1.1 floats want a dot (1e-4); it reads them as floats.
        warnings.simplefilter("ignore")
        try:
            return yaml.load(io.StringIO(text))
        except YAMLError as error:  # read_config read it: only a YAML 1.1 difference is left
            raise ConfigError(f"YAML 1.1, as the trainer reads it, cannot read this config: "
                              f"{' '.join(str(error).split())}", Mark(1, 1)) from error
