"""Plan results → the plan page's charts: plotly.js figure dicts (plain dicts: no
plotly.graph_objects on the hot path) and the pool chart (app.web.plan.pool_chart), drawn as SVG.

Pool chart: one stacked bar per rank — weights, non-torch, CUDA graphs, activation, usable KV,
stranded KV — with the headroom (outside the requested budget) stacked above in light grey, a
step line at the requested budget, the binding rank outlined and annotated, and estimated
cells hatched. Past MAX_BARS ranks bars stop being readable, so the pool chart shows three
representative ranks (binding, median, largest KV) and a KV-per-rank histogram is added.
All byte values become GiB here, at the presentation edge.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from app.core.json_rows import first_binding

# The pool chart lives in pool_chart; its names stay importable from here (the other wings' charts
# share FONT and GIB).
from app.web.plan.pool_chart import BINDING_COLOUR as BINDING_COLOUR
from app.web.plan.pool_chart import FONT as FONT
from app.web.plan.pool_chart import GIB as GIB
from app.web.plan.pool_chart import KV_COLOUR as KV_COLOUR
from app.web.plan.pool_chart import PoolChart as PoolChart
from app.web.plan.pool_chart import base_layout
from app.web.plan.pool_chart import num as _num
from app.web.plan.pool_chart import pool_chart as pool_chart

MAX_BARS = 64
CAVEAT_COLOUR = "#e0a100"

Figure = dict[str, Any]
#: A chart of the page: a plotly figure dict, or the pool chart (drawn as SVG; `.figure` its dict).
Chart = Figure | PoolChart


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
    layout = base_layout(300)
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
    layout = base_layout(max(160, 34 * len(ordered) + 70))
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


def plan_charts(result: Mapping[str, Any], notable: list[Mapping[str, Any]] | None = None) -> dict[str, Chart]:
    """Every chart of the plan page, keyed by the chart element's name: plotly figure dicts, and
    the pool chart's `PoolChart` (the page draws it as SVG; its `.figure` is the plotly dict)
    (`notable`: the plan's `notable_ranks`, when the caller has them already)."""
    ranks: Sequence[Mapping[str, Any]] = result.get("ranks") or []  # rows made when read: no list() of them
    binding = result.get("binding_rank")
    inside = result.get("cuda_graphs_in_budget") is not False
    charts: dict[str, Chart] = {}
    if ranks:
        if len(ranks) <= MAX_BARS:
            charts["pool"] = pool_chart(ranks, binding, graphs_in_budget=inside)
        else:
            title = "Binding, median and largest-KV ranks"
            picks = notable if notable is not None else representatives_of(result, ranks)
            charts["pool"] = pool_chart(picks, binding, title, inside)
            charts["dist"] = kv_histogram_of(result) or kv_histogram(ranks, binding)
    levers = list(result.get("levers") or [])
    if levers:
        charts["levers"] = levers_figure(levers, result.get("will_start") is not False)
    return charts
