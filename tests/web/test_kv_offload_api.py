"""Bad `engine.kv_offload` / `node` input on the API and the CLI (issue 15 item 4): a 422 / exit 2
naming the field, with vLLM's reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.cli import main as cli_main
from app.web.app import create_app

from .support import TestClient, make_settings

BASE: dict[str, Any] = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80 GiB"}}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(make_settings()))


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"engine": {"kv_offload": {"backend": "mooncake", "cpu_bytes": "8 GiB"}}}, "engine.kv_offload.backend",
         "native, lmcache"),
        ({"engine": {"kv_offload": {"cpu_bytes": -1}}}, "engine.kv_offload.cpu_bytes", ""),
        ({"engine": {"kv_offload": {"cpu_bytes": "1e300 TiB"}}}, "engine.kv_offload.cpu_bytes", ""),
        ({"engine": {"kv_offload": {"cpu_bytes": "8 GiB", "disk_bytes": "8 GiB"}}}, "engine.kv_offload.disk_bytes",
         "native backend has no disk tier"),
        ({"engine": {"kv_offload": {"cpu_bytes": "8 GiB"}}, "vllm_version": "0.10.1"}, "engine.kv_offload.backend",
         "#27621"),
        ({"node": {"host_memory_bytes": 0}}, "node.host_memory_bytes", ""),
        ({"node": {"host_memory_bytes": "1 TiB", "gpus_per_node": 0}}, "node.gpus_per_node", ""),
        ({"engine": {"enable_prefix_caching": "sometimes"}}, "engine.enable_prefix_caching", ""),
    ],
)
def test_api_refuses_naming_the_field(client: TestClient, extra: dict[str, Any], field: str, words: str) -> None:
    reply = client.post("/api/v1/plan", content=json.dumps({**BASE, **extra}),
                        headers={"Content-Type": "application/json"})
    assert reply.status_code == 422, reply.text[:300]
    error = reply.json()["error"]
    assert error["field"] == field and words in error["message"], error


def test_cli_exits_2_naming_the_backend(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**BASE, "engine": {"kv_offload": {"backend": "disk", "cpu_bytes": "1 GiB"}}}))
    assert cli_main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "engine.kv_offload.backend" in err and "native, lmcache" in err


def test_api_plan_carries_the_tiers(client: TestClient) -> None:
    doc = {**BASE, "engine": {"kv_offload": {"backend": "native", "cpu_bytes": "100 GiB"}}}
    reply = client.post("/api/v1/plan", content=json.dumps(doc), headers={"Content-Type": "application/json"})
    assert reply.status_code == 200, reply.text[:300]
    tiers = reply.json()["kv_tiers"]
    assert [t["name"] for t in tiers] == ["gpu", "cpu"] and all({"name", "bytes", "tokens"} <= set(t) for t in tiers)


def test_a_bare_number_for_the_cpu_tier_is_refused_beside_its_field(client: TestClient) -> None:
    """offload=100 is 100 bytes: the page showed a CPU tier of 0 B and 0 tokens and the command said
    `--kv-offloading-size 0` (vLLM's CPUOffloadingSpec refuses 0); now the field says why."""
    page = client.get("/plan?model=qwen3-8b&tp=2&offload=100")
    assert page.status_code == 422
    assert 'id="err-offload"' in page.text and "--kv-offloading-size 0" in page.text
    assert "--kv-offloading-size 0 " not in page.text.split('id="err-offload"')[0]
    twin = client.get("/plan.json?model=qwen3-8b&tp=2&offload=100")
    assert twin.status_code == 422 and twin.json()["error"]["field"] == "engine.kv_offload.cpu_bytes"
