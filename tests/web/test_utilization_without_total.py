"""Issue 17: a plan imported from a vLLM log that states no GPU total (log 18: vLLM 0.11.0,
Qwen3-VL-30B-A3B TP4 on 4 × RTX 3090, "Available KV cache memory: 2.31 GiB" on every rank and no
total) cannot move its KV with gpu_memory_utilization: requested = ceil(total × u) needs the
total. The levers must not offer it, and the page says why on its first render, not after a move.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from .support import TestClient

LOG18 = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log"
SAME = {"Sec-Fetch-Site": "same-origin"}
NOTE = "gpu_memory_utilization has no effect on this plan's KV"


def _imported_url(client: TestClient) -> str:
    response = client.post("/import.json", data={"text": LOG18.read_text()}, headers=SAME)
    assert response.status_code == 200, response.text
    (plan,) = response.json()["plans"]
    url: str = plan["url"]
    return url


def test_no_utilization_lever_and_the_note_on_first_render(client: TestClient) -> None:
    url = _imported_url(client)
    result = client.get(url.replace("/plan?", "/plan.json?")).json()
    assert all(rank["total_bytes"] is None for rank in result["ranks"])  # the log states no total
    assert not [lv for lv in result["levers"] if lv["knob"] == "gpu_memory_utilization" and lv["tokens_gained"] > 0]
    assert "gpu_memory_utilization" not in {lv["knob"] for lv in result["levers"]}
    assert any(NOTE in note for note in result["notes"])
    page = html.unescape(client.get(url).text)  # first render: no slider moved
    assert NOTE in page and "total memory" in page
    rows = re.findall(r'<tr data-knob="([^"]+)"><td>', page)
    assert "gpu_memory_utilization" not in rows  # the levers table
    # nor the chunk (no model shape to price it: the log names none): no lever at all, and the card
    # says so instead of "Computing…" with a load trigger that would ask again forever
    assert rows == [] and "No knob this plan can price would move its tokens" in page
    assert "Computing how many tokens" not in page
    moved = html.unescape(client.get(url + "&util=0.95").text)
    assert moved.count(NOTE) == page.count(NOTE)  # a move neither hides it nor repeats it
    # The slider indeed moves nothing: the tokens stay.
    assert client.get(url.replace("/plan?", "/plan.json?") + "&util=0.95").json()["tokens"] == result["tokens"]
