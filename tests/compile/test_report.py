"""`obc report PATH… -o FILE` without running a job: the page of a sweep's records (a
snapshot, its plots left out: their bytes are matplotlib's), the same bytes from the same
records in another process, every value escaped, a run that logged no loss shown by its
row alone, and the error that names the extra when matplotlib is missing.
tests/browser/test_report_browser.py renders the page in chromium.

Update the snapshot after an intended change with
`pytest tests/compile/test_report.py --snapshot-update`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from compiler.report.page import report_page
from compiler.status.jobs import Watched, find_jobs
from compiler.status.progress import Progress
from compiler.status.table import Row, build_row
from tests.compile.test_status_table import NOW, checkpoint, compile_out, record
from tests.conftest import REPO

SWEEP = """\
version: 1
id: sw
runtime: {kind: native}
trainer: {axolotl: {config: {output_dir: out, max_steps: 4}}}
matrix: {axes: {lr: {set: trainer.axolotl.config.learning_rate,
                     values: ["1e-4", "2e-4", "4e-4"]}}}
"""
GRID = "#b0b0b0"


class HtmlSnapshot(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT
    file_extension = "html"


def sweep_records(tmp_path: Path) -> tuple[Path, Path]:
    """A sweep of three runs: two done with four logged losses each, the third not started.
    Returns OUT and the root of the run dirs."""
    out = compile_out(tmp_path, {"sw.yaml": SWEEP})
    root = tmp_path / "runs"
    for job, ended in (("sw-1e-4", "2026-12-01T10:01:40Z"), ("sw-2e-4", "2026-12-01T10:02:00Z")):
        record(root / job, job, "succeeded", step=None, exit_code=0, ended_at=ended)
    checkpoint(root / "sw-1e-4/out", 4)
    # The second run learns slower: a curve of its own, above the first.
    history = [{"step": n, "loss": round(1 + 2 / n, 4)} for n in range(1, 5)]
    state = checkpoint(root / "sw-2e-4/out", 4) / "trainer_state.json"
    state.write_text(json.dumps({"log_history": history}))
    return out, root


def report(*args: str) -> subprocess.CompletedProcess:
    """`obc report ARGS…` in a process of its own."""
    return subprocess.run([sys.executable, "-m", "compiler", "report", *args], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=120, check=False)


def curves(svg: str) -> list[tuple[str, str]]:
    """The path and stroke colour of each line of a plot (matplotlib's ids: line2d_N),
    the legend's included, less the grid's (grey, its grid.color)."""
    lines = re.findall(r'<g id="line2d_\d+">\s*<path d="(M[^"]*)"[^>]*stroke: (#\w+)', svg)
    return [(path, colour) for path, colour in lines if colour != GRID]


def without_plots(page: str) -> str:
    return re.sub(r"<svg .*?</svg>\n", "<svg>…</svg>\n", page, flags=re.S)


def test_the_page_of_a_sweep(tmp_path, snapshot):
    out, root = sweep_records(tmp_path)

    page = report_page([build_row(job, NOW) for job in find_jobs([out], root)])

    assert without_plots(page) == snapshot.use_extension(HtmlSnapshot)
    # The sweep's plot overlays both curves, each labelled by its axis value; each run
    # that logged a loss has its own; the run not started has its row, and no curve.
    plots = re.findall(r'<figure class="(\w+)">\n(<svg .*?</svg>)', page, re.S)
    assert [kind for kind, _ in plots] == ["sweep", "run", "run"]
    assert re.findall(r">lr=[0-9e-]+<", plots[0][1]) == [">lr=1e-4<", ">lr=2e-4<"]
    assert '<p class="no-curve">sw-4e-4: no loss logged yet</p>' in page
    assert "<td>sw-4e-4</td><td>not started</td>" in page


def test_the_same_records_make_the_same_bytes_in_another_process(tmp_path):
    out, root = sweep_records(tmp_path)

    for name in ("first.html", "second.html"):
        done = report(str(out), "--run-dir-root", str(root), "-o", str(tmp_path / name))
        assert (done.returncode, done.stderr) == (0, f"obc: wrote {tmp_path / name}\n")

    first = (tmp_path / "first.html").read_bytes()
    assert first == (tmp_path / "second.html").read_bytes()
    assert first.count(b"<svg ") == 3
    # Nothing from elsewhere: no script, no link, no address but the SVG's namespaces.
    assert not re.search(rb"<script|<link|src=|@import", first)
    assert set(re.findall(rb"https?://[^\s\"'<)]+", first)) <= {
        b"http://www.w3.org/2000/svg", b"http://www.w3.org/1999/xlink",
        b"http://purl.org/dc/elements/1.1/", b"http://creativecommons.org/ns#",
        b"http://www.w3.org/1999/02/22-rdf-syntax-ns#", b"http://purl.org/dc/dcmitype/StillImage",
        b"https://matplotlib.org/"}


def test_every_value_of_the_page_is_escaped(tmp_path):
    hostile = '<script>alert("x")</script>&'
    watched = Watched(hostile, tmp_path / hostile, sweep=f"sw{hostile}", which=f"lr={hostile}")
    row = Row(watched, None, Progress(f"checkpoint-{hostile}", ((1, 2.0), (2, 1.0))), None,
              f"problem {hostile}")

    page = report_page([row])

    assert "<script" not in page
    escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;"
    assert f"<td>{escaped}</td>" in page
    assert f"<li>{escaped}: problem {escaped}</li>" in page
    # In the plots matplotlib escapes them, as XML (quotes need no escape in text).
    assert page.count("lr=&lt;script&gt;alert(") == 1
    assert page.count(">sweep sw&lt;script&gt;alert(") == 1


def test_without_matplotlib_the_error_names_the_extra(tmp_path):
    out, root = sweep_records(tmp_path)
    blocked = "import sys; sys.modules['matplotlib'] = None; " \
        "from compiler.cli.main import main; sys.exit(main(sys.argv[1:]))"

    done = subprocess.run([sys.executable, "-c", blocked, "report", str(out), "-o",
                           str(tmp_path / "r.html")], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60,
                          check=False)

    assert (done.returncode, done.stderr) == (2, (
        "obc: error: obc report draws with matplotlib, which is not installed: "
        "pip install 'overbrainer[report]'\n"))
    assert not (tmp_path / "r.html").exists()


def test_a_job_with_stages_has_their_column_on_the_page(tmp_path):
    pipeline = """\
version: 1
id: pipe
runtime: {kind: native}
steps: [{name: prep, run: [echo]}, {name: main, run: [echo]}]
slurm: {time: 30, stages: {prep: {gpus_per_node: 0}}}
"""
    out = compile_out(tmp_path, {"pipe.yaml": pipeline, "sw.yaml": SWEEP})
    rows = [build_row(job, NOW) for job in find_jobs([out], tmp_path / "runs")]
    page = report_page(rows)
    assert "<th>slurm job</th><th>stages</th>" in page
    assert "<td>prep not started, main not started</td></tr>" in page
    assert page.count("<td>-</td></tr>") == 3  # the sweep's runs have none
