"""Absurd numbers (issue 12 item 2, issue 17 item 13): every numeric field of a plan document,
given 10**1000, 1e308, '1e308 GiB', '1e300 TiB', a 401-digit integer or a negative, is a 422
naming the field — never a 500, never a plan — on the API and the CLI."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from app.cli import main as cli_main
from app.web.app import create_app

from .support import TestClient, make_settings

BASE: dict[str, Any] = {
    "model": {"catalogue": "llama-3.1-8b"},
    "gpu": {"total": "80 GiB"},
    "layout": {"tp": 1},
}
HUGE: list[object] = [10**1000, 1e308, "1e308 GiB", "1e300 TiB", int("9" * 401), -1, "1e30GiB"]
FIELDS = [
    ("gpu", "total"), ("gpu", "free_at_start"), ("gpu", "count"),
    ("engine", "kv_cache_memory_bytes"), ("engine", "max_model_len"), ("engine", "max_num_batched_tokens"),
    ("engine", "max_num_seqs"), ("engine", "block_size"), ("engine", "gpu_memory_utilization"),
    ("policy", "avg_live_tokens"), ("policy", "operating_reserve"), ("policy", "growth_reserve"),
    ("policy", "free_spread_threshold"), ("layout", "tp"), ("layout", "pp"), ("layout", "dp"),
    ("whatif", "max_num_batched_tokens"), ("whatif", "tp"),
]


def _doc(section: str, key: str, value: object) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc.setdefault(section, {})[key] = value
    return doc


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(make_settings()))


@pytest.mark.parametrize(("section", "key"), FIELDS)
def test_every_field_refuses_absurd_numbers_by_name(client: TestClient, section: str, key: str) -> None:
    for value in HUGE:
        body = json.dumps(_doc(section, key, value))
        reply = client.post("/api/v1/plan", content=body, headers={"Content-Type": "application/json"})
        assert reply.status_code == 422, (section, key, str(value)[:20], reply.text[:300])
        assert reply.json()["error"]["field"].startswith(f"{section}.{key}"), reply.text[:300]
        assert len(reply.text) < 1000  # the digits are not echoed back


@pytest.mark.parametrize("value", [10**1000, int("9" * 401), 1e308])
def test_config_numbers_and_ranks(client: TestClient, value: object) -> None:
    for doc in (
        {"model": {"config": {"architectures": ["LlamaForCausalLM"], "hidden_size": value,
                              "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8}},
         "gpu": {"total": "80 GiB"}},
        {"model": {"kv_bytes_per_token": value}, "ranks": [{"kv_room": "40 GiB"}]},
        {"model": {"catalogue": "llama-3.1-8b"}, "ranks": [{"total": value}]},
        {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80GiB"},
         "policy": {"activation_points": [[value, 1]]}},
    ):
        reply = client.post("/api/v1/plan", content=json.dumps(doc), headers={"Content-Type": "application/json"})
        assert reply.status_code == 422, reply.text[:300]


def test_a_json_integer_past_pythons_digit_limit_is_refused(client: TestClient) -> None:
    body = '{"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": ' + "9" * 5000 + "}}"
    reply = client.post("/api/v1/plan", content=body, headers={"Content-Type": "application/json"})
    assert reply.status_code in (400, 422), reply.text[:300]  # the body is not JSON Python can read


def test_the_cli_exits_2_naming_the_field(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_doc("policy", "avg_live_tokens", int("9" * 401))))
    assert cli_main(["plan", str(path)]) == 2
    assert "policy.avg_live_tokens" in capsys.readouterr().err
