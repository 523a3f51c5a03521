"""In Chromium: the simulator's own default, seed 002's card (1,783 blocks of 16 tokens), peaks at 16
and recommends 12 — "The operating point to choose is not the peak. It is a step or two below it —
twelve, here". It recommended the peak (16) itself while the page said "Run a step or two below the
peak". A ramp whose throughput still rises at its top level has no cliff in it, and says so."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e


def _run(page: Any, ramp: str | None = None) -> tuple[str, str]:
    page.goto("/sim")
    if ramp is not None:
        page.fill("#f-ramp", ramp)
    page.click("#sim-run")
    page.wait_for_url("**/sim/jobs/*")
    page.wait_for_selector("#sim-job[data-state=done]", timeout=300_000)  # a condition wait, not a speed check
    return page.inner_text("#kpi-peak"), page.inner_text("#kpi-recommended")


def test_seed002_default_recommends_a_step_below_the_peak(page: Any) -> None:
    assert page.goto("/sim") and page.input_value("#f-ramp") == "1, 2, 4, 8, 12, 16, 24, 32, 48, 64"
    assert _run(page) == ("16", "12")
    assert "a step below the peak" in page.inner_text("main")


def test_a_ramp_that_never_reaches_the_cliff_says_so(page: Any) -> None:
    assert _run(page, "1, 2, 4") == ("4", "4")
    assert "the cliff lies beyond it" in page.inner_text("main")
