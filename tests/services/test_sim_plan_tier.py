"""A simulation from a plan carries the plan's CPU tier and prefix-caching setting (issue 15 items 4, 6)."""

from __future__ import annotations

from app.core.kv_tiers import HOST_LINK_BYTES_PER_S
from app.services.plans import run_plan
from app.services.simulation import resolve_pool

PLAN = {"model": {"catalogue": "qwen3-8b"}, "gpu": {"name": "H100"}, "layout": {"tp": 2},
        "engine": {"kv_offload": {"backend": "native", "cpu_bytes": "100 GiB"}, "enable_prefix_caching": False},
        "node": {"host_link": "nvlink-c2c"}}


def test_the_plans_tier_and_prefix_setting_reach_the_simulator() -> None:
    doc = resolve_pool({"plan": PLAN})
    result = run_plan(PLAN, with_levers=False)
    cpu = result["kv_tiers"][1]
    assert doc["kv_tier"]["blocks"] == cpu["tokens"] // 16
    # One block back over NVLink-C2C: 16 tokens × 73,728 B (Qwen3-8B at TP2) / 450 GB/s.
    assert doc["kv_tier"]["block_load_s"] == 16 * 73_728 / HOST_LINK_BYTES_PER_S["nvlink-c2c"]
    assert doc["scheduler"]["enable_prefix_caching"] is False
    assert "offload tier cpu" in doc["pool_source"]


def test_no_tier_no_kv_tier() -> None:
    doc = resolve_pool({"plan": {k: v for k, v in PLAN.items() if k != "engine"}})
    assert "kv_tier" not in doc and doc["scheduler"]["enable_prefix_caching"] is True
