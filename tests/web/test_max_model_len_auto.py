"""`--max-model-len auto` through the HTTP API: the model's length when it fits (H100s), the fitted
length when it does not (L40S, the browser test's case), refused before vLLM 0.14 (no such value)."""

from __future__ import annotations

from .support import TestClient

COMMAND = "vllm serve meta-llama/Meta-Llama-3.1-70B -tp 4 --max-model-len auto"


def test_auto_keeps_the_full_length_where_it_fits(client: TestClient) -> None:
    plan = client.post("/api/v1/plan", json={"serve": COMMAND, "gpu": {"name": "H100 80GB"}}).json()
    assert plan["engine"]["max_model_len"] == 131072 and plan["will_start"]
    assert "--max-model-len auto: the model's full length 131,072 fits the KV memory, so vLLM keeps it" in plan["notes"]


def test_auto_is_fitted_where_the_full_length_does_not_fit(client: TestClient) -> None:
    plan = client.post("/api/v1/plan", json={"vllm_config": "model: meta-llama/Meta-Llama-3.1-70B\n"
                                             "tensor-parallel-size: 4\nmax-model-len: -1\n",
                                             "gpu": {"name": "L40S 48GB"}}).json()
    assert plan["engine"]["max_model_len"] == plan["largest_max_model_len"] == 77_776
    assert "--max-model-len 77776" in plan["flags"]


def test_auto_before_vllm_014_is_refused(client: TestClient) -> None:
    reply = client.post("/api/v1/plan", json={"serve": COMMAND, "gpu": {"name": "L40S 48GB"}, "vllm_version": "0.11.0"})
    assert reply.status_code == 422
    assert reply.json()["error"]["field"] == "engine.max_model_len_auto"
