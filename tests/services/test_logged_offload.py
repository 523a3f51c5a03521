"""A log's offload tier and prefix-caching setting reach the imported plan (issue 15 items 4, 6)."""

from __future__ import annotations

import json
from pathlib import Path

from app.services.plan_layers import logged_offload
from app.services.plans import run_plan

PUBLIC = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "public"


def _flags(prefix: str) -> dict[str, object]:
    entries = json.loads((PUBLIC / "index.json").read_text())["entries"]
    flags = next(e["flags"] for e in entries if e["file"].startswith(prefix))
    assert isinstance(flags, dict)
    return flags


def test_the_kv_transfer_config_of_public_27_is_a_native_tier_of_100_gib() -> None:
    # vllm-project/vllm#50456: SimpleCPUOffloadConnector, cpu_bytes_to_use_per_rank 53,687,091,200 at TP2.
    config = _flags("27-")["kv_transfer_config"]
    offload, note = logged_offload({"settings": {"non_default_args": {"kv_transfer_config": config}}}, 2)
    assert note is None and offload == {"backend": "native", "cpu_bytes": 2 * 53_687_091_200}


def test_lmcache_without_a_size_in_the_log_is_a_note() -> None:
    # vllm-project/vllm#21348 (public/05): LMCacheConnectorV1, the size in LMCache's own configuration.
    config = _flags("05-")["kv_transfer_config"]
    offload, note = logged_offload({"settings": {"non_default_args": {"kv_transfer_config": config}}}, 4)
    assert offload is None and note is not None and "LMCacheConnectorV1" in note


def test_a_logged_offloading_size_gives_the_imported_plan_its_tier() -> None:
    # Lines in the format vLLM 0.11.1+ prints (utils.py `non-default args`, gpu_worker `Available KV cache
    # memory`); constructed for the test — no public log with --kv-offloading-size was found.
    text = ("INFO 11-20 09:59:59 [api_server.py:1896] vLLM API server version 0.11.1\n"
            "INFO 11-20 10:00:00 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-8B', "
            "'kv_offloading_size': 64.0, 'kv_offloading_backend': 'native', 'enable_prefix_caching': False}\n"
            "INFO 11-20 10:00:30 [gpu_worker.py:298] Available KV cache memory: 60.00 GiB\n")
    result = run_plan({"from_log": {"text": text}, "model": {"catalogue": "qwen3-8b"}}, with_levers=False)
    assert result["engine"]["kv_offload"]["cpu_bytes"] == 64 * 2**30
    assert [t["name"] for t in result["kv_tiers"]] == ["gpu", "cpu"]
    assert result["kv_tiers"][1]["tokens"] == 64 * 2**30 // (16 * 147_456) * 16  # Qwen3-8B: 147,456 B/token
    assert result["engine"]["enable_prefix_caching"] is False
    assert "--kv-offloading-size 64" in result["flags"] and "--no-enable-prefix-caching" in result["flags"]
