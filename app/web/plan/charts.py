"""Plan results → plotly.js figure dicts (plain dicts: no plotly.graph_objects on the hot path).

Pool chart: one stacked bar per rank — weights, non-torch, CUDA graphs, activation, usable KV,
stranded KV — with the headroom (outside the requested budget) stacked above in light grey, a
step line at the requested budget, the binding rank outlined and annotated, and estimated
cells hatched. Past MAX_BARS ranks bars stop being readable, so the pool chart shows three
representative ranks (binding, median, largest KV) and a KV-per-rank histogram is added.
All byte values become GiB here, at the presentation edge.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from app.core.json_rows import first_binding
from app.web.plan.pool_svg import pool_svg

GIB = float(1024**3)
MAX_BARS = 64

Figure = dict[str, Any]


class PoolFigure(dict[str, Any]):
    """The pool chart's figure (a plain dict: JSON, tests) that also draws itself as SVG (`.svg`,
    what the page shows: no chart code on a slider tick; see pool_svg)."""

    @functools.cached_property
    def svg(self) -> Markup:
        return pool_svg(self)

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
CAVEAT_COLOUR = "#e0a100"
ESTIMATED = frozenset({"estimated", "default"})
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _source(rank: Mapping[str, Any], key: str) -> str:
    """Where a rank's row came from: measured, estimated, derived (default: estimated)."""
    sources = rank.get("sources") or {}
    return str(sources.get(key, "estimated"))


def _label(rank: Mapping[str, Any]) -> str:
    return html.escape(str(rank.get("rank")))


def _base_layout(height: int) -> dict[str, Any]:
    return {
        "height": height,
        "margin": {"l": 56, "r": 16, "t": 28, "b": 48},
        "font": {"family": FONT, "size": 12, "color": "#1f2933"},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "traceorder": "normal"},
    }


def _bar(name: str, x: list[str], gib: list[float], colour: str, sources: list[str]) -> dict[str, Any]:
    return {
        "type": "bar",
        "name": name,
        "x": x,
        "y": gib,
        "customdata": sources,
        "marker": {
            "color": colour,
            "pattern": {
                "shape": ["/" if s in ESTIMATED else "" for s in sources],
                "fillmode": "overlay",
                "fgcolor": "rgba(255,255,255,0.6)",
                "size": 7,
                "solidity": 0.3,
            },
        },
        "hovertemplate": f"{name}: %{{y:.2f}} GiB (%{{customdata}})<extra></extra>",
    }


def _kv_traces(
    ranks: Sequence[Mapping[str, Any]], x: list[str], is_binding: list[bool], graphs_in_budget: bool = True
) -> list[dict[str, Any]]:
    """Usable KV (binding rank outlined), stranded KV, and the headroom above the budget. Before
    vLLM 0.21 CUDA graphs are captured after the KV cache is sized, outside the budget
    (`graphs_in_budget` False): their segment sits above the dashed line, in the headroom, and the
    grey is what is left of the headroom beside them."""
    sources = [_source(r, "kv_bytes") for r in ranks]
    stranded = [_num(r.get("stranded_bytes")) for r in ranks]
    usable = [max(_num(r.get("kv_bytes")) - s, 0.0) for r, s in zip(ranks, stranded, strict=True)]
    kv = _bar("KV (usable)", x, [v / GIB for v in usable], KV_COLOUR, sources)
    kv["marker"]["line"] = {
        "color": [BINDING_COLOUR if b else "rgba(0,0,0,0)" for b in is_binding],
        "width": [3 if b else 0 for b in is_binding],
    }
    outside = [0.0 if graphs_in_budget else _num(r.get("cuda_graph_bytes")) for r in ranks]
    headroom = [max(0.0, _num(r.get("headroom_bytes")) - g) / GIB for r, g in zip(ranks, outside, strict=True)]
    traces = [kv, _bar("KV stranded", x, [s / GIB for s in stranded], STRANDED_COLOUR, sources)]
    if not graphs_in_budget:
        key, name, colour = GRAPHS_ROW
        traces.append(_bar(f"{name} (outside budget)", x, [g / GIB for g in outside], colour,
                           [_source(r, key) for r in ranks]))
    traces.append(_bar("headroom (outside budget)", x, headroom, HEADROOM_COLOUR, ["derived"] * len(ranks)))
    return traces


