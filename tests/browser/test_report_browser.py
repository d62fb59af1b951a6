"""`obc report`'s page in a real browser, Debian's chromium, headless: the page it builds
holds the table's rows, an SVG for each plot and a path for each curve; its screenshot
shows the curves drawn, in their colours."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from PIL import Image

from tests.compile.test_report import curves, report, sweep_records

# matplotlib's first two colours (its default cycle): the first and second curve of a plot.
BLUE, ORANGE = (0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)
WINDOW = (1000, 1400)  # the table, then the three plots, one below the other


def chromium(page: Path, *args: str) -> str:
    """Run headless chromium on the page, with a profile of its own; return its stdout."""
    done = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                           f"--user-data-dir={page.parent / 'profile'}", *args,
                           page.as_uri()], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def write_report(tmp_path: Path) -> Path:
    out, root = sweep_records(tmp_path)
    page = tmp_path / "report.html"
    done = report(str(out), "--run-dir-root", str(root), "-o", str(page))
    assert done.returncode == 0, done.stderr
    return page


def test_chromium_builds_the_table_a_plot_per_curve_and_a_path_per_line(tmp_path):
    dom = chromium(write_report(tmp_path), "--dump-dom")

    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td>", dom)
    assert rows == [("sw-1e-4", "done"), ("sw-2e-4", "done"), ("sw-4e-4", "not started")]
    figures = re.findall(r'<figure class="(\w+)">(.*?)</figure>', dom, re.S)
    assert [(kind, body.count("<svg ")) for kind, body in figures] == [
        ("sweep", 1), ("run", 1), ("run", 1)]
    assert [[colour for _, colour in curves(body)] for _, body in figures] == [
        ["#1f77b4", "#ff7f0e", "#1f77b4", "#ff7f0e"],  # two lines, and the legend's two
        ["#1f77b4"], ["#1f77b4"]]


def test_chromium_draws_the_curves(tmp_path):
    page = write_report(tmp_path)
    shot = tmp_path / "report.png"

    chromium(page, f"--screenshot={shot}", "--window-size={},{}".format(*WINDOW))

    image = Image.open(shot).convert("RGB")
    assert image.size == WINDOW
    colours = image.getcolors(maxcolors=WINDOW[0] * WINDOW[1])
    drawn = {colour: sum(n for n, pixel in colours if _near(pixel, colour))
             for colour in (BLUE, ORANGE)}
    # Three blue lines and one orange, each a few hundred pixels long.
    assert drawn[BLUE] > 3 * 300 and drawn[ORANGE] > 300, drawn
    # Below the table the page is drawn, not left white.
    below = image.crop((0, 200, 700, 1200))
    assert sum(n for n, pixel in below.getcolors(700 * 1000) if pixel != (255, 255, 255)) > 5000


def _near(pixel: tuple[int, int, int], colour: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 24 for a, b in zip(pixel, colour, strict=True))
