"""The pool chart's figure (charts.pool_figure) drawn as server-side SVG.

A slider tick swaps this SVG in with the numbers, so the chart is on screen in the same frame,
without chart code: no plotly.js on the tick path (its full redraw of the stacked bars was most of
a tick) and readable before the chart library has loaded. The figure dict stays the one source:
the same bars, hatching of estimated cells, dashed budget segments, binding outline and "binds"
note, read from the figure the tests check. Hover: every segment has a <title> (its row, GiB and
source) and each rank's column one with the whole stack. The legend is HTML, beside the SVG.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from markupsafe import Markup

WIDTH = 960  # viewBox units: one per CSS pixel on a desktop card; scales down with the card
HATCH_ID = "pool-hatch"


def _text(value: object) -> str:
    """Figure labels are escaped for plotly's HTML-ish text; SVG text is escaped exactly once."""
    return html.escape(html.unescape(str(value)))


def _nice_step(top: float, ticks: int = 5) -> float:
    raw = top / ticks if top > 0 else 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(float(m * power) for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def _bars(figure: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in figure["data"] if t.get("type") == "bar"]


def _stack_tops(bars: Sequence[Mapping[str, Any]], n: int) -> list[float]:
    return [sum(float(t["y"][i] or 0.0) for t in bars) for i in range(n)]


class _Frame:
    """Data → viewBox coordinates for n categories and a y range [0, top]."""

    def __init__(self, layout: Mapping[str, Any], n: int, top: float, titled: bool) -> None:
        margin = layout.get("margin") or {}
        # plotly's top margin held its legend; the legend is HTML here, so only a title needs room
        self.top = 32 if titled else 12
        self.height = int(layout.get("height", 430)) - int(margin.get("t", 64)) + self.top
        self.left, self.right = int(margin.get("l", 56)), WIDTH - int(margin.get("r", 16))
        self.bottom = self.height - int(margin.get("b", 48))
        self.n, self.y_top = max(n, 1), top
        self.band = (self.right - self.left) / self.n

    def x(self, category: float) -> float:
        return self.left + self.band * (category + 0.5)

    def y(self, value: float) -> float:
        return self.bottom - (self.bottom - self.top) * (value / self.y_top)


def _axes(frame: _Frame, labels: Sequence[str], small: bool) -> list[str]:
    step = _nice_step(frame.y_top)
    out = []
    for k in range(int(frame.y_top / step + 1e-9) + 1):
        y = frame.y(k * step)
        out.append(f'<line class="grid" x1="{frame.left}" x2="{frame.right}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">{k * step:g}</text>')
    size = 10 if small else 12
    for i, label in enumerate(labels):
        out.append(f'<text class="tick" x="{frame.x(i):.1f}" y="{frame.bottom + 16}" text-anchor="middle" '
                   f'font-size="{size}">{_text(label)}</text>')
    mid = (frame.top + frame.bottom) / 2
    out.append(f'<text class="axis-title" transform="translate(14 {mid:.0f}) rotate(-90)" '
               f'text-anchor="middle">GiB per rank</text>')
    out.append(f'<text class="axis-title" x="{(frame.left + frame.right) / 2:.0f}" y="{frame.height - 6}" '
               f'text-anchor="middle">rank</text>')
    return out


#: The slots of a column's markup (`_column`): its label, its bars' x and its hover area's x.
LABEL, X, HIT = 0, 1, 2
Pieces = list[str | int]


class _Trace:
    """One bar trace, read once per figure: its escaped name and the per-rank parts of its segments."""

    def __init__(self, trace: Mapping[str, Any], escape: Callable[[object], str]) -> None:
        marker = trace.get("marker") or {}
        line = marker.get("line") or {}
        widths, colours = line.get("width"), line.get("color")
        self.strokes = (widths, colours) if isinstance(widths, list) and isinstance(colours, list) else None
        shapes = (marker.get("pattern") or {}).get("shape")
        self.shapes = shapes if isinstance(shapes, list) else None
        self.name, self.y, self.colour = escape(trace["name"]), trace["y"], marker.get("color")
        self.sources = trace.get("customdata")
        self.escape = escape
        self.hatch = ""  # its hatching pattern's id, when a segment is hatched (`_hatches`)

    def drawn(self, i: int, value: float) -> tuple[object, ...]:
        """Everything rank i's segment shows besides its place and label."""
        return (value, self.sources[i] if self.sources else "", self.strokes and (self.strokes[0][i],
                self.strokes[1][i]), self.shapes and self.shapes[i])

    def segment(self, i: int, value: float, width: str, y0: float, y1: float) -> Pieces:
        """One segment, with slots for its X and LABEL: one rect, filled with the trace's colour or,
        hatched, with its colour's pattern (`_hatches`), outlined where the figure outlines it, its
        hover title inside."""
        source = self.escape(self.sources[i]) if self.sources else ""
        stroke = ""
        if self.strokes is not None and self.strokes[0][i]:
            stroke = f' stroke="{self.strokes[1][i]}" stroke-width="{self.strokes[0][i]}"'
        fill = f"url(#{self.hatch})" if self.shapes and self.shapes[i] else self.colour
        return ['<rect class="seg" x="', X, f'" y="{y1:.1f}" width="{width}" height="{max(y0 - y1, 0.0):.1f}" '
                f'fill="{fill}"{stroke}><title>rank ', LABEL,
                f" · {self.name}: {value:.2f} GiB ({source})</title></rect>"]


def _escaper() -> Callable[[object], str]:
    """`_text`, remembering its answers for one figure (a figure repeats few distinct labels)."""
    seen: dict[str, str] = {}

    def escape(value: object) -> str:
        text = str(value)
        found = seen.get(text)
        if found is None:
            found = seen[text] = _text(text)
        return found

    return escape


def _columns(frame: _Frame, bars: Sequence[Mapping[str, Any]], labels: Sequence[str], gap: float) -> list[str]:
    """Each rank's column. Ranks that draw the same stack (a TP group's ranks, typically) share
    one column's pieces, filled with each one's place and label."""
    width = frame.band * (1 - gap)
    escape = _escaper()
    traces = [_Trace(t, escape) for t in bars]
    for k, trace in enumerate(traces):
        trace.hatch = f"{HATCH_ID}-{k}"
    drawn: dict[tuple[object, ...], Pieces] = {}  # one figure's columns, by what each draws
    out = []
    for i, raw in enumerate(labels):
        values = [float(t.y[i] or 0.0) for t in traces]
        key = tuple(t.drawn(i, value) for t, value in zip(traces, values, strict=True))
        pieces = drawn.get(key)
        if pieces is None:
            pieces = drawn[key] = _column(frame, traces, i, values, width)
        slots = (escape(raw), f"{frame.x(i) - width / 2:.1f}", f"{frame.left + frame.band * i:.1f}")
        out.append("".join([slots[p] if isinstance(p, int) else p for p in pieces]))
    return out


def _column(frame: _Frame, traces: Sequence[_Trace], i: int, values: Sequence[float], width: float) -> Pieces:
    """Rank i's column, with slots for its LABEL, X (its bars) and HIT (its hover area's x)."""
    stack = " · ".join(f"{t.name} {value:.2f}" for t, value in zip(traces, values, strict=True))
    parts: Pieces = ['<g class="column" data-rank="', LABEL, '"><rect class="hit" x="', HIT,
                     f'" y="{frame.top}" width="{frame.band:.1f}" height="{frame.bottom - frame.top}">'
                     "<title>rank ", LABEL, f" (GiB): {stack}</title></rect>"]
    width_text = f"{width:.1f}"
    base = 0.0
    for trace, value in zip(traces, values, strict=True):
        if value > 0:
            parts += trace.segment(i, value, width_text, frame.y(base), frame.y(base + value))
        base += value
    parts.append("</g>")
    merged: Pieces = []  # adjacent literal pieces joined: fewer to walk per column
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    return merged


def _overlays(frame: _Frame, layout: Mapping[str, Any], labels: Sequence[str]) -> list[str]:
    out = []
    for shape in layout.get("shapes") or []:
        y = frame.y(float(shape["y0"]))
        x0, x1 = frame.x(float(shape["x0"])), frame.x(float(shape["x1"]))
        out.append(f'<line class="budget" x1="{x0:.1f}" x2="{x1:.1f}" y1="{y:.1f}" y2="{y:.1f}"/>')
    for note in layout.get("annotations") or []:
        label = str(note["x"])
        i = labels.index(label) if label in labels else 0
        x, y = frame.x(i), frame.y(float(note["y"]))
        colour = (note.get("font") or {}).get("color", "#1f2933")
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y:.1f}" y2="{y - 14:.1f}" stroke="{colour}"/>'
                   f'<text class="note" x="{x:.1f}" y="{y - 18:.1f}" text-anchor="middle" fill="{colour}">'
                   f"{_text(note['text'])}</text>")
    return out


