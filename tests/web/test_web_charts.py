"""Chart builders: plain dicts from results; binding, stranded, estimated and aggregation visible."""

from __future__ import annotations

import json
import sys

from app.services import plan_query, plans
from app.web.plan import charts
from app.web.plan.examples import SEED000


def _trace(figure: charts.Figure, name: str) -> dict[str, object]:
    return next(t for t in figure["data"] if t.get("name") == name)


def _pool(result: dict[str, object]) -> charts.Figure:
    chart = charts.plan_charts(result)["pool"]
    assert isinstance(chart, charts.PoolChart)
    return chart.figure


def test_seed000_pool_chart_marks_the_binding_rank_and_requested_line() -> None:
    result = plans.run_plan(SEED000)
    figure = _pool(result)
    kv = _trace(figure, "KV (usable)")
    assert kv["x"] == ["0", "1", "2", "3"]
    line = kv["marker"]["line"]  # type: ignore[index]
    assert line["width"] == [0, 0, 3, 0]
    assert [a["x"] for a in figure["layout"]["annotations"]] == ["2"]
    assert [shape["y0"] for shape in figure["layout"]["shapes"]] == [72.0] * 4
    assert _trace(figure, "requested budget")["line"]["dash"] == "dash"  # type: ignore[index]
    headroom = _trace(figure, "headroom (outside budget)")
    assert headroom["y"] == [8.0] * 4
    stranded = _trace(figure, "KV stranded")
    assert stranded["y"] == [r["stranded_bytes"] / 1024**3 for r in result["ranks"]]
    assert all(shape == "" for shape in kv["marker"]["pattern"]["shape"])  # type: ignore[index]


def test_estimated_cells_are_hatched() -> None:
    result = plans.run_plan(plan_query.plan_from_query({"tp": "2"}))
    weights = _trace(_pool(result), "weights")
    assert weights["marker"]["pattern"]["shape"] == ["/", "/"]  # type: ignore[index]


def test_past_64_ranks_the_view_aggregates() -> None:
    result = plans.run_plan(plan_query.plan_from_query({"ranks": "1024", "tp": "8"}), with_levers=False)
    figures = charts.plan_charts(result)
    assert set(figures) == {"pool", "dist"}
    pool, dist = figures["pool"], figures["dist"]
    assert isinstance(pool, charts.PoolChart) and isinstance(dist, dict)
    assert len(pool.figure["data"][0]["x"]) <= 3
    assert sum(dist["data"][0]["y"]) == 1024
    assert len(json.dumps({"pool": pool.figure, "dist": dist})) < 20_000


def test_histogram_of_uneven_ranks_marks_the_binding_bin() -> None:
    ranks = [{"rank": str(i), "kv_bytes": (40 + i % 7) * 1024**3} for i in range(100)]
    figure = charts.kv_histogram(ranks, "0")
    trace = figure["data"][0]
    assert sum(trace["y"]) == 100
    assert trace["marker"]["color"][0] == charts.BINDING_COLOUR
    assert "binding rank 0" in figure["layout"]["annotations"][0]["text"]


def test_levers_sorted_biggest_on_top() -> None:
    levers = [
        {"knob": "a", "change": "1 → 2", "tokens_gained": 10},
        {"knob": "b", "change": "x → y", "tokens_gained": 500},
        {"knob": "c", "change": "<b>", "tokens_gained": -5},
    ]
    trace = charts.levers_figure(levers)["data"][0]
    assert trace["x"] == [-5, 10, 500]
    assert trace["y"][0] == "c: &lt;b&gt;"


def test_levers_that_fail_or_warn_are_coloured_and_labelled() -> None:
    levers = [
        {"knob": "ok", "change": "1 → 2", "tokens_gained": 10, "will_start": True, "caveats": []},
        {"knob": "warn", "change": "1 → 2", "tokens_gained": 20, "will_start": True, "caveats": ["<graphs>"]},
        {"knob": "fail", "change": "1 → 2", "tokens_gained": 30, "will_start": False, "caveats": ["no room"]},
        {"knob": "old", "change": "1 → 2", "tokens_gained": 5},  # saved before levers carried these keys
    ]
    trace = charts.levers_figure(levers)["data"][0]
    assert trace["y"] == ["old: 1 → 2", "ok: 1 → 2", "warn: 1 → 2 (see caveat)", "fail: 1 → 2 (will not start)"]
    assert trace["marker"]["color"] == [charts.KV_COLOUR, charts.KV_COLOUR, charts.CAVEAT_COLOUR, charts.BINDING_COLOUR]
    assert trace["customdata"][2] == "&lt;graphs&gt;"
    # When the plan does not start now, "will not start" is no news; a knob that makes it start is.
    for lever, starts in zip(levers, (False, False, True, None), strict=True):  # ok, warn, fail, old
        lever["will_start"] = starts
    trace = charts.levers_figure(levers, base_starts=False)["data"][0]
    assert trace["y"] == ["old: 1 → 2", "ok: 1 → 2", "warn: 1 → 2 (see caveat)", "fail: 1 → 2 (starts)"]
    assert charts.BINDING_COLOUR not in trace["marker"]["color"]


def test_figures_are_plain_json_without_plotly() -> None:
    result = plans.run_plan(plan_query.plan_from_query({"model": "llama-3.1-70b", "tp": "4"}))
    found = charts.plan_charts(result)
    json.dumps({k: v.figure if isinstance(v, charts.PoolChart) else v for k, v in found.items()}, allow_nan=False)
    assert "plotly" not in sys.modules
