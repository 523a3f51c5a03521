"""An operating reserve larger than the KV room offers no budget to copy, in Chromium.

/plan?model=llama-3.1-8b&reserve=79GiB (H100 80GB, 55.00 GiB of KV room) showed "Uniform manual
budget: --kv-cache-memory-bytes 0" with a Copy button and "0.00 GiB on every rank (0 blocks …)":
vLLM given 0 bytes has no memory for cache blocks. The panel now says there is none and why.
"""

from __future__ import annotations

from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e


def test_no_zero_byte_budget_to_copy(page: Any) -> None:
    page.goto("/plan?model=llama-3.1-8b&gpu=H100+80GB&reserve=79GiB")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_function(PLAN_IDLE)
    assert page.locator("#uniform-flag").count() == 0
    said = page.inner_text("#uniform-none")
    assert "No uniform budget to deploy" in said
    assert "the operating reserve (79.00 GiB) leaves rank TP0 no KV memory: its KV room is 55.00 GiB" in said
    assert "--kv-cache-memory-bytes 0" not in page.inner_text("main")
    twin = page.request.get(page.url.replace("/plan?", "/plan.json?", 1)).json()
    assert twin["uniform_budget"]["in_flags"] is False
    assert "leaves rank TP0 no KV memory" in twin["uniform_budget"]["in_flags_reason"]

    page.goto("/plan?model=llama-3.1-8b&gpu=H100+80GB&reserve=5GiB")  # a reserve the room holds: a budget
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert page.inner_text("#uniform-flag") == "--kv-cache-memory-bytes 53682896896"
