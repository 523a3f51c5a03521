"""An imported run whose memory lines come from more processes than its layout has workers gets no
plan link, and says why; every link an import hands out opens.

Two real logs pasted one after the other (tests/data/vllm-logs/16, a single-GPU EngineCore_DP0 run,
then 18, four TP workers) read as one run of five processes at TP4: the import handed out
"Make a plan from this run" (plans[0].url) and the page behind it was a 422 ("5 ranks entries are
more than the 4 workers of layout tp=4"). The import now applies the plan page's rank rule
(`imported_runs.require_whole_ranks`). The log reader has since learnt to split those two logs
(a process label heard again under another pid is another start), so the glued pair is now two runs
whose links both open, and the rule is pinned on the document such a run made.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.errors import InputError
from app.services.imported_runs import require_whole_ranks

from .support import TestClient

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
GLUED = ((LOGS / "16-v0102-qwen3-14b-lmcache-tp1.log").read_text()
         + (LOGS / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log").read_text())


def test_every_link_the_api_hands_out_for_two_glued_logs_opens(client: TestClient) -> None:
    reply = client.post("/api/v1/import/log", data={"text": GLUED})
    assert reply.status_code == 200, reply.text[:300]
    plans = reply.json()["plans"]
    assert len(plans) >= 2  # one start each, no longer one run of five processes
    for plan in plans:
        if plan["url"]:
            assert client.get(plan["url"]).status_code == 200, plan
    assert not any(p["error"] and "come from 5 processes" in p["error"] for p in plans)


def test_a_run_with_more_processes_than_workers_is_refused_with_its_labels() -> None:
    """The document the glued run made before the reader split it: EngineCore_DP0 beside TP0-TP3 at TP4."""
    labels = ["EngineCore_DP0", "TP0", "TP1", "TP2", "TP3"]
    ranks = [{"label": label, "total": "23.56 GiB"} for label in labels]
    doc: dict[str, object] = {"layout": {"tp": 4}, "ranks": ranks}
    with pytest.raises(InputError) as err:
        require_whole_ranks(doc)
    assert err.value.field == "ranks"
    said = err.value.message
    assert "come from 5 processes (EngineCore_DP0, TP0, TP1, TP2, TP3)" in said
    assert "import each on its own" in said
    require_whole_ranks({**doc, "ranks": ranks[1:]})  # four workers at TP4: whole
