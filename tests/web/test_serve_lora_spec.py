"""A `vllm serve` command's LoRA / speculative flags in the plan (JSON API and /start/serve).

The plan of `--enable-lora --max-loras 4 --max-lora-rank 64` had no LoRA slots, and that of
`--speculative-config` no draft; both are now the same plan as the document's own fields give."""

from __future__ import annotations

from typing import Any

from app.web.templating import RenderEvent

from .support import TestClient

LLAMA = "vllm serve meta-llama/Llama-3.1-8B-Instruct"
GPU = {"name": "H100 80GB"}
SAME = {"Sec-Fetch-Site": "same-origin"}


def _plan(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/v1/plan", json=body)
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


def test_lora_flags_give_the_lora_rows_the_document_gives(client: TestClient) -> None:
    served = _plan(client, {"serve": f"{LLAMA} --enable-lora --max-lora-rank 64 --max-loras 4", "gpu": GPU})
    stated = _plan(client, {"model": {"catalogue": "llama-3.1-8b", "name": "meta-llama/Llama-3.1-8B-Instruct"},
                            "gpu": GPU, "engine": {"lora": {"max_loras": 4, "max_lora_rank": 64}}})
    assert served["engine"]["lora"]["max_loras"] == 4 and served["engine"]["lora"]["max_lora_rank"] == 64
    assert served["ranks"][0]["lora_bytes"] == stated["ranks"][0]["lora_bytes"] > 0
    assert "--enable-lora" in served["flags"] and "--max-loras 4" in served["flags"]
    assert not any("--max-loras" in n for n in served["notes"])


def test_speculative_config_gives_the_draft_rows(client: TestClient) -> None:
    spec = '{"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4}'
    served = _plan(client, {"serve": f"{LLAMA} --speculative-config '{spec}'", "gpu": GPU})
    stated = _plan(client, {"model": {"catalogue": "llama-3.1-8b"}, "gpu": GPU, "engine": {"speculative": {
        "method": "draft_model", "num_speculative_tokens": 4, "model": {"catalogue": "llama-3.2-1b"}}}})
    assert served["engine"]["speculative"]["method"] == "draft_model"
    assert served["draft_kv_bytes_per_token"] == stated["draft_kv_bytes_per_token"] > 0
    assert served["ranks"][0]["weights_bytes"] == stated["ranks"][0]["weights_bytes"]
    ngram = _plan(client, {"serve": LLAMA + """ --speculative-config '{"method": "ngram", """
                                            """"num_speculative_tokens": 4, "prompt_lookup_max": 4}'""", "gpu": GPU})
    assert ngram["engine"]["speculative"]["method"] == "ngram"
    assert any("prompt_lookup_max" in n for n in ngram["notes"])


def test_an_unknown_draft_is_a_422_naming_the_flag(client: TestClient) -> None:
    response = client.post("/api/v1/plan", json={
        "serve": LLAMA + """ --speculative-config '{"model": "x/tiny", "num_speculative_tokens": 2}'""", "gpu": GPU})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "serve --speculative-config"


def test_start_serve_page_shows_the_lora_column(client: TestClient, renders: list[RenderEvent]) -> None:
    made = client.post("/start/serve", headers=SAME, follow_redirects=False, data={
        "command": f"{LLAMA} --enable-lora --max-lora-rank 64 --max-loras 4", "gpu": "H100 80GB"})
    assert made.status_code == 303, made.text
    page = client.get(made.headers["location"])
    assert page.status_code == 200
    context = renders[-1].context
    assert "LoRA" in context["rank_columns"] and context["result"]["ranks"][0]["lora_bytes"] > 0
    assert context["form"]["loras"] == "4" and context["form"]["lora_rank"] == "64"
