"""The fake pyxis SPANK plugin of fake_pyxis.c: build it, start a test cluster that loads it,
read what it recorded (one JSON object per task; the format is in fake_pyxis.c)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.slurm_cluster import SlurmCluster, missing_programs

SOURCE = Path(__file__).with_name("fake_pyxis.c")
SPANK_HEADER = Path("/usr/include/slurm/spank.h")


def build_plugin(folder: Path) -> Path:
    """Compile fake_pyxis.c into `folder` against the spank.h of Debian's libslurm-dev, the
    release of the cluster's Slurm (slurmstepd refuses a plugin built for another)."""
    assert SPANK_HEADER.exists(), "tests/run installs libslurm-dev (spank.h)"
    library = folder / "fake_pyxis.so"
    result = subprocess.run(
        ["gcc", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-fPIC", "-shared",
         "-o", str(library), str(SOURCE)],
        capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    return library


@contextmanager
def fake_pyxis_cluster(root: Path) -> Iterator[tuple[SlurmCluster, Path]]:
    """A running test cluster whose srun, sbatch and slurmstepd load the fake pyxis, and the
    file it records to; stopped on leaving."""
    missing = missing_programs()
    assert not missing, f"tests/run installs Slurm; missing here: {', '.join(missing)}"
    records = root / "pyxis-records.jsonl"
    plugin = build_plugin(root)
    cluster = SlurmCluster(root / "slurm", plugstack=f"required {plugin} record={records}\n")
    try:
        cluster.start()
        yield cluster, records
    finally:
        cluster.stop()


def read_records(path: Path) -> list[dict]:
    """Every task recorded so far, in the order they started (values are the bytes Slurm
    held, so text that is not UTF-8 comes back with surrogate escapes)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    return [json.loads(line) for line in text.splitlines()]
