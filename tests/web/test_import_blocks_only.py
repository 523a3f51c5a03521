"""The JSON API and the import page on a real log that states only its block count (public 03: vLLM
0.8.4, Llama-3.1-8B on one L40S, "GPU KV cache size: 158,656 tokens" and no KV memory line): the
run's plan holds the KV room its blocks stand for (measured-derived) and exactly the logged tokens,
and says which budget figures cannot be checked without a total. It was "no plan: run 0 states no
per-rank memory"."""

from __future__ import annotations

import html
from pathlib import Path

from .support import TestClient

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
LOG03 = LOGS / "public" / "03-v084-llama31-8b-l40s-tp1.log"
LOG46 = LOGS / "public" / "46-v085-qwen3-moe-tp4-compose-kv-then-cg-capture-fail.log"
SAME = {"Sec-Fetch-Site": "same-origin"}


def _plan_json(client: TestClient, url: str) -> dict:  # type: ignore[type-arg]
    reply = client.get(url.replace("/plan?", "/plan.json?", 1))
    assert reply.status_code == 200, reply.text
    plan: dict = reply.json()  # type: ignore[type-arg]
    return plan


def test_the_api_imports_the_logged_tokens(client: TestClient) -> None:
    reply = client.post("/api/v1/import/log", json={"text": LOG03.read_text(), "model": "llama-3.1-8b"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    run = body["runs"][0]
    logged = run["engine"]["kv_tokens"]
    assert logged == 158_656 and run["residuals"]["kv_room_from_blocks"]["tokens"] == logged
    (plan_link,) = body["plans"]
    assert plan_link["error"] is None, plan_link
    plan = _plan_json(client, plan_link["url"])
    assert plan["tokens"] == plan["vllm_kv_cache_size_tokens"] == logged
    (rank,) = plan["ranks"]
    assert rank["kv_bytes"] == run["residuals"]["kv_room_from_blocks"]["kv_room_bytes"]
    assert rank["total_bytes"] is None and rank["requested_bytes"] is None
    assert "within one block" in plan["explain"]["kv_bytes"]["formula"]


def test_the_import_page_shows_the_room_and_the_plan_page_what_cannot_be_checked(client: TestClient) -> None:
    reply = client.post("/import", data={"text": LOG46.read_text(), "model": "qwen3-30b-a3b", "tp": "4"},
                        headers=SAME)  # fmt: skip
    assert reply.status_code == 200, reply.text
    page = html.unescape(reply.text)
    assert 'id="room-from-blocks-0"' in page and "198,784</strong> tokens" in page
    assert "no plan" not in page
    start = page.index('href="/plan?') + len('href="')
    url = page[start : page.index('"', start)]
    plan = _plan_json(client, url)
    assert plan["tokens"] == 198_784 and len(plan["ranks"]) == 4
    shown = html.unescape(client.get(url).text)
    assert "198,784" in shown and "cannot be checked" in shown and "measured-derived" in shown
