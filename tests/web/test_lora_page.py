"""The LoRA what-if on the plan page (issue 15 item 1): query keys through the knob table, the row shown."""

from __future__ import annotations

from app.services import plan_query, plans
from app.web.templating import RenderEvent

from .support import TestClient


def test_lora_knobs_reach_the_plan_and_the_rank_table(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/plan?model=llama-3.1-8b&loras=4&lora_rank=64")
    assert response.status_code == 200
    context = renders[0].context
    expected = plans.run_plan(plan_query.plan_from_query({"model": "llama-3.1-8b", "loras": "4", "lora_rank": "64"}))
    assert context["result"]["ranks"][0]["lora_bytes"] == expected["ranks"][0]["lora_bytes"] > 0
    assert "LoRA" in context["rank_columns"]
    assert context["form"]["loras"] == "4" and context["form"]["lora_rank"] == "64"
    assert ("512", "512") in context["options"]["lora_ranks"]
    assert "--enable-lora" in response.text


def test_lora_off_shows_no_lora_column(client: TestClient, renders: list[RenderEvent]) -> None:
    assert client.get("/plan?model=llama-3.1-8b").status_code == 200
    assert "LoRA" not in renders[0].context["rank_columns"]


def test_query_round_trip_keeps_the_lora_keys() -> None:
    doc = plan_query.plan_from_query({"model": "llama-3.1-8b", "loras": "2", "lora_rank": "32"})
    assert doc["engine"]["lora"] == {"max_loras": 2, "max_lora_rank": 32}
    assert plan_query.query_from_plan(doc) == {"loras": "2", "lora_rank": "32"}


def test_a_rank_vllm_refuses_is_422_naming_the_field(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/plan.json?model=llama-3.1-8b&loras=2&lora_rank=48")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "engine.lora.max_lora_rank" and "MaxLoRARanks" in error["message"]
    page = client.get("/plan?model=llama-3.1-8b&loras=2&lora_rank=48")
    assert page.status_code == 422
    assert "lora_rank" in renders[-1].context["field_errors"]
    api = client.post("/api/v1/plan", json={"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80 GiB"},
                                            "engine": {"lora": {"max_loras": 0}}})  # fmt: skip
    assert api.status_code == 422 and api.json()["error"]["field"] == "engine.lora.max_loras"


def test_speculative_knobs_reach_the_plan(client: TestClient, renders: list[RenderEvent]) -> None:
    query = {"model": "llama-3.1-8b", "spec": "draft_model", "spec_tokens": "4", "spec_model": "llama-3.2-1b"}
    response = client.get("/plan?model=llama-3.1-8b&spec=draft_model&spec_tokens=4&spec_model=llama-3.2-1b")
    assert response.status_code == 200
    context = renders[0].context
    expected = plans.run_plan(plan_query.plan_from_query(query))
    assert context["result"]["draft_kv_bytes_per_token"] == expected["draft_kv_bytes_per_token"] > 0
    assert "draft" in context["rank_columns"]
    assert context["form"]["spec"] == "draft_model" and context["form"]["spec_tokens"] == "4"
    assert "--speculative-config" in response.text
    bad = client.get("/plan.json?model=llama-3.1-8b&spec=mtp&spec_tokens=2")
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "engine.speculative.method"


def test_encoder_cache_and_draft_rows_on_the_admission_panel(client: TestClient) -> None:
    html = client.get("/plan?model=qwen3-vl-30b-a3b-instruct&gpu=H100%2080GB").text
    assert 'id="adm-encoder_cache_bytes"' in html and "compute_mm_encoder_budget" in html
    html = client.get("/plan?model=llama-3.1-8b&spec=draft_model&spec_tokens=3&spec_model=llama-3.2-1b").text
    assert 'id="adm-draft_kv_bytes_per_token"' in html
