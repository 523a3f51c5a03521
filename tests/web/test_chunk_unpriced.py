"""The home page's seed 000 example gives its model as 128 KiB per token: no shape to price the prefill
chunk's activation by. The chunk lever said "+2,944 tokens" for 8,192 → 4,096 (an unsourced 0.09 MiB
per batched token); now the chunk moves no row, the plan says why, and no lever is offered for it."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_a_shapeless_model_does_not_guess_the_chunk(client: TestClient) -> None:
    base = client.get("/plan.json?base=seed000").json()
    assert base["tokens"] == 42 * 2**30 // (128 * 2**10) == 344_064
    assert "max_num_batched_tokens" not in [lever["knob"] for lever in base["levers"]]
    moved = client.get("/plan.json?base=seed000&mnbt=4096").json()
    assert moved["engine"]["max_num_batched_tokens"] == 4096
    assert moved["tokens"] == 344_064
    assert [r["activation_bytes"] for r in moved["ranks"]] == [r["activation_bytes"] for r in base["ranks"]]
    assert any("the activation row is not moved" in note for note in moved["notes"])


def test_a_catalogue_model_still_prices_the_chunk(client: TestClient) -> None:
    plan = client.get("/plan.json?model=llama-3.1-8b&gpu=24GiB").json()
    assert "max_num_batched_tokens" in [lever["knob"] for lever in plan["levers"]]
