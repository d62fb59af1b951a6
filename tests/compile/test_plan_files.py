"""What `obc plan` says changed inside an embedded file: the old text read from the script's
here-document (trusted only with the recorded hash), compared key by key or line by line."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.pipeline.pipeline import compile_files
from compiler.plan.files import embedded_text
from compiler.plan.files import file_change as describe
from compiler.render.meaning import meaning

RUN = """\
version: 1
id: j
runtime: {kind: native}
files: {"conf/a b.yaml": a.yaml, notes.txt: notes.txt}
steps: [{name: a, run: [cat, conf/a b.yaml]}]
"""


def compiled(folder: Path, files: dict[str, str]) -> tuple[str, dict]:
    for name, text in {"run.yaml": RUN, **files}.items():
        (folder / name).write_text(text, encoding="utf-8")
    (script,) = compile_files([folder / "run.yaml"]).scripts
    return script.text, meaning(script.job)["files"]


@pytest.mark.parametrize("notes", ["one\ntwo\n", "one\nand no newline", "OBC_EOF\nend\n",
                                   "\n", "x" * 300])
def test_the_text_a_script_writes_is_read_back_from_it(tmp_path, notes):
    script, files = compiled(tmp_path, {"a.yaml": "lr: 1\n", "notes.txt": notes})
    config, notes_digest = (files[name]["content"]["sha256"] for name in ("conf/a b.yaml",
                                                                          "notes.txt"))
    assert embedded_text(script, "conf/a b.yaml", config) == "lr: 1\n"
    assert embedded_text(script, "notes.txt", notes_digest) == notes


def test_text_without_the_recorded_hash_is_not_trusted(tmp_path):
    script, files = compiled(tmp_path, {"a.yaml": "lr: 1\n", "notes.txt": "x\ny\n"})
    digest = files["notes.txt"]["content"]["sha256"]
    assert embedded_text(script.replace("\nx\ny\n", "\nx\nz\n"), "notes.txt", digest) is None
    assert embedded_text(script, "elsewhere.txt", digest) is None


@pytest.mark.parametrize(("old", "new", "said"), [
    ("learning_rate: 0.0002\nepochs: 1\n", "learning_rate: 0.0001\nepochs: 1\n",
     "learning_rate 0.0002 → 0.0001"),
    ("a: {b: 1, c: x}\n", "a: {b: 2, c: x y}\nd: true\n",
     "a.b 1 → 2, a.c x → 'x y', d added (true)"),
    ("keep: 1\ngone: null\n", "keep: 1 # why\n", "gone removed"),
    ("a: 1\n", "# a comment\na: 1\n", "comments and layout only"),
    ("datasets: [{path: a}]\n", "datasets: [{path: b}]\n",
     'datasets [{"path": "a"}] → [{"path": "b"}]'),
    ("".join(f"k{i}: 1\n" for i in range(10)), "".join(f"k{i}: 2\n" for i in range(10)),
     ", ".join(f"k{i} 1 → 2" for i in range(8)) + ", 2 more keys"),
    ("print(1)\nprint(2)\n", "print(1)\nprint(3)\nprint(4)\n", "+2 -1 lines"),
    ("a: 1\n", "- a list\n", "+1 -1 lines"),
])
def test_what_changed_in_a_file(old, new, said):
    assert describe(old, new) == said


def test_a_file_recorded_whole_then_by_hash_is_compared_too(tmp_path, monkeypatch, obc):
    monkeypatch.chdir(tmp_path)
    Path("n.txt").write_text("a", encoding="utf-8")  # short: recorded as it is
    Path("run.yaml").write_text("version: 1\nid: j\nruntime: {kind: native}\n"
                                "files: {n.txt: n.txt}\nsteps: [{name: a, run: [cat, n.txt]}]\n",
                                encoding="utf-8")
    assert obc("compile", "run.yaml", "-o", "out").code == 0
    Path("n.txt").write_text("a\nb\n", encoding="utf-8")
    assert obc("plan", "run.yaml", "-o", "out").stdout.splitlines()[0] == (
        "~ out/j/job.sh: file n.txt: +1 -0 lines")
