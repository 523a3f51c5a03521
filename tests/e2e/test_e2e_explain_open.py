"""The admission formulas on a slider tick (issue 14): a tick's fragment carries the formula body of
the rows open now only; a closed row's body is fetched when it is opened, so an opened row always
shows the current what-if's workings. Checked against the whole page of the same address (rendered
on the server with every body, no fetch), row by row."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e

PLAN = "/plan?model=llama-3.1-70b&tp=4"
ROWS = "#admission details[data-item]"
BODIES = """() => Object.fromEntries(Array.from(document.querySelectorAll("#admission details[data-item]"),
  d => [d.dataset.item, d.querySelector(".explain-body").textContent.replace(/\\s+/g, " ").trim()]))"""
FILLED = "() => !document.querySelector('#admission details[open] .explain-body[data-deferred]')"


def _tick(page: Any, value: str) -> None:
    page.evaluate("v => { const e = document.getElementById('f-util'); e.value = v; "
                  "e.dispatchEvent(new Event('input', {bubbles: true})); }", value)
    page.wait_for_url(f"**util={value}**")
    page.wait_for_function(PLAN_IDLE)


def _whole_page(page: Any) -> dict[str, str]:
    other = page.context.new_page()
    try:
        other.goto(page.url)
        bodies: dict[str, str] = other.evaluate(BODIES)
        assert other.locator(".explain-body[data-deferred]").count() == 0  # a page load sends every body
        return bodies
    finally:
        other.close()


def test_formulas_opened_after_three_ticks_show_the_current_what_if(page: Any) -> None:
    page.goto(PLAN)
    first = page.evaluate(BODIES)
    for value in ("0.81", "0.83", "0.86"):
        _tick(page, value)
    # closed rows were not sent on the ticks
    assert page.locator(f"{ROWS} .explain-body[data-deferred]").count() == page.locator(ROWS).count()
    page.evaluate(f"() => document.querySelectorAll('{ROWS} summary').forEach(s => s.click())")
    page.wait_for_function(FILLED)
    shown = page.evaluate(BODIES)
    expected = _whole_page(page)
    assert shown == expected
    assert shown != first  # the what-if moved the workings (else the test could not fail)


def test_an_open_row_follows_the_ticks(page: Any) -> None:
    page.goto(PLAN)
    page.locator("#admission details[data-item=blocks] summary").click()
    for value in ("0.84", "0.79", "0.88"):
        _tick(page, value)
        page.wait_for_function(FILLED)
        assert page.locator("#admission details[data-item=blocks]").evaluate("d => d.open")  # a tick keeps it open
        row = page.locator("#admission details[data-item=blocks] .explain-body")
        assert row.get_attribute("data-deferred") is None  # sent with the tick, not fetched
        assert page.evaluate(BODIES)["blocks"] == _whole_page(page)["blocks"]
    # the other rows stayed closed and unsent
    assert page.locator(f"{ROWS}:not([open]) .explain-body[data-deferred]").count() == page.locator(ROWS).count() - 1
