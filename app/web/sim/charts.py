"""Simulation results → the job page: plotly figure dicts, the level table and the headline figures.

Four charts against concurrency (throughput, KV usage, prefix hit rate, preemptions), each with
the ramp as given and the same ramp without a shared prefix, the throughput peak and the
recommended level marked by vertical lines with labels. Plain dicts, as in `app.web.plan.charts`; no
arithmetic on the simulation's numbers beyond picking, labelling and one ratio for display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.web.plan.charts import FONT

Figure = dict[str, Any]
JSON = dict[str, Any]

WITH_COLOUR = "#3451b2"
WITHOUT_COLOUR = "#f58518"
PEAK_COLOUR = "#c0392b"
RECOMMENDED_COLOUR = "#2f7d32"

#: (chart name, level key, axis title, y tick format)
CHARTS: tuple[tuple[str, str, str, str], ...] = (
    ("throughput", "throughput_tokens_per_s", "output tokens/s", ",.0f"),
    ("kv_usage", "kv_usage", "KV usage (mean share of the pool)", ".0%"),
    ("hit_rate", "prefix_hit_rate", "prefix hit rate", ".0%"),
    ("preemptions", "preemptions", "preemptions", ",d"),
)
BASIS_WORDS = {
    "rule": "a step below the peak: the highest level below it with no preemptions (the peak sits at the "
            "cliff's edge)",
    "ramp_top": "throughput still rises at the ramp's top level, so the cliff lies beyond it: the highest "
                "level tried without preemptions (add higher levels to find the peak)",
    # results saved before stop 28, under the rule that allowed the peak itself
    "fallback": "no level met both conditions, so this is the highest preemption-free level below the peak",
    "none": "no level below the peak runs without preemptions: no level is recommended (try lower levels "
            "or a larger pool)",
}


def _marker_line(x: object, colour: str, dash: str) -> dict[str, Any]:
    return {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
            "line": {"color": colour, "width": 2, "dash": dash}}


def _marker_label(x: object, text: str, colour: str, xanchor: str) -> dict[str, Any]:
    return {"x": x, "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom", "xanchor": xanchor,
            "text": text, "showarrow": False, "font": {"color": colour, "size": 12}}


def _markers(peak: object, recommended: object) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    shapes = [_marker_line(peak, PEAK_COLOUR, "dash")]
    if recommended is None:
        return shapes, [_marker_label(peak, f"peak {peak}", PEAK_COLOUR, "center")]
    if recommended == peak:
        return shapes, [_marker_label(peak, f"peak = recommended {peak}", PEAK_COLOUR, "center")]
    shapes.append(_marker_line(recommended, RECOMMENDED_COLOUR, "dot"))
    return shapes, [_marker_label(peak, f"peak {peak}", PEAK_COLOUR, "left"),
                    _marker_label(recommended, f"recommended {recommended}", RECOMMENDED_COLOUR, "right")]


def _trace(name: str, levels: Sequence[Mapping[str, Any]], key: str, colour: str, dash: str) -> dict[str, Any]:
    return {"type": "scatter", "mode": "lines+markers", "name": name,
            "x": [level["concurrency"] for level in levels], "y": [level[key] for level in levels],
            "line": {"color": colour, "width": 2, "dash": dash}, "marker": {"size": 6}}


def level_figure(result: Mapping[str, Any], key: str, title: str, tickformat: str) -> Figure:
    """One metric against concurrency, with and without the shared prefix, peak and recommendation marked."""
    levels = result["levels"]
    plain = result["without_prefix"]["levels"]
    traces = [_trace("with shared prefix", levels, key, WITH_COLOUR, "solid")]
    if plain != levels:
        traces.append(_trace("without shared prefix", plain, key, WITHOUT_COLOUR, "dash"))
    shapes, annotations = _markers(result["peak_concurrency"], result["recommended_concurrency"])
    yaxis: dict[str, Any] = {"title": {"text": title}, "rangemode": "tozero", "gridcolor": "#eef0f3",
                             "tickformat": tickformat}
    if tickformat == ".0%":
        yaxis["range"] = [0, 1.05]
    return {
        "data": traces,
        "layout": {
            "height": 320,
            "margin": {"l": 64, "r": 16, "t": 36, "b": 92},
            "font": {"family": FONT, "size": 12, "color": "#1f2933"},
            "paper_bgcolor": "rgba(0,0,0,0)",
            "plot_bgcolor": "rgba(0,0,0,0)",
            "hovermode": "x unified",
            "showlegend": len(traces) > 1,
            "legend": {"orientation": "h", "y": -0.3, "yanchor": "top", "x": 0},
            "xaxis": {"title": {"text": "concurrency (requests in flight)"}, "rangemode": "tozero",
                      "gridcolor": "#eef0f3"},
            "yaxis": yaxis,
            "shapes": shapes,
            "annotations": annotations,
        },
    }


def figures(result: Mapping[str, Any]) -> dict[str, Figure]:
    return {name: level_figure(result, key, title, fmt) for name, key, title, fmt in CHARTS}


def rows(result: Mapping[str, Any]) -> list[JSON]:
    """Every level for the table, with the same level of the no-prefix ramp next to it."""
    peak, recommended = result["peak_concurrency"], result["recommended_concurrency"]
    plain = {level["concurrency"]: level for level in result["without_prefix"]["levels"]}
    return [
        {**level, "plain": plain.get(level["concurrency"], {}),
         "is_peak": level["concurrency"] == peak, "is_recommended": level["concurrency"] == recommended}
        for level in result["levels"]
    ]


def summary(result: Mapping[str, Any]) -> JSON:
    """The headline figures: peak, recommendation (and why), what prefix reuse is worth."""
    plain = result["without_prefix"]
    basis = str(result.get("recommendation_basis") or "rule")
    return {
        "peak_concurrency": result["peak_concurrency"],
        "peak_tokens_per_s": result["peak_throughput_tokens_per_s"],
        "recommended_concurrency": result["recommended_concurrency"],
        "basis": basis,
        "basis_words": BASIS_WORDS.get(basis, basis),
        "rule": result["recommendation_rule"],
        "plain_peak_concurrency": plain["peak_concurrency"],
        "plain_peak_tokens_per_s": plain["peak_throughput_tokens_per_s"],
        "prefix_gain": plain["prefix_reuse_throughput_gain"],
        "prefix_gain_text": f"{plain['prefix_reuse_throughput_gain']:+.1%}",
        "shares_prefix": plain["levels"] != result["levels"],
    }


def result_context(result: Mapping[str, Any] | None) -> JSON:
    """The template context of a finished job's result (empty parts while there is none)."""
    if result is None:
        return {"result": None, "charts": {}, "rows": [], "summary": None}
    return {"result": result, "charts": figures(result), "rows": rows(result), "summary": summary(result)}
