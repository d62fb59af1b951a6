"""The page of `obc report`: the rows `obc status` prints, as a table, then the loss curves
(a sweep's runs overlaid, then each run's own), the plots inline SVG. One static file: no
script, no style sheet or font from elsewhere, nothing that depends on when it was made but
the rows. Every value reaches the page through `html.escape`."""

from __future__ import annotations

from collections.abc import Iterator
from html import escape

from ..status.table import COLUMNS, Row, columns
from .plots import Curve, loss_svg

STYLE = """\
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; }
th, td { padding: 0.2em 0.8em; text-align: left; white-space: nowrap;
         border-bottom: 1px solid #ddd; }
figure { margin: 1em 0; }
.problems { color: #a00; }"""


def report_page(rows: list[Row]) -> str:
    """The whole HTML page of `rows`."""
    body = "\n".join([_table(rows), *_problems(rows), *_sweep_plots(rows), *_run_plots(rows)])
    return f"""\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>obc report</title>
<style>
{STYLE}
</style>
</head>
<body>
<h1>obc report</h1>
{body}
</body>
</html>
"""


def _table(rows: list[Row]) -> str:
    names = columns(rows)
    head = "".join(f"<th>{escape(column)}</th>" for column in names)
    lines = ["<tr>" + "".join(f"<td>{escape(cell)}</td>"
                              for cell in row.cells(stages=names != COLUMNS)) + "</tr>"
             for row in rows]
    return "\n".join(['<table id="status">', f"<thead><tr>{head}</tr></thead>", "<tbody>",
                      *lines, "</tbody>", "</table>"])


def _problems(rows: list[Row]) -> Iterator[str]:
    problems = [f"<li>{escape(f'{row.job}: {row.problem}')}</li>" for row in rows if row.problem]
    if problems:
        yield "\n".join(['<ul class="problems">', *problems, "</ul>"])


def _sweep_plots(rows: list[Row]) -> Iterator[str]:
    """One plot for each sweep, its runs that logged a loss overlaid, each labelled by which
    run it is."""
    sweeps = dict.fromkeys(row.watched.sweep for row in rows if row.watched.sweep)
    for sweep in sweeps:
        curves: list[Curve] = [(row.watched.which or row.job, row.progress.losses)
                               for row in rows
                               if row.watched.sweep == sweep and row.progress.losses]
        if curves:
            yield _figure("sweep", f"sweep {sweep}", curves, legend=True)


def _run_plots(rows: list[Row]) -> Iterator[str]:
    """Each job's own plot; a job that logged no loss yet says so."""
    for row in rows:
        if row.progress.losses:
            yield _figure("run", row.job, [(row.job, row.progress.losses)], legend=False)
        else:
            yield f'<p class="no-curve">{escape(row.job)}: no loss logged yet</p>'


def _figure(kind: str, title: str, curves: list[Curve], *, legend: bool) -> str:
    # matplotlib escapes the title and labels it writes into the SVG.
    return f'<figure class="{kind}">\n{loss_svg(title, curves, legend=legend)}</figure>'
