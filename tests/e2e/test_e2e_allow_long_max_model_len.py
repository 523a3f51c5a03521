"""The "Allow long max model len" box (allow_long, VLLM_ALLOW_LONG_MAX_MODEL_LEN) in Chromium: with it
ticked a max_model_len above the model's derived length plans, with vLLM's warning in the notes and
the variable in the serve command; unticked, it is refused under its field with the way to plan it,
and ticking again plans it in place (Qwen3-14B states 40,960 positions).

Ticking the box on a freshly loaded refused page planned at util 0.55 and mnbt 33,024 (the address
became ...&mnbt=33024&...&util=0.55): its sliders had no plan to fill them, and a range input with no
value sits at its midpoint. They now hold vLLM's defaults (app.web.plan.form.error_form_values)."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e

REFUSED = "/plan?max_model_len=65536&model=qwen3-14b"
TICKED = "/plan?allow_long=true&max_model_len=65536&model=qwen3-14b"


def _slot(page: Any) -> str:
    text: str = page.inner_text("#err-max_model_len").strip()
    return text


def _refused(page: Any) -> str:
    page.wait_for_function("() => document.querySelector('#err-max_model_len').textContent.trim() !== ''")
    return _slot(page)


def _planned(page: Any) -> None:
    assert _slot(page) == ""
    flags = page.inner_text("#flags-text")
    assert flags.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1") and "--max-model-len 65536" in flags
    main = page.inner_text("main")
    assert "65,536 is more than the model's derived maximum length 40,960" in main
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which warns instead of refusing" in main


def test_unticking_and_ticking_allow_long_refuses_and_plans_the_length(page: Any) -> None:
    page.goto(TICKED)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert page.is_checked("#f-allow_long") is True
    _planned(page)

    page.uncheck("#f-allow_long")  # the refusal's address is what was asked (app.web.plan.form.asked_url)
    refusal = _refused(page)
    assert "derived maximum length 40,960" in refusal
    assert "tick 'Allow long max model len' on the plan page" in refusal
    page.wait_for_url(f"**{REFUSED}")

    page.check("#f-allow_long")
    page.wait_for_function("() => document.querySelector('#err-max_model_len').textContent.trim() === ''")
    page.wait_for_function(PLAN_IDLE)
    page.wait_for_url(f"**{TICKED}")
    _planned(page)

    page.goto(REFUSED)  # the address alone gives the refusal, the box unticked
    assert "tick 'Allow long max model len'" in _refused(page)
    assert page.is_checked("#f-allow_long") is False


def test_ticking_on_a_freshly_loaded_refused_page_plans_at_vllms_defaults(page: Any) -> None:
    page.goto(REFUSED)
    assert "derived maximum length 40,960" in _refused(page)
    page.check("#f-allow_long")
    page.wait_for_url(f"**{TICKED}")  # no util / mnbt pinned by the sliders' midpoints
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_function(PLAN_IDLE)
    _planned(page)
