"""A plan from an imported run whose own block count its KV memory cannot hold at the plan's layout
says so, as the import does.

vLLM issue #21348 (MMuzzammil1, 2025-07-22) quotes two lines of a Qwen3-235B-A22B-FP8 start on four
H100s (`--tensor-parallel-size 4`, not in the excerpt): "Available KV cache memory: 8.11 GiB" and
"GPU KV cache size: 178,880 tokens". Imported with its model, the import's residuals flagged
`blocks_exceed_memory`, but "Make a plan from this run" opened at TP1 with 45,232 tokens and no word
that the log's own figure is 178,880: at TP1 a token costs 192,512 B on the rank, 8.11 GiB holds at
most 2,828 blocks, the log states 11,180.
"""

from __future__ import annotations

from .support import TestClient

SAME = {"Sec-Fetch-Site": "same-origin"}
EXCERPT = "Available KV cache memory: 8.11 GiB\nGPU KV cache size: 178,880 tokens\n"  # vLLM issue #21348


def test_the_plan_of_a_run_its_layout_contradicts_says_so(client: TestClient) -> None:
    out = client.post("/import.json", data={"text": EXCERPT, "model": "qwen3-235b-a22b-fp8"}, headers=SAME).json()
    assert "blocks_exceed_memory" in [f["code"] for f in out["runs"][0]["findings"]]
    plan = client.get(out["plans"][0]["url"].replace("/plan?", "/plan.json?", 1)).json()
    assert plan["layout"]["tp"] == 1 and plan["tokens"] == 45_232
    (said,) = [n for n in plan["notes"] if "more than its KV memory holds" in n]
    assert "11,180 blocks (178,880 tokens)" in said and "TP1 × PP1" in said and "at most 2,828 blocks" in said
    assert "give TP and PP on the import page" in said
    page = client.get(out["plans"][0]["url"])
    assert page.status_code == 200 and "more than its KV memory holds" in page.text


def test_the_same_run_at_the_tp_it_used_gets_no_such_note(client: TestClient) -> None:
    out = client.post("/import.json", data={"text": EXCERPT, "model": "qwen3-235b-a22b-fp8", "tp": "4"},
                      headers=SAME).json()
    plan = client.get(out["plans"][0]["url"].replace("/plan?", "/plan.json?", 1)).json()
    assert plan["layout"]["tp"] == 4  # the TP typed on the import page, which the run used
    assert not any("more than its KV memory holds" in n for n in plan["notes"])
