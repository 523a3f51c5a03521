"""The pool chart drawn as SVG (app/web/plan/pool_svg.py) shows its figure (the same chart's plotly
dict, `PoolChart.figure`): every bar segment with its value, hatching where the figure hatches, the
budget segments, the binding outline, escaped labels."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET

import pytest

from app.services import plan_query, plans
from app.web.plan import charts
from app.web.plan.examples import SEED000
from app.web.plan.pool_chart import PoolChart
from app.web.plan.pool_svg import Bar

SVG = "{http://www.w3.org/2000/svg}"


def _svg(chart: PoolChart) -> ET.Element:
    text = str(chart.svg)
    return ET.fromstring(text[text.index('<svg class="pool-svg"'):])  # after the HTML legend


def _pool(found: dict[str, charts.Chart]) -> PoolChart:
    chart = found["pool"]
    assert isinstance(chart, PoolChart)
    return chart


def _segments(root: ET.Element) -> list[tuple[str, float, float]]:
    """(title, top y, height) of every drawn segment."""
    out = []
    for rect in root.iter(f"{SVG}rect"):
        if rect.get("class") == "seg":
            title = rect.find(f"{SVG}title")
            assert title is not None
            out.append((title.text or "", float(rect.get("y", 0)), float(rect.get("height", 0))))
    return out


def test_every_segment_is_drawn_with_its_value_and_stacked_in_order() -> None:
    result = plans.run_plan(SEED000)
    chart = _pool(charts.plan_charts(result))
    figure = chart.figure
    bars = [t for t in figure["data"] if t["type"] == "bar"]
    segments = _segments(_svg(chart))
    expected = [(label, t["name"], t["y"][i]) for i, label in enumerate(bars[0]["x"]) for t in bars if t["y"][i] > 0]
    assert len(segments) == len(expected)
    for (title, _, height), (label, name, gib) in zip(segments, expected, strict=True):
        assert title.startswith(f"rank {label} · {name}: {gib:.2f} GiB")
        assert height > 0
    # one rank's column: each segment sits on the one below it, heights proportional to GiB
    column = [s for s in segments if s[0].startswith("rank 0 ·")]
    for below, above in itertools.pairwise(column):
        assert above[1] + above[2] == pytest.approx(below[1], abs=0.11)
    gibs = [g for label, _, g in expected if label == "0"]
    ratios = [h / g for (_, _, h), g in zip(column, gibs, strict=True)]
    assert max(ratios) == pytest.approx(min(ratios), rel=0.02)


def test_budget_binding_and_hatching_follow_the_figure() -> None:
    result = plans.run_plan(plan_query.plan_from_query({"tp": "2"}))
    chart = _pool(charts.plan_charts(result))
    figure = chart.figure
    root = _svg(chart)
    budget = [line for line in root.iter(f"{SVG}line") if line.get("class") == "budget"]
    assert len(budget) == len(figure["layout"]["shapes"]) == 2
    patterns = {p.get("id") for p in root.iter(f"{SVG}pattern")}
    hatched = sum(1 for r in root.iter(f"{SVG}rect") if r.get("class") == "seg"
                  and (r.get("fill") or "").removeprefix("url(#").removesuffix(")") in patterns)
    shapes = [s for t in figure["data"] if t["type"] == "bar" for i, s in enumerate(t["marker"]["pattern"]["shape"])
              if s and t["y"][i] > 0]
    assert hatched == len(shapes) > 0
    outlined = [r for r in root.iter(f"{SVG}rect") if r.get("stroke")]
    binding = [w for t in figure["data"] if t.get("name") == "KV (usable)" for w in t["marker"]["line"]["width"] if w]
    assert len(outlined) == len(binding) == 1
    notes = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "note"]
    assert notes == ["binds"]


def test_labels_from_a_document_are_escaped_once() -> None:
    ranks = [{"rank": "<b>r&0</b>", "kv_bytes": 2**30, "weights_bytes": 2**30, "requested_bytes": 3 * 2**30,
              "binding": True, "total_bytes": 4 * 2**30}]
    text = str(charts.pool_chart(ranks, "<b>r&0</b>").svg)
    assert "<b>" not in text and "&lt;b&gt;r&amp;0&lt;/b&gt;" in text and "&amp;lt;" not in text
    assert re.search(r"rank &lt;b&gt;r&amp;0&lt;/b&gt; · weights: 1\.00 GiB", text)


def test_ranks_drawing_the_same_stack_keep_their_own_label_and_place() -> None:
    """A TP group's ranks draw one stack (the SVG shares its markup between them): each column
    still names its own rank, in every title, and stands at its own x."""
    result = plans.run_plan(plan_query.plan_from_query({"model": "llama-3.1-8b", "tp": "8"}), with_levers=False)
    root = _svg(_pool(charts.plan_charts(result)))
    columns = [g for g in root.iter(f"{SVG}g") if g.get("class") == "column"]
    assert [c.get("data-rank") for c in columns] == [f"TP{i}" for i in range(8)]
    places = []
    for column in columns:
        rank = column.get("data-rank")
        titles = [t.text or "" for t in column.iter(f"{SVG}title")]
        assert len(titles) > 3 and all(t.startswith(f"rank {rank} ") for t in titles)
        xs = {rect.get("x") for rect in column.iter(f"{SVG}rect") if rect.get("class") == "seg"}
        assert len(xs) == 1
        places.append(float(xs.pop() or 0))
    assert places == sorted(places) and len(set(places)) == 8


def test_a_chart_without_an_outlined_row_draws_every_column() -> None:
    """Columns are keyed by what they draw, outlines included; a chart with no outlined row (no
    binding rank among its ranks) still draws one column per rank."""
    chart = PoolChart(["a", "b", "c"], [Bar("weights", "#4c78a8", [1.0, 1.0, 2.0], ["measured"] * 3)], [], [])
    columns = [g for g in _svg(chart).iter(f"{SVG}g") if g.get("class") == "column"]
    assert [c.get("data-rank") for c in columns] == ["a", "b", "c"]
