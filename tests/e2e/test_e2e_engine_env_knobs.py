"""The "Disable MLA" box (mla_off, VLLM_MLA_DISABLE) in a real browser: ticking it recomputes the
plan in place, the address and the serve command follow, and unticking it goes back.

Unticking is the second toggle of the same box: htmx 2's `input changed` trigger compares the
box's value, which ticking does not change, so without app.js asking on a checkbox toggle the
second one never reached the server (the page kept the full-K/V plan and its address).
"""

from __future__ import annotations

from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e

# max_model_len: at its own 163,840 the full-K/V cache holds no whole request (no serve command)
PLAN = "/plan?max_model_len=32768&model=deepseek-v2-lite"
TICKED = "/plan?max_model_len=32768&mla_off=true&model=deepseek-v2-lite"
CHANGED = "before => document.querySelector('#adm-tokens').textContent.trim() !== before"


def _state(page: Any) -> tuple[str, str, bool]:
    tokens: str = page.inner_text("#adm-tokens").strip()
    flags: str = page.inner_text("#flags-text")
    checked: bool = page.is_checked("#f-mla_off")
    return tokens, flags, checked


def test_ticking_disable_mla_recomputes_the_plan_and_the_url(page: Any) -> None:
    page.goto(PLAN)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    latent = _state(page)
    assert latent[2] is False and "VLLM_MLA_DISABLE" not in latent[1]

    page.check("#f-mla_off")
    page.wait_for_url(f"**{TICKED}")
    page.wait_for_function(CHANGED, arg=latent[0])
    page.wait_for_function(PLAN_IDLE)
    full = _state(page)
    assert full[2] is True and full[1].startswith("VLLM_MLA_DISABLE=1")
    assert int(full[0].replace(",", "")) < int(latent[0].replace(",", ""))  # full K/V: fewer tokens fit

    page.uncheck("#f-mla_off")
    page.wait_for_url(f"**{PLAN}")
    page.wait_for_function(CHANGED, arg=full[0])
    page.wait_for_function(PLAN_IDLE)
    assert _state(page) == latent

    page.goto(TICKED)  # the address alone gives the ticked plan
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert _state(page) == full
