"""Chart geometry for the console's skew page: plain numbers the templates draw as inline SVG.

No markup here: the templates (service/http/console_templates/_charts.html) render these shapes with Jinja2's
autoescaping, so a label is escaped like any other text. Colours are CSS classes (`s0`..`s5`, `ok`/`warn`/`bad`),
which keeps the pages within a Content-Security-Policy without inline styles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from service import display

WIDTH = 720
LABEL_W = 230  # left column for bar labels
ROW_H = 20
SERIES_CLASSES = 6


@dataclass(frozen=True)
class Bar:
    label: str
    text: str  # the value as shown at the bar's end
    y: float
    width: float
    level: str  # "ok" | "warn" | "bad": the CSS class of the bar


@dataclass(frozen=True)
class BarChart:
    title: str
    bars: list[Bar]
    width: int
    height: int
    plot_x: int
    plot_w: int
    ticks: list[tuple[float, str]]
    marker_x: float | None = None
    marker_label: str = ""


@dataclass(frozen=True)
class Series:
    name: str
    css: str
    points: str  # SVG polyline points "x,y x,y"
    dots: list[tuple[float, float, str]]  # (x, y, tooltip)


@dataclass(frozen=True)
class LineChart:
    title: str
    width: int
    height: int
    plot: tuple[int, int, int, int]  # x, y, w, h of the plot area
    series: list[Series]
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    y_label: str = ""
    note: str = ""
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css, name)


def bar_chart(title: str, items: Sequence[tuple[str, float]], *, vmax: float = 1.0, percent: bool = True,
              marker: float | None = None, marker_label: str = "", warn: float = 0.5, bad: float = 0.8) -> BarChart:
    """Horizontal bars of `items` (label, value) on 0..vmax; values above warn*vmax / bad*vmax change colour.
    `marker` draws a dashed reference line (e.g. the fair share 1/n)."""
    plot_x, plot_w = LABEL_W, WIDTH - LABEL_W - 80
    top = 8
    vmax = max(vmax, max((v for _, v in items), default=0.0), 1e-9)
    bars = []
    for i, (label, value) in enumerate(items):
        frac = max(0.0, value) / vmax
        level = "bad" if frac > bad else "warn" if frac > warn else "ok"
        bars.append(Bar(label, display.share(value) if percent else display.number(value),
                        top + i * ROW_H, round(frac * plot_w, 1), level))
    height = top + len(items) * ROW_H + 26
    ticks = [(round(plot_x + plot_w * f, 1), display.share(vmax * f, 0) if percent else display.number(vmax * f, 2))
             for f in (0, 0.25, 0.5, 0.75, 1.0)]
    marker_x = None if marker is None else round(plot_x + plot_w * min(1.0, marker / vmax), 1)
    return BarChart(title, bars, WIDTH, height, plot_x, plot_w, ticks, marker_x, marker_label)


def line_chart(title: str, series: Mapping[str, Sequence[tuple[int, float]]], *, y_label: str = "",
               note: str = "") -> LineChart:
    """Lines over time (x: Redis-clock ms), one per series name, y from 0 to the largest value (at least 1e-9)."""
    px, py, pw, ph = 56, 10, WIDTH - 56 - 16, 170
    points = [p for pts in series.values() for p in pts]
    if not points:
        return LineChart(title, WIDTH, ph + 50, (px, py, pw, ph), [], [], [], y_label, note)
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    span = max(t1 - t0, 1)
    ymax = max(max(v for _, v in points), 1e-9)

    def xy(t: int, v: float) -> tuple[float, float]:
        x = px + (pw * (t - t0) / span if t1 > t0 else pw / 2)
        return round(x, 1), round(py + ph - ph * v / ymax, 1)

    out = []
    for i, (name, pts) in enumerate(sorted(series.items())):
        css = f"s{i % SERIES_CLASSES}"
        coords = [xy(t, v) for t, v in sorted(pts)]
        dots = [(x, y, f"{name}: {display.number(v)} at {display.when(t)}") for (x, y), (t, v) in
                zip(coords, sorted(pts), strict=True)]
        out.append(Series(name, css, " ".join(f"{x},{y}" for x, y in coords), dots))
    x_ticks = [(xy(t, 0)[0], display.when(t)[5:16]) for t in ((t0, t1) if t1 > t0 else (t0,))]
    y_ticks = [(xy(t0, ymax * f)[1], display.number(ymax * f, 2)) for f in (0, 0.5, 1.0)]
    legend = [(s.css, s.name) for s in out]
    return LineChart(title, WIDTH, ph + 50, (px, py, pw, ph), out, x_ticks, y_ticks, y_label, note, legend)
