"""The pool chart (app.web.plan.pool_chart's columns) drawn as server-side SVG.

A slider tick swaps this SVG in with the numbers, so the chart is on screen in the same frame,
without chart code: no plotly.js on the tick path (its full redraw of the stacked bars was most of
a tick) and readable before the chart library has loaded. It draws the chart's columns, the same
ones its plotly figure (`PoolChart.figure`, what the tests check) is made of: the same bars,
hatching of estimated cells, dashed budget segments, binding outline and "binds" note. Hover: every
segment has a <title> (its row, GiB and source) and each rank's column one with the whole stack.
The legend is HTML, beside the SVG.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat

from markupsafe import Markup

WIDTH = 960  # viewBox units: one per CSS pixel on a desktop card; scales down with the card
HEIGHT, MARGIN_TOP, MARGIN_LEFT, MARGIN_RIGHT = 430, 64, 56, 16  # the figure's layout (PoolChart.figure)
HATCH_ID = "pool-hatch"
OUTLINE = ' stroke="#c0392b" stroke-width="3"'  # the binding rank's usable KV (pool_chart.BINDING_COLOUR)
ESTIMATED = frozenset({"estimated", "default"})  # sources whose cells are hatched


@dataclass(frozen=True, slots=True)
class Bar:
    """One stacked row of every rank's bar: its GiB and source per rank (`outline`: the ranks
    drawn outlined, the usable KV row's binding rank)."""

    name: str
    colour: str
    gib: list[float]
    sources: list[str]
    outline: list[bool] | None = None

    @property
    def hatched(self) -> list[bool]:
        return [s in ESTIMATED for s in self.sources]


def _text(value: object) -> str:
    """SVG text is escaped exactly once (a figure label, escaped for plotly, is unescaped first)."""
    return html.escape(html.unescape(str(value)))


def _nice_step(top: float, ticks: int = 5) -> float:
    raw = top / ticks if top > 0 else 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(float(m * power) for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


class _Frame:
    """Data → viewBox coordinates for n categories and a y range [0, top]."""

    def __init__(self, n: int, top: float, titled: bool, margin_bottom: int) -> None:
        # plotly's top margin held its legend; the legend is HTML here, so only a title needs room
        self.top = 32 if titled else 12
        self.height = HEIGHT - MARGIN_TOP + self.top
        self.left, self.right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
        self.bottom = self.height - margin_bottom
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
                   f'font-size="{size}">{label}</text>')
    mid = (frame.top + frame.bottom) / 2
    out.append(f'<text class="axis-title" transform="translate(14 {mid:.0f}) rotate(-90)" '
               f'text-anchor="middle">GiB per rank</text>')
    out.append(f'<text class="axis-title" x="{(frame.left + frame.right) / 2:.0f}" y="{frame.height - 6}" '
               f'text-anchor="middle">rank</text>')
    return out


#: The slots of a column's markup (`_column`): its label, its bars' x and its hover area's x; then,
#: from OUTLINES on, one per outlined row: its segment's stroke (the binding rank's outline, or none).
LABEL, X, HIT, OUTLINES = 0, 1, 2, 3
Pieces = list[str | int]


class _Row:
    """One bar row, read once per chart: its escaped name, its hatching pattern."""

    def __init__(self, bar: Bar, hatch: str, escape: Callable[[object], str]) -> None:
        self.name, self.colour, self.outline, self.sources = escape(bar.name), bar.colour, bar.outline, bar.sources
        self.escape = escape
        self.hatched = bar.hatched
        self.hatch = hatch if any(self.hatched) else ""  # its pattern's id, when a cell is hatched (`_hatches`)
        self.stroke = 0  # its stroke's slot, for an outlined row (`_columns`)

    def segment(self, i: int, value: float, width: str, y0: float, y1: float) -> Pieces:
        """One segment, with slots for its X and LABEL: one rect, filled with the row's colour or,
        hatched, with its colour's pattern (`_hatches`), with a slot for its stroke in an outlined
        row, its hover title inside."""
        fill = f"url(#{self.hatch})" if self.hatched[i] else self.colour
        head: Pieces = ['<rect class="seg" x="', X, f'" y="{y1:.1f}" width="{width}" height="{max(y0 - y1, 0.0):.1f}" '
                        f'fill="{fill}"']
        if self.outline is not None:
            head.append(self.stroke)
        return [*head, "><title>rank ", LABEL,
                f" · {self.name}: {value:.2f} GiB ({self.escape(self.sources[i])})</title></rect>"]


def _escaper() -> Callable[[object], str]:
    """`_text`, remembering its answers for one chart (a chart repeats few distinct labels)."""
    seen: dict[str, str] = {}

    def escape(value: object) -> str:
        text = str(value)
        found = seen.get(text)
        if found is None:
            found = seen[text] = _text(text)
        return found

    return escape


def _columns(frame: _Frame, rows: Sequence[_Row], labels: Sequence[str], values: Sequence[Sequence[float]],
             gap: float) -> list[str]:
    """Each rank's column. Ranks that draw the same stack (a TP group's ranks, typically) share
    one column's markup, a %-template filled with each one's place and label."""
    width = frame.band * (1 - gap)
    # what each rank's column draws besides its place and label, by rank (zip: column-wise, in C)
    outlines = [r.outline for r in rows if r.outline is not None]
    for slot, row in enumerate((r for r in rows if r.outline is not None), OUTLINES):
        row.stroke = slot
    strokes = zip(*[[OUTLINE if b else "" for b in outline] for outline in outlines], strict=True) if outlines \
        else repeat(())
    drawn = zip(values, zip(*[r.sources for r in rows], strict=True), zip(*[r.hatched for r in rows], strict=True),
                strict=True)
    columns: dict[tuple[object, ...], tuple[str, tuple[int, ...]]] = {}  # one chart's columns, by what each draws
    out = []
    for i, (label, key, stroke) in enumerate(zip(labels, drawn, strokes, strict=False)):
        column = columns.get(key)
        if column is None:
            column = columns[key] = _template(_column(frame, rows, i, values[i], width))
        template, order = column
        slots = (label, f"{frame.x(i) - width / 2:.1f}", f"{frame.left + frame.band * i:.1f}", *stroke)
        out.append(template % tuple([slots[k] for k in order]))
    return out