def _legend(figure: Mapping[str, Any]) -> str:
    items = []
    for trace in figure["data"]:
        if trace.get("type") == "bar":
            swatch = f'<svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" rx="2" ' \
                     f'fill="{trace["marker"]["color"]}"/></svg>'
        else:
            colour = (trace.get("line") or {}).get("color", "#1f2933")
            swatch = f'<svg width="18" height="12" aria-hidden="true"><line x1="0" x2="18" y1="6" y2="6" ' \
                     f'stroke="{colour}" stroke-width="2" stroke-dasharray="4 3"/></svg>'
        items.append(f"<li>{swatch}{_text(trace.get('name', ''))}</li>")
    return f'<ul class="chart-legend">{"".join(items)}</ul>'


def _hatches(bars: Sequence[Mapping[str, Any]]) -> str:
    """A hatching pattern per bar trace with a hatched segment: its colour under white stripes, so a
    hatched segment is one rect (was a coloured rect, a striped rect over it and a group)."""
    patterns = []
    for k, trace in enumerate(bars):
        shapes = ((trace.get("marker") or {}).get("pattern") or {}).get("shape")
        if isinstance(shapes, list) and any(shapes):
            patterns.append(f'<pattern id="{HATCH_ID}-{k}" width="7" height="7" patternUnits="userSpaceOnUse" '
                            f'patternTransform="rotate(45)"><rect width="7" height="7" '
                            f'fill="{trace["marker"]["color"]}"/><rect width="2.1" height="7" '
                            f'fill="rgba(255,255,255,0.6)"/></pattern>')
    return f"<defs>{''.join(patterns)}</defs>" if patterns else ""


