"""A config.json stating a vocabulary or a length of 0 is refused naming the field, through the API.

`{"vocab_size": 0, …}` (Llama-3.1-8B otherwise) planned 474,704 tokens — a model with no embedding,
LM head or sampler — where the real config plans 450,528; `max_position_embeddings: 0` likewise
went through. A size left out still takes vLLM's default.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .support import TestClient

CONFIG = json.loads((Path(__file__).resolve().parents[2] / "app" / "data" / "catalogue" / "llama-3.1-8b.json")
                    .read_text())["config"]


@pytest.mark.parametrize("key", ["vocab_size", "max_position_embeddings"])
def test_a_zero_size_is_refused_naming_it(client: TestClient, key: str) -> None:
    reply = client.post("/api/v1/plan", json={"model": {"config": {**CONFIG, key: 0}}, "gpu": {"name": "H100 80GB"}})
    assert reply.status_code == 422
    assert reply.json()["error"] == {"field": f"model.config.{key}",
                                     "message": "must be a positive integer when given, got 0"}
    whole = client.post("/api/v1/plan", json={"model": {"config": CONFIG}, "gpu": {"name": "H100 80GB"}})
    assert whole.status_code == 200
