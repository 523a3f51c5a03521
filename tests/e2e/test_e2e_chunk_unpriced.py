"""In Chromium: the home page's "Seed 000" example (a model given as 128 KiB per token, no shape) drew
a prefill-chunk lever of +2,944 tokens from an unsourced 0.09 MiB per batched token. Now the levers
offer only what the plan can price, and moving the chunk slider moves no token and says why."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e


def test_seed000_offers_no_unpriced_chunk_lever(page: Any) -> None:
    page.goto("/")
    with page.expect_navigation():
        page.click("a[href='/plan?base=seed000']")
    page.wait_for_selector("#chart-levers[data-drawn]", state="attached")
    knobs = page.eval_on_selector_all("#levers tr[data-knob], tr[data-knob]", "rs => rs.map(r => r.dataset.knob)")
    assert knobs == ["gpu_memory_utilization"]
    tokens = page.inner_text("#adm-tokens")
    assert tokens.replace(",", "").startswith("344064")
    page.fill("#f-mnbt", "4096")
    page.dispatch_event("#f-mnbt", "change")
    page.wait_for_url("**mnbt=4096**")
    page.wait_for_function(PLAN_IDLE)
    page.wait_for_function("() => document.body.innerText.includes('the activation row is not moved')")
    assert page.inner_text("#adm-tokens") == tokens
