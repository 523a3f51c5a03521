"""Issue 15's what-ifs in a real browser: LoRA slots and a speculative draft move the ledger and the URL."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e

PLAN = "/plan?model=llama-3.1-8b"


def _open(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")


def test_lora_slots_add_a_row_and_stay_in_the_url(page: Any) -> None:
    _open(page, PLAN)
    kv_before = page.inner_text("#adm-kv_bytes")
    page.select_option("#f-lora_rank", "64")
    page.wait_for_url("**lora_rank=64**")
    page.fill("#f-loras", "4")
    page.wait_for_url("**loras=4**")
    page.wait_for_function("before => document.querySelector('#adm-kv_bytes').textContent.trim() !== before",
                           arg=kv_before.strip())  # fmt: skip
    page.wait_for_function("() => [...document.querySelectorAll('th')].some(th => th.textContent.trim() === 'LoRA')")
    page.reload()
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert page.input_value("#f-loras") == "4" and page.input_value("#f-lora_rank") == "64"


def test_a_draft_model_shows_its_bytes_per_token(page: Any) -> None:
    _open(page, PLAN)
    page.fill("#f-spec_tokens", "3")  # alone: an inline error on the method (none yet), the form stays
    page.wait_for_function("() => document.querySelector('#err-spec').textContent.includes('required')")
    page.select_option("#f-spec_model", "llama-3.2-1b")
    page.select_option("#f-spec", "draft_model")
    page.wait_for_url("**spec=draft_model**")
    page.wait_for_selector("#adm-draft_kv_bytes_per_token")
    assert "32,768" in page.inner_text("#adm-draft_kv_bytes_per_token")