def pool_svg(figure: Mapping[str, Any]) -> Markup:
    """The HTML legend and the SVG of a pool figure (charts.pool_figure's dict)."""
    layout = figure["layout"]
    bars = _bars(figure)
    labels = [str(x) for x in (bars[0]["x"] if bars else [])]
    shape_tops = [float(s["y0"]) for s in layout.get("shapes") or []]
    top = max([*_stack_tops(bars, len(labels)), *shape_tops, 1e-9]) * 1.12  # room for the "binds" note
    title = (layout.get("title") or {}).get("text")
    frame = _Frame(layout, len(labels), top, bool(title))
    small = (layout.get("xaxis") or {}).get("tickfont", {}).get("size", 12) < 12
    parts = [
        f'<svg class="pool-svg" viewBox="0 0 {WIDTH} {frame.height}" xmlns="http://www.w3.org/2000/svg" '
        f'font-size="12" aria-hidden="true">',
        _hatches(bars),
    ]
    if title:
        parts.append(f'<text class="chart-title" x="{frame.left}" y="16">{_text(title)}</text>')
    parts += _axes(frame, labels, small)
    parts += _columns(frame, bars, labels, float(layout.get("bargap", 0.3)))
    parts += _overlays(frame, layout, labels)
    parts.append("</svg>")
    return Markup(_legend(figure) + "".join(parts))
