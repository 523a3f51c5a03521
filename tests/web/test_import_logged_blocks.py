"""An imported run's plan holds the block count its log states, not one recomputed from a rounded figure.

public 32 (vLLM 0.19.0, Llama-3.3-70B fp8-dynamic, TP4 on H100): every worker prints
"Available KV cache memory: 54.09 GiB" (10 MiB precision, ±6 blocks of 1,310,720 B at TP4) and the
engine "GPU KV cache size: 708,992 tokens" / "Maximum concurrency for 8,192 tokens per request:
86.55x". The plan recomputed 44,310 blocks from the printed 54.09 GiB and showed 708,960 tokens,
86.54x and a "measured" vLLM KV cache size of 708,960 beside a log that says 708,992.
"""

from __future__ import annotations

from pathlib import Path

from app.services.evidence import parse_log_text

from .support import TestClient

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
SAME = {"Sec-Fetch-Site": "same-origin"}


def test_imported_plan_states_the_logged_blocks(client: TestClient) -> None:
    text = next(LOGS.glob("32-*.log")).read_text()
    run = parse_log_text(text)["runs"][0]
    logged_tokens = run["engine"]["kv_tokens"]
    assert f"GPU KV cache size: {logged_tokens:,} tokens" in text
    reply = client.post("/import.json", data={"text": text, "model": "llama-3.1-70b"}, headers=SAME)
    assert reply.status_code == 200, reply.text
    url = reply.json()["plans"][0]["url"]
    plan = client.get(url.replace("/plan?", "/plan.json?", 1)).json()
    assert plan["tokens"] == plan["vllm_kv_cache_size_tokens"] == logged_tokens
    assert round(plan["max_concurrency_at_max_model_len"], 2) == run["engine"]["max_concurrency"]
    assert any("refined within its printed precision" in note for note in plan["notes"])
    # every rank's KV room stays inside what the log printed (54.09 GiB ± its precision)
    printed = {r["rank"]: (r["kv_bytes"], r["tolerance"]["kv_bytes"]) for r in run["ranks"]}
    for rank in plan["ranks"]:
        kv, tol = printed[rank["rank"]]
        assert abs(rank["kv_bytes"] - kv) <= tol
    # the plan page shows the log's figure
    page = client.get(url).text
    assert f"{logged_tokens:,}" in page


def test_a_hybrid_run_keeps_its_printed_rows(client: TestClient) -> None:
    """Gemma-2 mixes sliding-window and full layers (two KV groups): blocks do not map to bytes one
    to one, so the printed figure is kept as it is."""
    text = next(LOGS.glob("25-*.log")).read_text()
    run = parse_log_text(text)["runs"][0]
    reply = client.post("/import.json", data={"text": text}, headers=SAME)
    plan = client.get(reply.json()["plans"][0]["url"].replace("/plan?", "/plan.json?", 1)).json()
    assert [r["kv_bytes"] for r in plan["ranks"]] == [r["kv_bytes"] for r in run["ranks"]]
    assert not any("refined within" in note for note in plan["notes"])
