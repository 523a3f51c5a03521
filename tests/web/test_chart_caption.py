"""Issue 17 item 19: the pool chart and its caption are true for every version. Before vLLM 0.21
CUDA graphs are captured after the KV cache is sized, outside the budget: their segment stacks
above the dashed line (in the headroom); from 0.21 they are inside it (below the line)."""

from __future__ import annotations

from typing import Any

import pytest

from app.services import plans
from app.web.plan.charts import plan_charts
from app.web.plan.pool_chart import PoolChart

from .support import TestClient

GIB = 2**30


def _stack(version: str) -> tuple[dict[str, Any], dict[str, list[float]], float]:
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80GiB"}, "vllm_version": version}
    result = plans.run_plan(doc, with_levers=False)
    chart = plan_charts(result)["pool"]
    assert isinstance(chart, PoolChart)
    fig = chart.figure
    bars = {t["name"]: t["y"] for t in fig["data"] if t["type"] == "bar"}
    dashed = fig["layout"]["shapes"][0]["y0"]
    return result, bars, dashed


@pytest.mark.parametrize("version", ["0.7.2", "0.20.0"])
def test_before_021_the_graphs_segment_sits_above_the_dashed_line(version: str) -> None:
    result, bars, dashed = _stack(version)
    assert result["cuda_graphs_in_budget"] is False
    names = list(bars)
    below = names[: names.index("KV stranded") + 1]
    assert "CUDA graphs" not in below and names[-2:] == ["CUDA graphs (outside budget)", "headroom (outside budget)"]
    rank = result["ranks"][0]
    assert sum(bars[n][0] for n in below) == pytest.approx(dashed) == pytest.approx(rank["requested_bytes"] / GIB)
    graphs = bars["CUDA graphs (outside budget)"][0]
    assert graphs == pytest.approx(rank["cuda_graph_bytes"] / GIB) and graphs > 0
    assert sum(bars[n][0] for n in names) == pytest.approx(rank["total_bytes"] / GIB)  # the bar is the card


def test_from_021_the_graphs_are_inside_the_budget() -> None:
    result, bars, dashed = _stack("0.21.0")
    assert result["cuda_graphs_in_budget"] is True
    names = list(bars)
    below = names[: names.index("KV stranded") + 1]
    assert "CUDA graphs" in below and "CUDA graphs (outside budget)" not in names
    assert sum(bars[n][0] for n in below) == pytest.approx(dashed)
    assert sum(bars[n][0] for n in names) == pytest.approx(result["ranks"][0]["total_bytes"] / GIB)


@pytest.mark.parametrize(("version", "words"), [
    ("0.7.2", "before 0.21) CUDA graphs are captured after the KV cache is sized, outside the budget"),
    ("0.21.0", "which holds CUDA graphs too (vLLM 0.21 and later)"),
])
def test_the_caption_says_what_the_chart_shows(client: TestClient, version: str, words: str) -> None:
    page = client.get(f"/plan?model=llama-3.1-8b&gpu_total=80GiB&vllm={version}").text
    assert words in " ".join(page.split())
