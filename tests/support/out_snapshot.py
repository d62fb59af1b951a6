"""A syrupy extension whose snapshots are the committed out/: the files the examples compile
to are compared with out/'s, byte for byte, and `pytest --snapshot-update` rewrites out/
(docs/tests.md). There is no second copy of out/ under __snapshots__.

A snapshot is named by its path under out/: `assert output == out_snapshot(name=path)`.
"""

from __future__ import annotations

from pathlib import Path

from syrupy.data import SnapshotCollections
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from compiler.pipeline.write import write_atomic

OUT = Path(__file__).resolve().parents[2] / "out"


class OutputText(str):
    """A file's text as the compiler writes it under OUT, with the mode it gets there."""

    mode: int

    def __new__(cls, text: str, mode: int) -> OutputText:
        output = super().__new__(cls, text)
        output.mode = mode
        return output


class OutSnapshot(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT

    def serialize(self, data, **_options) -> OutputText:
        """A compiled output (a script, sweep.sh or runs.tsv) as its text and mode."""
        return OutputText(data.text, data.mode)

    @classmethod
    def get_location(cls, *, test_location, index) -> str:
        return str(OUT / index)

    @classmethod
    def matches_test_location(cls, *, test_location, snapshot_location) -> bool:
        return Path(snapshot_location).is_relative_to(OUT)

    def discover_snapshots(self, *, test_location, ignore_extensions=None) -> SnapshotCollections:
        """None: out/ is not syrupy's to prune. A file there that no example compiles to is
        what `obc compile examples -o out --check` reports (tests/run)."""
        return SnapshotCollections()

    @classmethod
    def write_snapshot_collection(cls, *, snapshot_collection, name_order=None) -> None:
        """Write the file as obc would: atomically, with the mode obc gives it."""
        (snapshot,) = snapshot_collection
        write_atomic(Path(snapshot_collection.location), snapshot.data.encode(),
                     snapshot.data.mode)
