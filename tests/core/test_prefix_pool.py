"""Prefix caching as part of the pool (issue 15 item 6): running and retained blocks share vLLM's
one BlockPool (vllm/v1/core/block_pool.py); the default is vLLM's (CacheConfig.enable_prefix_caching
= True in V1, vllm/config/cache.py @28be48fa; V0 had it off)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.prefix_pool import prefix_pool
from app.services.plans import run_plan
from tests.core.test_explain_identities import _check


def _doc(**engine: Any) -> dict[str, Any]:
    return {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "L40S"}, "engine": engine,
            "policy": {"avg_live_tokens": 3000}}


@pytest.mark.parametrize(("version", "default"), [("0.27.1", True), ("0.10.2", True), ("0.8.0", True),
                                                  ("0.7.3", False), ("0.6.4", False)])
def test_default_is_vllms_for_the_version(version: str, default: bool) -> None:
    result = run_plan({**_doc(), "vllm_version": version}, with_levers=False)
    assert result["engine"]["enable_prefix_caching"] is default
    assert not any("prefix-caching" in f for f in result["flags"])  # the default is not written


def test_off_is_a_flag_and_retains_nothing() -> None:
    on = run_plan(_doc(), with_levers=False)
    off = run_plan(_doc(enable_prefix_caching=False), with_levers=False)
    assert "--no-enable-prefix-caching" in off["flags"]
    assert off["prefix_pool"]["retained_blocks"] == 0 and off["prefix_pool"]["retention_share"] == 0
    assert on["prefix_pool"]["retained_blocks"] == on["prefix_pool"]["usable_blocks"] - on["prefix_pool"][
        "running_blocks"]
    assert on["blocks"] == off["blocks"]  # the pool is the same; only what freed blocks keep differs
    # An independent count: the null block aside, concurrency × ceil(3000 / 16) blocks run.
    pool = on["prefix_pool"]
    assert pool["usable_blocks"] == on["blocks"] - 1
    assert pool["running_blocks"] == min(pool["usable_blocks"], on["concurrency"] * -(-3000 // 16))
    for result in (on, off):
        for key, entry in result["explain"].items():
            if key.startswith("prefix_pool."):
                _check(key, entry)


def test_serve_flag_reads_back() -> None:
    result = run_plan({"serve": "vllm serve meta-llama/Llama-3.1-8B-Instruct --no-enable-prefix-caching",
                       "gpu": {"name": "L40S"}}, with_levers=False)
    assert result["engine"]["enable_prefix_caching"] is False


@settings(max_examples=300, deadline=None)
@given(enabled=st.booleans(), blocks=st.integers(0, 10**7), null=st.booleans(), block_size=st.integers(1, 256),
       conc=st.integers(0, 10**5), live=st.integers(1, 10**6))
def test_the_pool_is_conserved(enabled: bool, blocks: int, null: bool, block_size: int, conc: int, live: int) -> None:
    pool = prefix_pool(enabled, blocks, null, block_size, conc, live)
    assert pool.running_blocks is not None and pool.retained_blocks is not None and pool.idle_blocks is not None
    assert pool.running_blocks + pool.retained_blocks + pool.idle_blocks == pool.usable_blocks
    assert min(pool.running_blocks, pool.retained_blocks, pool.idle_blocks) >= 0
    assert enabled or pool.retained_blocks == 0
    share = pool.retention_share
    assert share is None or 0 <= share <= 1
