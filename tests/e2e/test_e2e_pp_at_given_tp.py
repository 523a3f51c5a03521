"""In Chromium: a plan URL that gives its TP but no PP opens at the smallest PP that starts at that
TP and says so (stop 27's walk: Llama-3.1-70B on L40S 48GB at TP2 opened at TP2 × PP1, which does
not start, the PP taken from the TP1-based choice's TP8 × PP1)."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e

URL = "/plan?model=llama-3.1-70b&gpu=L40S+48GB&tp=2"


def test_a_tp_without_a_pp_opens_at_the_smallest_pp_that_starts(page: Any) -> None:
    page.goto(URL)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    note = page.inner_text("#layout-choice")
    assert note.startswith("opened at TP2 × PP4: the smallest PP that starts at the URL's TP2 on L40S 48GB"), note
    assert "(TP2, TP2 × PP2 do not); set PP to change it" in note
    assert page.input_value("#f-tp") == "2" and page.input_value("#f-pp") == "4"
    assert page.locator("#not-starting").count() == 0
    assert page.inner_text('[data-kpi="starts"] .value').strip() == "yes"

    tokens = page.inner_text("#adm-tokens")
    page.focus("#f-util")
    page.keyboard.press("ArrowRight")  # the form now states the PP it shows: the URL keeps it
    page.wait_for_url("**/plan?gpu=L40S+48GB&model=llama-3.1-70b&pp=4&tp=2&util=0.93")
    page.wait_for_function(PLAN_IDLE)
    page.wait_for_function("before => document.querySelector('#adm-tokens').textContent !== before", arg=tokens)
    assert page.locator("#not-starting").count() == 0
