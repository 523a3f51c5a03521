"""An imported run whose memory lines come from more processes than its layout has workers gets no
plan link, and says why, through the HTTP API and on the import page.

Two real logs pasted one after the other (tests/data/vllm-logs/16, a single-GPU EngineCore_DP0 run,
then 18, four TP workers) read as one run of five processes at TP4: the import handed out
"Make a plan from this run" (plans[0].url) and the page behind it was a 422 ("5 ranks entries are
more than the 4 workers of layout tp=4"). The import now applies the plan page's rank rule.
"""

from __future__ import annotations

from pathlib import Path

from .support import TestClient

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
GLUED = ((LOGS / "16-v0102-qwen3-14b-lmcache-tp1.log").read_text()
         + (LOGS / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log").read_text())


def test_the_api_gives_no_link_to_a_plan_that_would_not_open(client: TestClient) -> None:
    reply = client.post("/api/v1/import/log", data={"text": GLUED})
    assert reply.status_code == 200, reply.text[:300]
    plans = reply.json()["plans"]
    for plan in plans:
        if plan["url"]:
            assert client.get(plan["url"]).status_code == 200, plan
    glued = [p for p in plans if p["error"] and "come from 5 processes" in p["error"]]
    assert glued and glued[0]["url"] is None
    assert "EngineCore_DP0, TP0, TP1, TP2, TP3" in glued[0]["error"]
    assert "import each on its own" in glued[0]["error"]


def test_the_import_page_says_why_there_is_no_plan(client: TestClient) -> None:
    page = client.post("/import", data={"text": GLUED}, headers={"Sec-Fetch-Site": "same-origin"})
    assert page.status_code == 200, page.text[:300]
    assert "come from 5 processes" in page.text
    assert "Make a plan from this run" not in page.text
