"""The pool chart's data, read once from the ranks: one bar row per ledger row, in stacking order.

A `PoolChart` holds, per bar row, its name, colour, GiB per rank, sources and hatched cells; the
dashed budget segments; the binding ranks' notes. It is drawn two ways from the same columns: as the
page's SVG (`svg`, app.web.plan.pool_svg: what a slider tick sends) and as a plotly.js figure dict
(`figure`: what the tests and any JSON consumer read). A tick draws the SVG straight from the
columns; before, it built the plotly-shaped dict (lists of dicts of lists) only to read it back.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from app.web.plan.pool_svg import Bar, pool_svg

GIB = float(1024**3)

# (result key, legend label, colour), bottom to top
ROWS: tuple[tuple[str, str, str], ...] = (
    ("weights_bytes", "weights", "#4c78a8"),
    ("non_torch_bytes", "non-torch", "#9d755d"),
    ("cuda_graph_bytes", "CUDA graphs", "#b279a2"),
    ("activation_bytes", "activation", "#f58518"),
)
GRAPHS_ROW = ROWS[2]
KV_COLOUR = "#54a24b"
STRANDED_COLOUR = "#b8dcb0"
HEADROOM_COLOUR = "#e4e6ea"
BINDING_COLOUR = "#c0392b"
BUDGET_COLOUR = "#1f2933"
NO_OUTLINE = "rgba(0,0,0,0)"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"


def num(value: object) -> float:
    """A byte count (or GiB) as a float; 0.0 for anything else (None, a bool, text)."""
    kind = type(value)
    if kind is int or kind is float:  # the rows' values: no isinstance walk
        return float(value)  # type: ignore[arg-type]
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def base_layout(height: int) -> dict[str, Any]:
    return {
        "height": height,
        "margin": {"l": 56, "r": 16, "t": 28, "b": 48},
        "font": {"family": FONT, "size": 12, "color": BUDGET_COLOUR},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "traceorder": "normal"},
    }


class PoolChart:
    """The pool chart of some ranks (plain labels; `budgets`: (position, GiB) of each rank with a
    requested budget; `binds`: (position, GiB) of each binding rank's note)."""

    def __init__(self, labels: list[str], bars: list[Bar], budgets: list[tuple[int, float]],
                 binds: list[tuple[int, float]], title: str = "") -> None:
        self.labels, self.bars, self.budgets, self.binds, self.title = labels, bars, budgets, binds, title

    @property
    def many(self) -> bool:
        return len(self.labels) > 16

    @property
    def bargap(self) -> float:
        return 0.12 if self.many else (0.3 if len(self.labels) > 2 else 0.6)

    @functools.cached_property
    def svg(self) -> Markup:
        """The HTML legend and the SVG the page shows (drawn when the template first reads it)."""
        return pool_svg(self.labels, self.bars, self.budgets, self.binds, self.title, self.bargap)

    @property
    def figure(self) -> dict[str, Any]:
        """The same chart as a plotly.js figure dict (plain JSON)."""
        x = [html.escape(label) for label in self.labels]
        traces = [_trace(bar, x) for bar in self.bars]
        # The budget is drawn as shapes; this empty trace only gives it a legend entry.
        traces.append({"type": "scatter", "mode": "lines", "name": "requested budget", "x": [None], "y": [None],
                       "line": {"color": BUDGET_COLOUR, "width": 2, "dash": "dash"}, "hoverinfo": "skip"})
        many = self.many
        layout = base_layout(430)
        layout.update(
            {
                "margin": {"l": 56, "r": 16, "t": 64, "b": 64 if many else 40},
                "barmode": "stack",
                "bargap": self.bargap,
                "hovermode": "x unified",
                "yaxis": {"title": {"text": "GiB per rank"}, "rangemode": "tozero", "gridcolor": "#eef0f3"},
                "xaxis": {"type": "category", "title": {"text": "rank"}, "tickfont": {"size": 10 if many else 12}},
                "shapes": [{"type": "line", "xref": "x", "yref": "y", "x0": i - 0.48, "x1": i + 0.48, "y0": gib,
                            "y1": gib, "line": {"color": BUDGET_COLOUR, "width": 2, "dash": "dash"}}
                           for i, gib in self.budgets],
                "annotations": [{"x": x[i], "y": gib, "text": "binds", "showarrow": True, "arrowhead": 0, "ay": -18,
                                 "font": {"color": BINDING_COLOUR, "size": 12}} for i, gib in self.binds],
            }
        )
        if self.title:
            layout["title"] = {"text": self.title, "font": {"size": 13}, "x": 0, "xanchor": "left"}
        return {"data": traces, "layout": layout}


def _trace(bar: Bar, x: list[str]) -> dict[str, Any]:
    """The plotly.js bar trace of a row (categories `x`, escaped labels)."""
    marker: dict[str, Any] = {
        "color": bar.colour,
        "pattern": {"shape": ["/" if h else "" for h in bar.hatched], "fillmode": "overlay",
                    "fgcolor": "rgba(255,255,255,0.6)", "size": 7, "solidity": 0.3},
    }
    out = {"type": "bar", "name": bar.name, "x": x, "y": bar.gib, "customdata": bar.sources,
           "marker": marker, "hovertemplate": f"{bar.name}: %{{y:.2f}} GiB (%{{customdata}})<extra></extra>"}
    if bar.outline is not None:
        marker["line"] = {"color": [BINDING_COLOUR if b else NO_OUTLINE for b in bar.outline],
                          "width": [3 if b else 0 for b in bar.outline]}
    return out


def _sources(ranks: Sequence[Mapping[str, Any]], key: str) -> list[str]:
    """Where each rank's row came from: measured, estimated, derived (default: estimated)."""
    return [str((r.get("sources") or {}).get(key, "estimated")) for r in ranks]


def pool_chart(
    ranks: Sequence[Mapping[str, Any]], binding_rank: object, title: str = "", graphs_in_budget: bool = True
) -> PoolChart:
    """The stacked per-rank pool chart of the given ranks (at most MAX_BARS): weights, non-torch,
    CUDA graphs, activation, usable KV (binding rank outlined), stranded KV, and the headroom above
    the budget. Before vLLM 0.21 CUDA graphs are captured after the KV cache is sized, outside the
    budget (`graphs_in_budget` False): their row sits above the dashed line, in the headroom, and
    the grey is what is left of the headroom beside them."""
    labels = [str(r.get("rank")) for r in ranks]
    is_binding = [r.get("binding") is True or r.get("rank") == binding_rank for r in ranks]
    bars = [Bar(name, colour, [num(r.get(key)) / GIB for r in ranks], _sources(ranks, key))
            for key, name, colour in ROWS if graphs_in_budget or key != GRAPHS_ROW[0]]
    kv_sources = _sources(ranks, "kv_bytes")
    stranded = [num(r.get("stranded_bytes")) for r in ranks]
    usable = [max(num(r.get("kv_bytes")) - s, 0.0) for r, s in zip(ranks, stranded, strict=True)]
    bars.append(Bar("KV (usable)", KV_COLOUR, [v / GIB for v in usable], kv_sources, is_binding))
    bars.append(Bar("KV stranded", STRANDED_COLOUR, [s / GIB for s in stranded], kv_sources))
    outside = [0.0 if graphs_in_budget else num(r.get("cuda_graph_bytes")) for r in ranks]
    if not graphs_in_budget:
        key, name, colour = GRAPHS_ROW
        bars.append(Bar(f"{name} (outside budget)", colour, [g / GIB for g in outside], _sources(ranks, key)))
    headroom = [max(0.0, num(r.get("headroom_bytes")) - g) / GIB for r, g in zip(ranks, outside, strict=True)]
    bars.append(Bar("headroom (outside budget)", HEADROOM_COLOUR, headroom, ["derived"] * len(ranks)))
    budgets = [(i, num(r.get("requested_bytes")) / GIB) for i, r in enumerate(ranks)
               if r.get("requested_bytes") is not None]
    binds = [(labels.index(label), (num(r.get("total_bytes")) or num(r.get("requested_bytes"))) / GIB)
             for label, r, b in zip(labels, ranks, is_binding, strict=True) if b]
    return PoolChart(labels, bars, budgets, binds, title)
