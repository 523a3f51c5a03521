"""The sizing chart: GPUs against concurrency, one line per GPU preset, the Pareto front and the
target marked. A plain plotly figure dict (as in `app.web.plan.charts`), from the answer's
`by_gpu` and `pareto` lists: no arithmetic on the search's numbers."""

from __future__ import annotations

from typing import Any

from app.web.plan.charts import FONT

Figure = dict[str, Any]
COLOURS = ("#3451b2", "#f58518", "#2f7d32", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#d35400")
TARGET_COLOUR = "#c0392b"


def figure(answer: dict[str, Any]) -> Figure:
    target = answer["target"]
    data: list[dict[str, Any]] = []
    for i, (gpu, points) in enumerate(answer["by_gpu"].items()):
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": gpu,
            "x": [p["gpus"] for p in points], "y": [p["concurrency"] for p in points],
            "text": [p["label"] for p in points],
            "hovertemplate": "%{text}<br>%{x} GPUs: %{y:,} requests<extra></extra>",
            "line": {"color": COLOURS[i % len(COLOURS)], "width": 2},
        })  # fmt: skip
    front = answer["pareto"]
    if front:
        data.append({
            "type": "scatter", "mode": "markers", "name": "Pareto front", "x": [p["gpus"] for p in front],
            "y": [p["concurrency"] for p in front], "text": [p["label"] for p in front],
            "hovertemplate": "%{text}<br>%{x} GPUs: %{y:,} requests (front)<extra></extra>",
            "marker": {"symbol": "diamond-open", "size": 12, "color": "#1f2933", "line": {"width": 2}},
        })  # fmt: skip
    shapes, notes = [], []
    if target.get("concurrency"):
        shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": target["concurrency"],
                       "y1": target["concurrency"], "line": {"color": TARGET_COLOUR, "width": 2, "dash": "dash"}})
        notes.append({"xref": "paper", "x": 1, "xanchor": "right", "yref": "y", "y": target["concurrency"],
                      "yanchor": "bottom", "text": f"target {target['concurrency']:,}", "showarrow": False,
                      "font": {"color": TARGET_COLOUR, "size": 12}})  # fmt: skip
    return {"data": data, "layout": {
        "font": {"family": FONT, "size": 12, "color": "#1f2933"}, "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)", "height": 360, "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        "xaxis": {"title": {"text": "GPUs"}, "dtick": 1 if answer["max_gpus"] <= 16 else None, "rangemode": "tozero"},
        "yaxis": {"title": {"text": f"concurrent requests at {target['avg_live_tokens']:,} live tokens"},
                  "rangemode": "tozero", "tickformat": ",d"},
        "shapes": shapes, "annotations": notes,
    }}  # fmt: skip
