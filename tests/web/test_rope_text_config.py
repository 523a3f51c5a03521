"""The weights' rotary cache reads RoPE from the text config alone, as vLLM does (defect of stop 29).

vLLM builds a multimodal model's language part from ``hf_text_config`` (vllm/transformers_utils/config.py
``get_hf_text_config`` @28be48fa9): its rotary cache (``get_rope``'s ``cos_sin_cache``, counted in
"Model loading took") has the text config's ``max_position_embeddings`` rows, the text class's default
where the text config omits it. The length already read it so (6e0603c); the weights' term took a
top-level key of the composite config instead: on the real Qwen3-VL-30B-A3B config with its
text_config's length moved to the top level at 8,192, the cache was 4 × 8,192 rows where vLLM
builds 4 × 128,000 (Qwen3VLMoeTextConfig's default; M-RoPE × 4)."""

from __future__ import annotations

import copy
from typing import Any

from app.ingest.catalogue import get_model

from .support import TestClient

ROTARY_DIM, BF16 = 128, 2


def _plan(client: TestClient, config: dict[str, Any]) -> dict[str, Any]:
    reply = client.post("/api/v1/plan", json={"model": {"config": config}, "gpu": {"name": "H100 80GB"},
                                              "engine": {"max_model_len": 8192}})  # fmt: skip
    assert reply.status_code == 200, reply.text
    out: dict[str, Any] = reply.json()
    return out


def test_a_top_level_length_is_not_the_text_models(client: TestClient) -> None:
    real = get_model("qwen3-vl-30b-a3b-instruct").config_dict()
    assert real["text_config"]["max_position_embeddings"] == 262144  # type: ignore[index]
    moved = copy.deepcopy(real)
    del moved["text_config"]["max_position_embeddings"]  # type: ignore[attr-defined]
    moved["max_position_embeddings"] = 8192  # the composite's own key, not the language model's
    stated = copy.deepcopy(real)
    stated["text_config"]["max_position_embeddings"] = 128000  # type: ignore[index]  # the text class's default
    weights = _plan(client, moved)["model"]["weight_bytes"]
    assert weights == _plan(client, stated)["model"]["weight_bytes"]
    assert _plan(client, real)["model"]["weight_bytes"] - weights == 4 * (262144 - 128000) * ROTARY_DIM * BF16
