"""The "a larger card" lever of a plan that does not start, in Chromium: Llama-3.1-8B on an L4 with
20 GiB free at start (another process holds the rest). Before, its link carried the new card's free
memory as a raw byte count (gpu_free=40082782290), which the form's "Free at start" field then
showed. Now the memory in use is carried to the new card rounded to whole MiB (what the form's size
text holds exactly), the link says gpu_free=NMiB, and it opens the plan the lever priced: it starts
with the tokens the lever row states, its field showing the same text."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e


def test_larger_card_link_is_in_the_forms_unit_and_reopens_the_priced_plan(page: Any) -> None:
    page.goto("/plan?model=llama-3.1-8b&gpu=L4+24GB&gpu_free=20GiB")
    page.wait_for_selector("#start-levers")
    row = page.locator("#start-levers tr[data-knob=gpu]")
    assert row.get_attribute("data-starts") == "yes"
    tokens = row.locator("td").nth(1).inner_text().split("starts", 1)[1].split("tokens")[0].strip()
    href = row.locator("a").get_attribute("href")
    free = dict(parse_qsl(urlsplit(href).query))["gpu_free"]
    assert free.endswith("MiB") and free[:-3].isdigit(), href
    row.locator("a").click()
    page.wait_for_url("**gpu=A100**")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_function(PLAN_IDLE)
    assert page.query_selector("#not-starting") is None
    assert page.input_value("#f-gpu_free") == free
    assert dict(parse_qsl(urlsplit(page.url).query))["gpu_free"] == free
    plan = page.request.get(page.url.replace("/plan?", "/plan.json?", 1)).json()
    assert f"{plan['tokens']:,}" == tokens
