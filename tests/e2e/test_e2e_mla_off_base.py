"""The "Disable MLA" box over a base, in Chromium. A `vllm serve` command with the engine's
environment in front (`VLLM_MLA_DISABLE=1 vllm serve …`) opened unticked, on the latent-MLA plan:
the reader dropped the assignments. Now the plan's engine variables fill the engine, and unticking
the box turns it off in a URL that reopens the same plan; over a saved plan it did already (a guard).
"""

from __future__ import annotations

from typing import Any

import pytest

from .plan_page import edit_saved, ready, twin

pytestmark = pytest.mark.e2e

SAME = {"Sec-Fetch-Site": "same-origin"}


def test_unticking_disable_mla_over_a_serve_command(page: Any) -> None:
    page.goto("/")
    made = page.request.post("/start/serve", headers=SAME, max_redirects=0, form={
        "command": "VLLM_MLA_DISABLE=1 vllm serve deepseek-ai/DeepSeek-V2-Lite --max-model-len 32768",
        "gpu": "H100 80GB"})
    assert made.status == 303, made.text()
    page.goto(made.headers["location"])
    ready(page)
    assert page.is_checked("#f-mla_off") and page.inner_text("#flags-text").startswith("VLLM_MLA_DISABLE=1")
    full = page.inner_text("#adm-tokens")
    page.uncheck("#f-mla_off")
    page.wait_for_url("**mla_off=false**")
    ready(page)
    assert not page.is_checked("#f-mla_off") and "VLLM_MLA_DISABLE" not in page.inner_text("#flags-text")
    canonical = page.url
    page.reload()
    ready(page)
    assert not page.is_checked("#f-mla_off")
    latent = page.inner_text("#adm-tokens")
    assert twin(page)["engine"]["mla_disable"] is False
    assert int(latent.replace(",", "")) > int(full.replace(",", ""))  # the latent cache holds more tokens
    page.goto(canonical)
    ready(page)
    assert page.inner_text("#adm-tokens") == latent


def test_unticking_disable_mla_over_a_saved_plan(page: Any) -> None:
    edit_saved(page, {"model": {"catalogue": "deepseek-v2-lite"}, "gpu": {"name": "H100 80GB"}, "title": "full K/V",
                 "engine": {"mla_disable": True, "max_model_len": 32768, "enforce_eager": True}})
    assert page.is_checked("#f-mla_off")
    assert page.inner_text("#flags-text").startswith("VLLM_MLA_DISABLE=1")
    page.uncheck("#f-mla_off")
    page.wait_for_url("**mla_off=false**")
    ready(page)
    assert not page.is_checked("#f-mla_off")
    assert "VLLM_MLA_DISABLE" not in page.inner_text("#flags-text")
    page.reload()
    ready(page)
    assert not page.is_checked("#f-mla_off")
    assert twin(page)["engine"]["mla_disable"] is False
