"""In Chromium: a plan URL that gives its PP but no TP opens at the smallest TP that starts at that
PP and says so (Llama-3.1-70B on H100 at PP2 opened at TP4 × PP2, 8 GPUs, the TP taken from the
TP1-based choice's TP4 × PP1, where TP2 × PP2 starts); and a PP1 given alone stays in the page's
address where the address without it says another "opened at" (the page was redirected there)."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e

URL = "/plan?model=llama-3.1-70b&pp=2"
SAVE_PLAN = "#save-plan input[name=plan]"


def test_a_pp_without_a_tp_opens_at_the_smallest_tp_that_starts(page: Any) -> None:
    page.goto(URL)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    note = page.inner_text("#layout-choice")
    assert note.startswith("opened at TP2 × PP2: the smallest TP that starts at the URL's PP2 on H100 80GB"), note
    assert note.endswith("(TP1 × PP2 does not); set TP to change it"), note
    assert page.input_value("#f-tp") == "2" and page.input_value("#f-pp") == "2"
    assert page.locator("#not-starting").count() == 0
    assert page.inner_text('[data-kpi="starts"] .value').strip() == "yes"
    assert page.input_value(SAVE_PLAN) == URL  # the chosen TP stays implicit

    tokens = page.inner_text("#adm-tokens")
    page.focus("#f-util")
    page.keyboard.press("ArrowRight")  # the form now states the TP it shows: the URL keeps it
    page.wait_for_url("**/plan?model=llama-3.1-70b&pp=2&tp=2&util=0.93")
    page.wait_for_function(PLAN_IDLE)
    page.wait_for_function("before => document.querySelector('#adm-tokens').textContent !== before", arg=tokens)
    assert page.locator("#not-starting").count() == 0


def test_a_pp1_alone_keeps_its_note_at_its_address(page: Any) -> None:
    page.goto("/plan?model=llama-3.1-70b&pp=1")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    # a page whose address is not its canonical URL is redirected there: it was /plan?model=llama-3.1-70b
    assert page.url.endswith("/plan?model=llama-3.1-70b&pp=1"), page.url
    note = page.inner_text("#layout-choice")
    assert note.startswith("opened at TP4: the smallest TP that starts at the URL's PP1 on H100 80GB"), note
    address = page.input_value(SAVE_PLAN)
    assert address == "/plan?model=llama-3.1-70b&pp=1"  # dropped, it said "the smallest layout that starts"
    page.goto(address)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert page.inner_text("#layout-choice") == note
