"""The "Disable MLA" box over a base, in Chromium. A `vllm serve` command with the engine's
environment in front (`VLLM_MLA_DISABLE=1 vllm serve …`) opened unticked, on the latent-MLA plan:
the reader dropped the assignments. Now the plan's engine variables fill the engine, and unticking
the box turns it off in a URL that reopens the same plan; over a saved plan it did already (a guard).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e

SAME = {"Sec-Fetch-Site": "same-origin"}


def _ready(page: Any) -> None:
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_function(PLAN_IDLE)


def _plan(page: Any) -> Any:
    return page.request.get(page.url.replace("/plan?", "/plan.json?", 1)).json()


def test_unticking_disable_mla_over_a_serve_command(page: Any) -> None:
    page.goto("/")
    made = page.request.post("/start/serve", headers=SAME, max_redirects=0, form={
        "command": "VLLM_MLA_DISABLE=1 vllm serve deepseek-ai/DeepSeek-V2-Lite --max-model-len 32768",
        "gpu": "H100 80GB"})
    assert made.status == 303, made.text()
    page.goto(made.headers["location"])
    _ready(page)
    assert page.is_checked("#f-mla_off") and page.inner_text("#flags-text").startswith("VLLM_MLA_DISABLE=1")
    full = page.inner_text("#adm-tokens")
    page.uncheck("#f-mla_off")
    page.wait_for_url("**mla_off=false**")
    _ready(page)
    assert not page.is_checked("#f-mla_off") and "VLLM_MLA_DISABLE" not in page.inner_text("#flags-text")
    canonical = page.url
    page.reload()
    _ready(page)
    assert not page.is_checked("#f-mla_off")
    latent = page.inner_text("#adm-tokens")
    assert _plan(page)["engine"]["mla_disable"] is False
    assert int(latent.replace(",", "")) > int(full.replace(",", ""))  # the latent cache holds more tokens
    page.goto(canonical)
    _ready(page)
    assert page.inner_text("#adm-tokens") == latent


def _edit(page: Any, doc: dict[str, Any]) -> None:
    """Save `doc` and open it by "Edit as a what-if" (its enforce_eager, no knob, keeps it a base)."""
    saved = page.request.post("/api/v1/plans", data=json.dumps(doc),
                              headers={**SAME, "Content-Type": "application/json"})
    assert saved.status == 201, saved.text()
    page.goto(saved.json()["url"])
    page.click("#edit-whatif")
    _ready(page)
    assert "base=" in page.url


def test_unticking_disable_mla_over_a_saved_plan(page: Any) -> None:
    _edit(page, {"model": {"catalogue": "deepseek-v2-lite"}, "gpu": {"name": "H100 80GB"}, "title": "full K/V",
                 "engine": {"mla_disable": True, "max_model_len": 32768, "enforce_eager": True}})
    assert page.is_checked("#f-mla_off")
    assert page.inner_text("#flags-text").startswith("VLLM_MLA_DISABLE=1")
    page.uncheck("#f-mla_off")
    page.wait_for_url("**mla_off=false**")
    _ready(page)
    assert not page.is_checked("#f-mla_off")
    assert "VLLM_MLA_DISABLE" not in page.inner_text("#flags-text")
    page.reload()
    _ready(page)
    assert not page.is_checked("#f-mla_off")
    assert _plan(page)["engine"]["mla_disable"] is False
