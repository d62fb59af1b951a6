"""The loss curves of `obc report` as SVG, drawn by matplotlib: one run's, or a sweep's runs
overlaid, each labelled by which run it is. The same curves give the same bytes: the ids
matplotlib makes are salted with a fixed salt, no date is written, text stays text in one
fixed font and size."""

from __future__ import annotations

import io
from collections.abc import Sequence

from ..core.diagnostics import ObcError

try:
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
except ImportError as missing:  # an optional extra: only `obc report` needs it
    raise ObcError("obc report draws with matplotlib, which is not installed: "
                   "pip install 'overbrainer[report]'") from missing

Curve = tuple[str, Sequence[tuple[float, float]]]  # a label, and (step, loss) points

STYLE = {
    "svg.hashsalt": "obc-report",  # the ids of clip paths, the same on every run
    "svg.fonttype": "none",  # text as <text>, not glyph paths: small, and selectable
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "text.parse_math": False,  # a label with `$` is shown as it is, not as TeX
    "axes.prop_cycle": matplotlib.rcParamsDefault["axes.prop_cycle"],
}
SIZE = (6.4, 3.2)  # inches, at 72 points an inch in SVG


def loss_svg(title: str, curves: Sequence[Curve], *, legend: bool) -> str:
    """One plot of loss over training step: a line for each curve, and with `legend` a
    legend naming them."""
    with matplotlib.rc_context(STYLE):
        figure = Figure(figsize=SIZE, layout="constrained")
        axes = figure.add_subplot()
        for label, points in curves:
            steps, losses = zip(*points, strict=True)
            axes.plot(steps, losses, marker="." if len(points) < 30 else None, label=label)
        axes.set(title=title, xlabel="step", ylabel="loss")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole
        axes.grid(alpha=0.3)
        if legend:
            axes.legend()
        svg = io.StringIO()
        figure.savefig(svg, format="svg", metadata={"Date": None})
    return _inline(svg.getvalue())


def _inline(svg: str) -> str:
    """The <svg> element alone: an SVG file's XML declaration and doctype do not belong
    inside HTML."""
    return svg[svg.index("<svg"):]