def _template(pieces: Pieces) -> tuple[str, tuple[int, ...]]:
    """A column's pieces as a %-format template (its literal text, % doubled) and its slots in order."""
    text = "".join(p.replace("%", "%%") if isinstance(p, str) else "%s" for p in pieces)
    return text, tuple(p for p in pieces if isinstance(p, int))


def _column(frame: _Frame, rows: Sequence[_Row], i: int, values: Sequence[float], width: float) -> Pieces:
    """Rank i's column, with slots for its LABEL, X (its bars) and HIT (its hover area's x)."""
    stack = " · ".join(f"{r.name} {value:.2f}" for r, value in zip(rows, values, strict=True))
    parts: Pieces = ['<g class="column" data-rank="', LABEL, '"><rect class="hit" x="', HIT,
                     f'" y="{frame.top}" width="{frame.band:.1f}" height="{frame.bottom - frame.top}">'
                     "<title>rank ", LABEL, f" (GiB): {stack}</title></rect>"]
    width_text = f"{width:.1f}"
    base = 0.0
    for row, value in zip(rows, values, strict=True):
        if value > 0:
            parts += row.segment(i, value, width_text, frame.y(base), frame.y(base + value))
        base += value
    parts.append("</g>")
    return parts


def _overlays(frame: _Frame, budgets: Sequence[tuple[int, float]], binds: Sequence[tuple[int, float]]) -> list[str]:
    out = []
    for i, gib in budgets:
        y = frame.y(gib)
        x0, x1 = frame.x(i - 0.48), frame.x(i + 0.48)
        out.append(f'<line class="budget" x1="{x0:.1f}" x2="{x1:.1f}" y1="{y:.1f}" y2="{y:.1f}"/>')
    for i, gib in binds:
        x, y = frame.x(i), frame.y(gib)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y:.1f}" y2="{y - 14:.1f}" stroke="#c0392b"/>'
                   f'<text class="note" x="{x:.1f}" y="{y - 18:.1f}" text-anchor="middle" fill="#c0392b">'
                   "binds</text>")
    return out


def _legend(rows: Sequence[_Row]) -> str:
    items = [f'<li><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" rx="2" '
             f'fill="{row.colour}"/></svg>{row.name}</li>' for row in rows]
    items.append('<li><svg width="18" height="12" aria-hidden="true"><line x1="0" x2="18" y1="6" y2="6" '
                 'stroke="#1f2933" stroke-width="2" stroke-dasharray="4 3"/></svg>requested budget</li>')
    return f'<ul class="chart-legend">{"".join(items)}</ul>'


def _hatches(rows: Sequence[_Row]) -> str:
    """A hatching pattern per bar row with a hatched cell: its colour under white stripes, so a
    hatched segment is one rect (was a coloured rect, a striped rect over it and a group)."""
    patterns = [f'<pattern id="{row.hatch}" width="7" height="7" patternUnits="userSpaceOnUse" '
                f'patternTransform="rotate(45)"><rect width="7" height="7" '
                f'fill="{row.colour}"/><rect width="2.1" height="7" '
                f'fill="rgba(255,255,255,0.6)"/></pattern>' for row in rows if row.hatch]
    return f"<defs>{''.join(patterns)}</defs>" if patterns else ""


def pool_svg(
    labels: Sequence[str], bars: Sequence[Bar], budgets: Sequence[tuple[int, float]],
    binds: Sequence[tuple[int, float]], title: str, bargap: float,
) -> Markup:
    """The HTML legend and the SVG of a pool chart (`PoolChart.svg`): ranks by their plain labels,
    bar rows bottom to top, (position, GiB) of each budget segment and each binding rank's note."""
    escape = _escaper()
    rows = [_Row(bar, f"{HATCH_ID}-{k}", escape) for k, bar in enumerate(bars)]
    texts = [html.escape(label) for label in labels]  # = _text(html.escape(label)): escaped once
    # per rank, every row's GiB in stacking order (their sum is the bar's top)
    values = list(zip(*[[float(v or 0.0) for v in bar.gib] for bar in bars], strict=True)) if rows else []
    top = max([*(sum(v) for v in values), *(gib for _, gib in budgets), 1e-9]) * 1.12  # room for "binds"
    many = len(texts) > 16
    frame = _Frame(len(texts), top, bool(title), 64 if many else 40)
    parts = [
        f'<svg class="pool-svg" viewBox="0 0 {WIDTH} {frame.height}" xmlns="http://www.w3.org/2000/svg" '
        f'font-size="12" aria-hidden="true">',
        _hatches(rows),
    ]
    if title:
        parts.append(f'<text class="chart-title" x="{frame.left}" y="16">{escape(title)}</text>')
    parts += _axes(frame, texts, many)
    parts += _columns(frame, rows, texts, values, bargap)
    parts += _overlays(frame, budgets, binds)
    parts.append("</svg>")
    return Markup(_legend(rows) + "".join(parts))
