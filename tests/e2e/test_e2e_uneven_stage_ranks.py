"""Each rank's stranded KV and raw tokens on a plan with uneven pipeline stages, in Chromium.

/plan?model=llama-3.1-405b&tp=8&pp=8 (126 layers: stages 0 and 7 hold 15, the others 16) said
"Stranded KV, all ranks: 54.21 GiB" above a per-rank table whose stranded column summed to 2.02 GiB:
0.25 GiB on each stage-0 rank (its KV bytes less the binding rank's) and 0.00 on stage 7, whose
smaller page holds 495,361 blocks where the engine keeps 469,668 (2.94 GiB left over). The rows came
from one column formula over the binding stage's page; they now come from each rank's own stage.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e


def _gib(text: str) -> float:
    found = re.search(r"(-?[\d,]+\.\d+)\s*GiB", text)
    assert found, text
    return float(found.group(1).replace(",", ""))


def test_the_rank_table_strands_what_the_total_says(page: Any) -> None:
    page.goto("/plan?model=llama-3.1-405b&tp=8&pp=8&gpu=H100+80GB")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_function(PLAN_IDLE)
    headers = page.eval_on_selector_all("#ranks thead th", "ths => ths.map(t => t.textContent.trim().toLowerCase())")
    column = headers.index("stranded")
    cells: dict[str, str] = dict(page.eval_on_selector_all(
        "#ranks tbody tr", f"rows => rows.map(r => [r.dataset.rank, r.children[{column}].textContent.trim()])"))
    assert len(cells) == 64
    total = _gib(page.inner_text("#adm-stranded_bytes"))
    assert abs(sum(_gib(c) for c in cells.values()) - total) <= 64 * 0.005 + 1e-9, (total, cells)
    twin = page.request.get(page.url.replace("/plan?", "/plan.json?", 1)).json()
    ranks = {r["rank"]: r for r in twin["ranks"]}
    # Each row is its own rank's stranded bytes (2.94 and 3.83 GiB at this stop's estimate; they were
    # 0.00 and 0.25 when every row used the binding stage's page), as the plan's JSON has them.
    for label in ("PP7_TP0", "PP0_TP0"):
        assert _gib(cells[label]) == pytest.approx(ranks[label]["stranded_bytes"] / 2**30, abs=0.005)
        assert ranks[label]["stranded_bytes"] > 2**30
    assert sum(r["stranded_bytes"] for r in twin["ranks"]) == twin["stranded_bytes"]
    stage7 = ranks["PP7_TP0"]  # 15 layers × 1 KV head × 128 × 2 (K, V) × 2 B = 7,680 B per token
    assert stage7["raw_tokens"] == stage7["kv_bytes"] // 7680
    assert stage7["tokens"] == stage7["blocks"] * 16
