"""max_num_batched_tokens below max_num_seqs: vLLM will not start (SchedulerConfig,
vllm/config/scheduler.py: "max_num_batched_tokens (…) must be greater than or equal to
max_num_seqs"). A defaulted max_num_seqs follows the batched tokens from v0.10.1 (EngineArgs,
`1cd6eaba5`, PR #21270); before, it stayed at the default and such a start was refused too.

One rule (`versions.scheduler_seqs`) for the plan's defaults, the prefill-chunk slider on an
imported run and a lever's other card; walked through the API and the plan page's slider.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.web.app import create_app

from .web.support import HX, TestClient, make_settings

LOG29 = (Path(__file__).parent / "data" / "vllm-logs" / "29-v0190-llama31-8b-h100-tp1-mml16k.log").read_text()
#: The run's own default: "Setting max_num_seqs to 1024 for OPENAI_API_SERVER usage context" (an H100).
MATCH = re.search(r"max_num_seqs to (\d+)", LOG29)
assert MATCH is not None
RUN_DEFAULT_SEQS = int(MATCH[1])
REFUSED = "vLLM will not start"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(make_settings()), raise_server_exceptions=False)


def _imported(mnbt: int, **extra: Any) -> dict[str, Any]:
    return {"from_log": {"text": LOG29}, "model": {"catalogue": "llama-3.1-8b"},
            "whatif": {"max_num_batched_tokens": mnbt}, **extra}


def test_the_slider_below_a_stated_max_num_seqs_is_refused(client: TestClient) -> None:
    resp = client.post("/api/v1/plan", json=_imported(512, engine={"max_num_seqs": 1024}))
    assert resp.status_code == 422, resp.text[:300]
    error = resp.json()["error"]
    assert error["field"] == "whatif.max_num_batched_tokens"
    assert REFUSED in error["message"] and "(512)" in error["message"] and "(1,024)" in error["message"]
    assert client.post("/api/v1/plan", json=_imported(1024, engine={"max_num_seqs": 1024})).status_code == 200


@pytest.mark.parametrize("mnbt", [512, 4096])
def test_a_defaulted_max_num_seqs_follows_the_slider(client: TestClient, mnbt: int) -> None:
    resp = client.post("/api/v1/plan", json=_imported(mnbt))
    assert resp.status_code == 200, resp.text[:300]
    assert resp.json()["engine"]["max_num_batched_tokens"] == mnbt
    assert resp.json()["engine"]["max_num_seqs"] == min(RUN_DEFAULT_SEQS, mnbt)


@pytest.mark.parametrize(("version", "refused"), [("0.9.0", True), ("0.10.0", True), ("0.10.1", False)])
def test_before_v0_10_1_a_defaulted_max_num_seqs_stays_and_is_refused(
    client: TestClient, version: str, refused: bool
) -> None:
    resp = client.post("/api/v1/plan", json=_imported(512, vllm_version=version))
    if refused:
        assert resp.status_code == 422, resp.text[:300]
        assert REFUSED in resp.json()["error"]["message"] and "default" in resp.json()["error"]["message"]
    else:
        assert resp.status_code == 200, resp.text[:300]
        assert resp.json()["engine"]["max_num_seqs"] == 512


def test_the_plan_pages_slider_answers_422_saying_why(client: TestClient) -> None:
    imported = client.post("/import.json", data={"text": LOG29, "model": "llama-3.1-8b"},
                           headers={"Sec-Fetch-Site": "same-origin"})
    assert imported.status_code == 200, imported.text[:300]
    url = imported.json()["plans"][0]["url"]
    assert client.get(url + "&mnbt=512", headers=HX).status_code == 200  # defaulted: follows the slider
    for query in ("&max_num_seqs=1024&mnbt=512", "&vllm=0.9.0&mnbt=512"):
        fragment = client.get(url + query, headers=HX)
        assert fragment.status_code == 422, (query, fragment.text[:300])
        assert REFUSED in fragment.text
        twin = client.get(url.replace("/plan?", "/plan.json?") + query)
        assert twin.status_code == 422 and REFUSED in twin.json()["error"]["message"]


def test_a_plan_stating_the_batched_tokens_follows_the_same_rule(client: TestClient) -> None:
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"},
           "engine": {"max_num_batched_tokens": 512}}
    assert client.post("/api/v1/plan", json=doc).json()["engine"]["max_num_seqs"] == 512  # min(1024, 512)
    old = client.post("/api/v1/plan", json={**doc, "vllm_version": "0.9.0"})
    assert old.status_code == 422 and old.json()["error"]["field"] == "engine.max_num_batched_tokens", old.text[:300]
    assert REFUSED in old.json()["error"]["message"]


def test_no_larger_card_lever_vllm_would_not_start_on(client: TestClient) -> None:
    """At v0.8.3 every ≥ 70 GiB card (A100s too, before PR #17885) defaults to 1,024 sequences,
    which vLLM kept above a stated 512 batched tokens: the lever may not offer such a card."""
    doc = {"model": {"catalogue": "qwen2.5-32b"}, "gpu": {"name": "L40S 48GB"}, "vllm_version": "0.8.3",
           "engine": {"max_num_batched_tokens": 512, "max_model_len": 8192}}
    result = client.post("/api/v1/plan", json=doc).json()
    assert result["engine"]["max_num_seqs"] == 256  # a < 70 GiB card's default, within 512
    assert [lv for lv in result["start_levers"] if lv["knob"] == "gpu"] == []
    a100 = client.post("/api/v1/plan", json={**doc, "gpu": {"name": "A100 80GB"}})
    assert a100.status_code == 422 and REFUSED in a100.json()["error"]["message"]
    current = client.post("/api/v1/plan", json={**doc, "vllm_version": "0.19.0"}).json()
    assert [lv["sets"]["gpu.name"] for lv in current["start_levers"] if lv["knob"] == "gpu"] == ["A100 80GB"]