def _budget_shapes(ranks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A dashed segment across each bar at the requested budget (category index coordinates)."""
    return [
        {
            "type": "line", "xref": "x", "yref": "y", "x0": i - 0.48, "x1": i + 0.48,
            "y0": _num(r.get("requested_bytes")) / GIB, "y1": _num(r.get("requested_bytes")) / GIB,
            "line": {"color": "#1f2933", "width": 2, "dash": "dash"},
        }
        for i, r in enumerate(ranks)
        if r.get("requested_bytes") is not None
    ]


def _binding_annotations(
    ranks: Sequence[Mapping[str, Any]], x: list[str], is_binding: list[bool]
) -> list[dict[str, Any]]:
    return [
        {
            "x": label, "y": (_num(r.get("total_bytes")) or _num(r.get("requested_bytes"))) / GIB,
            "text": "binds", "showarrow": True, "arrowhead": 0, "ay": -18,
            "font": {"color": BINDING_COLOUR, "size": 12},
        }
        for label, r, b in zip(x, ranks, is_binding, strict=True)
        if b
    ]


def pool_figure(
    ranks: Sequence[Mapping[str, Any]], binding_rank: object, title: str = "", graphs_in_budget: bool = True
) -> Figure:
    """The stacked per-rank pool chart for the given ranks (at most MAX_BARS)."""
    x = [_label(r) for r in ranks]
    is_binding = [r.get("binding") is True or r.get("rank") == binding_rank for r in ranks]
    traces = [
        _bar(name, x, [_num(r.get(key)) / GIB for r in ranks], colour, [_source(r, key) for r in ranks])
        for key, name, colour in ROWS
        if graphs_in_budget or key != GRAPHS_ROW[0]
    ]
    traces += _kv_traces(ranks, x, is_binding, graphs_in_budget)
    # The budget is drawn as shapes; this empty trace only gives it a legend entry.
    traces.append({"type": "scatter", "mode": "lines", "name": "requested budget", "x": [None], "y": [None],
                   "line": {"color": "#1f2933", "width": 2, "dash": "dash"}, "hoverinfo": "skip"})
    many = len(ranks) > 16
    layout = _base_layout(430)
    layout.update(
        {
            "margin": {"l": 56, "r": 16, "t": 64, "b": 64 if many else 40},
            "barmode": "stack",
            "bargap": 0.12 if many else (0.3 if len(ranks) > 2 else 0.6),
            "hovermode": "x unified",
            "yaxis": {"title": {"text": "GiB per rank"}, "rangemode": "tozero", "gridcolor": "#eef0f3"},
            "xaxis": {"type": "category", "title": {"text": "rank"}, "tickfont": {"size": 10 if many else 12}},
            "shapes": _budget_shapes(ranks),
            "annotations": _binding_annotations(ranks, x, is_binding),
        }
    )
    if title:
        layout["title"] = {"text": title, "font": {"size": 13}, "x": 0, "xanchor": "left"}
    return PoolFigure(data=traces, layout=layout)


def representative_ranks(
    ranks: Sequence[Mapping[str, Any]], binding_rank: object
) -> list[Mapping[str, Any]]:
    """The binding rank, the median-KV rank and the largest-KV rank (distinct, in that order)."""
    kv = [_num(r.get("kv_bytes")) for r in ranks]
    by_kv = sorted(range(len(kv)), key=kv.__getitem__)  # positions, stably by KV
    binding = next((r for r in ranks if r.get("rank") == binding_rank), ranks[by_kv[0]])
    picks: list[Mapping[str, Any]] = []
    for rank in (binding, ranks[by_kv[len(by_kv) // 2]], ranks[by_kv[-1]]):
        if all(rank is not p for p in picks):
            picks.append(rank)
    return picks


def representatives_of(result: Mapping[str, Any], ranks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """`representative_ranks` as the core picked them from its sorted KV column
    (`rank_distribution.representative_indexes`); worked out here for a result without them."""
    dist = result.get("rank_distribution")
    picks = dist.get("representative_indexes") if isinstance(dist, Mapping) else None
    if isinstance(picks, list) and picks and all(type(i) is int and 0 <= i < len(ranks) for i in picks):
        return [ranks[i] for i in picks]
    return representative_ranks(ranks, result.get("binding_rank"))


def kv_histogram(ranks: Sequence[Mapping[str, Any]], binding_rank: object, max_bins: int = 40) -> Figure:
    """A histogram of KV GiB per rank (bins computed here), with the binding rank's bin marked."""
    kv_gib = [_num(r.get("kv_bytes")) / GIB for r in ranks]
    low, high = min(kv_gib), max(kv_gib)
    bins = max(1, min(max_bins, math.ceil(math.sqrt(len(kv_gib))))) if high > low else 1
    counts = [0] * bins
    for value in kv_gib:
        counts[min(int((value - low) / (high - low) * bins), bins - 1) if high > low else 0] += 1
    binding_kv = next(
        (_num(r.get("kv_bytes")) / GIB for r in ranks if r.get("rank") == binding_rank), low
    )
    return _histogram_figure(low, high, counts, binding_kv, binding_rank)


def kv_histogram_of(result: Mapping[str, Any]) -> Figure | None:
    """The histogram the result carries over every rank (`rank_distribution.kv_bytes_histogram`,
    the grouped form's only complete view), or None for a result without one."""
    dist = result.get("rank_distribution")
    hist = dist.get("kv_bytes_histogram") if isinstance(dist, Mapping) else None
    if not isinstance(hist, Mapping) or not hist.get("counts"):
        return None
    binding = first_binding(result.get("ranks") or [])
    low, high = _num(hist.get("low_bytes")) / GIB, _num(hist.get("high_bytes")) / GIB
    binding_kv = _num(binding.get("kv_bytes")) / GIB if binding else low
    return _histogram_figure(low, high, [int(c) for c in hist["counts"]], binding_kv, result.get("binding_rank"))


def _histogram_figure(low: float, high: float, counts: list[int], binding_kv: float, binding_rank: object) -> Figure:
    bins = len(counts)
    width = (high - low) / bins if high > low else max(0.25, high * 0.01)
    binding_bin = min(int((binding_kv - low) / width), bins - 1) if high > low else 0
    centres = [low + width * (i + 0.5) for i in range(bins)] if high > low else [low]
    colours = [BINDING_COLOUR if i == binding_bin else KV_COLOUR for i in range(bins)]
    layout = _base_layout(300)
    layout.update(
        {
            "bargap": 0.05,
            "showlegend": False,
            "xaxis": {"title": {"text": "KV GiB on the rank"}, "gridcolor": "#eef0f3"},
            "yaxis": {"title": {"text": "ranks"}, "rangemode": "tozero", "gridcolor": "#eef0f3"},
            "annotations": [
                {
                    "x": binding_kv,
                    "y": counts[binding_bin],
                    "text": html.escape(f"binding rank {binding_rank}: {binding_kv:.2f} GiB"),
                    "showarrow": True,
                    "arrowhead": 0,
                    "ay": -24,
                    "font": {"color": BINDING_COLOUR},
                }
            ],
        }
    )
    trace = {
        "type": "bar",
        "x": centres,
        "y": counts,
        "width": [width * 0.95] * bins,
        "marker": {"color": colours},
        "hovertemplate": "%{y} ranks near %{x:.2f} GiB<extra></extra>",
    }
    return {"data": [trace], "layout": layout}


def _lever_label(lever: Mapping[str, Any], base_starts: bool) -> str:
    text = f"{lever.get('knob')}: {lever.get('change')}"
    if lever.get("will_start") is False and base_starts:
        text += " (will not start)"
    elif lever.get("will_start") is True and not base_starts:
        text += " (starts)"
    elif lever.get("caveats"):
        text += " (see caveat)"
    return html.escape(text)


def _lever_colour(lever: Mapping[str, Any], base_starts: bool) -> str:
    if (lever.get("will_start") is False and base_starts) or _num(lever.get("tokens_gained")) < 0:
        return BINDING_COLOUR
    return CAVEAT_COLOUR if lever.get("caveats") else KV_COLOUR


def levers_figure(levers: Sequence[Mapping[str, Any]], base_starts: bool = True) -> Figure:
    """Tokens gained by each knob, as horizontal bars, biggest gain on top; a knob that would stop
    the plan from starting is red and says so, one that brings a new warning is amber (and when
    the plan does not start now, a knob that makes it start says that)."""
    ordered = sorted(levers, key=lambda lever: _num(lever.get("tokens_gained")))
    labels = [_lever_label(lever, base_starts) for lever in ordered]
    gains = [_num(lever.get("tokens_gained")) for lever in ordered]
    notes = [html.escape("; ".join(lever.get("caveats") or []) or "no new warnings") for lever in ordered]
    layout = _base_layout(max(160, 34 * len(ordered) + 70))
    layout.update(
        {
            "showlegend": False,
            "margin": {"l": 260, "r": 24, "t": 12, "b": 40},
            "xaxis": {"title": {"text": "tokens gained"}, "zeroline": True, "gridcolor": "#eef0f3"},
            "yaxis": {"type": "category", "automargin": True},
        }
    )
    trace = {
        "type": "bar",
        "orientation": "h",
        "x": gains,
        "y": labels,
        "customdata": notes,
        "marker": {"color": [_lever_colour(lever, base_starts) for lever in ordered]},
        "hovertemplate": "%{x:,} tokens<br>%{customdata}<extra></extra>",
    }
    return {"data": [trace], "layout": layout}


def notable_ranks(result: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The ranks a plan too large for one bar each shows (`representative_ranks`); None: every rank."""
    ranks: Sequence[Mapping[str, Any]] = result.get("ranks") or []
    return representatives_of(result, ranks) if len(ranks) > MAX_BARS else None


def plan_charts(result: Mapping[str, Any], notable: list[Mapping[str, Any]] | None = None) -> dict[str, Figure]:
    """Every chart of the plan page, keyed by the chart element's name (`notable`: the plan's
    `notable_ranks`, when the caller has them already)."""
    ranks: Sequence[Mapping[str, Any]] = result.get("ranks") or []  # rows made when read: no list() of them
    binding = result.get("binding_rank")
    inside = result.get("cuda_graphs_in_budget") is not False
    charts: dict[str, Figure] = {}
    if ranks:
        if len(ranks) <= MAX_BARS:
            charts["pool"] = pool_figure(ranks, binding, graphs_in_budget=inside)
        else:
            title = "Binding, median and largest-KV ranks"
            picks = notable if notable is not None else representatives_of(result, ranks)
            charts["pool"] = pool_figure(picks, binding, title, inside)
            charts["dist"] = kv_histogram_of(result) or kv_histogram(ranks, binding)
    levers = list(result.get("levers") or [])
    if levers:
        charts["levers"] = levers_figure(levers, result.get("will_start") is not False)
    return charts
