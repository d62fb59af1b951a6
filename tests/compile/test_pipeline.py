"""The pipeline as a whole: batches, folders, and the one-id-per-job rule."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from compiler.core import resources
from compiler.core.diagnostics import ObcError
from compiler.pipeline.pipeline import compile_files, run_files

RUN = """\
version: 1
id: {id}
runtime: {{kind: {kind}}}
steps: [{{name: s, run: [python, train.py, "{id}"]}}]
"""


def write_runs(folder: Path, count: int) -> None:
    kinds = ("docker", "podman", "native")
    for i in range(count):
        (folder / f"r{i:02d}.yaml").write_text(RUN.format(id=f"run-{i}", kind=kinds[i % 3]))


def test_a_batch_reads_the_schema_and_each_template_once(tmp_path, monkeypatch):
    write_runs(tmp_path, 12)
    reads: list[str] = []
    original = jinja2.FileSystemLoader.get_source

    def counting(self, environment, template):
        reads.append(template)
        return original(self, environment, template)

    monkeypatch.setattr(jinja2.FileSystemLoader, "get_source", counting)
    schema_reads = []
    monkeypatch.setattr(resources, "schema_path", lambda: schema_reads.append(1) or
                        Path(resources.data_dir("schemas"), "run.schema.json"))
    resources.run_schema.cache_clear()
    result = compile_files([tmp_path])
    assert not result.diagnostics and len(result.scripts) == 12
    assert len(reads) == len(set(reads)), reads
    assert len(schema_reads) <= 1


def test_folders_expand_to_their_run_files_in_name_order(tmp_path):
    write_runs(tmp_path, 3)
    (tmp_path / "notes.txt").write_text("not a run file")
    (tmp_path / "extra.yml").write_text(RUN.format(id="extra", kind="docker"))
    assert [p.name for p in run_files([tmp_path])] == ["extra.yml", "r00.yaml", "r01.yaml",
                                                       "r02.yaml"]


@pytest.mark.parametrize("name", ["missing.yaml", "empty-folder"])
def test_a_path_that_names_no_run_file_is_a_usage_error(tmp_path, name):
    (tmp_path / "empty-folder").mkdir()
    with pytest.raises(ObcError):
        run_files([tmp_path / name])


def test_two_run_files_with_one_id_are_an_error_naming_both(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("a.yaml").write_text(RUN.format(id="same", kind="docker"))
    Path("b.yaml").write_text("# another\n" + RUN.format(id="same", kind="podman"))
    result = compile_files([Path("a.yaml"), Path("b.yaml")])
    assert [d.text() for d in result.diagnostics] == [
        "b.yaml:3:5: error: id: id 'same' is also the id of a.yaml; ids must be unique"]


def test_an_embedded_file_cannot_be_run_as_a_program(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("train.sh").write_text("echo hi\n")
    Path("r.yaml").write_text("""\
version: 1
id: r
runtime: {kind: native}
files: {train.sh: train.sh}
steps: [{name: s, run: [./train.sh]}]
""")
    (problem,) = compile_files([Path("r.yaml")]).diagnostics
    assert problem.text().startswith("r.yaml:5:25: error: steps[0].run[0]: './train.sh' is an "
                                     "embedded file")
    assert problem.hint == "run it with its interpreter: [sh, train.sh]"
