"""The simulator in a real browser: submit the form, watch htmx poll the progress to done, see the
charts with the peak and the recommended level marked; cancel a long run; screenshot."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

CHART_SHAPES = "id => JSON.stringify(document.getElementById(id).layout.shapes.map(s => s.x0))"
CHART_LABELS = "id => document.getElementById(id).layout.annotations.map(a => a.text)"


def _progress_until_done(page: Any, timeout_s: float = 300.0) -> list[tuple[str, float]]:
    """(state, progress) as the page shows them, sampled until the job block says it is finished."""
    seen: list[tuple[str, float]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sample = page.evaluate(
            "() => { const s = document.getElementById('sim-job'), p = document.getElementById('sim-progress');"
            " return s && p ? [s.dataset.state, parseFloat(p.value)] : null; }"
        )
        if sample is not None:
            seen.append((sample[0], sample[1]))
            if sample[0] in ("done", "failed", "cancelled"):
                return seen
        page.wait_for_timeout(50)
    raise AssertionError(f"the job did not finish: {seen[-3:]}")


def test_run_watch_progress_and_see_the_marked_peak(page: Any, artifacts: Path) -> None:
    page.goto("/sim")
    page.fill("#f-requests_per_level", "6000")
    page.fill("#f-ramp", "1, 4, 8, 12, 16, 24, 32, 48")
    page.click("#sim-run")
    page.wait_for_url("**/sim/jobs/*")
    url = page.url

    seen = _progress_until_done(page)
    assert seen[-1][0] == "done" and seen[-1][1] == 1.0
    assert any(state in ("queued", "running") for state, _ in seen), "progress was never shown before done"
    values = [value for _, value in seen]
    assert values == sorted(values)
    assert page.url == url  # htmx swapped the job block; no navigation

    page.wait_for_selector("#chart-throughput[data-drawn]", state="attached")
    for name in ("kv_usage", "hit_rate", "preemptions"):
        page.wait_for_selector(f"#chart-{name}[data-drawn]", state="attached")
    peak = int(page.inner_text("#kpi-peak"))
    recommended = page.inner_text("#kpi-recommended")
    xs = page.evaluate(CHART_SHAPES, "chart-throughput")
    assert xs.startswith(f"[{peak}")
    labels = page.evaluate(CHART_LABELS, "chart-throughput")
    assert any(f"peak {peak}" in text or f"recommended {peak}" in text for text in labels)
    if recommended != "none":
        assert any(recommended in text for text in labels)
    assert page.locator("#sim-levels tbody tr").count() == 8
    assert page.locator("#sim-levels tr.binding td").first.inner_text() == str(peak)
    assert page.locator(".js-plotly-plot .shapelayer path").count() >= 1
    page.screenshot(path=str(artifacts / "sim-job.png"), full_page=True)


def test_cancel_a_long_run(page: Any) -> None:
    page.goto("/sim")
    page.fill("#f-requests_per_level", "20000")
    page.fill("#f-ramp", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10")
    page.click("#sim-run")
    page.wait_for_url("**/sim/jobs/*")
    page.wait_for_function("() => parseFloat(document.getElementById('sim-progress').value) > 0")
    page.click("#sim-cancel")
    page.wait_for_selector("#sim-job[data-state=cancelled]", timeout=45_000)
    assert page.locator("#sim-cancel").count() == 0
    assert page.locator("#chart-throughput").count() == 0


def test_plan_query_form_shows_the_plan_pool(page: Any, artifacts: Path) -> None:
    page.goto("/sim?model=llama-3.1-70b&tp=4")
    assert "blocks of" in page.inner_text("#pool-summary")
    assert page.locator("#f-pool_blocks").count() == 0
    assert page.locator("input[type=hidden][name=tp]").get_attribute("value") == "4"
    assert "(the plan's)" in (page.get_attribute("#f-sched_max_num_seqs", "placeholder") or "")
    page.screenshot(path=str(artifacts / "sim-form-plan.png"), full_page=True)


def test_pasted_markup_stays_inert_text(page: Any) -> None:
    payload = "<img src=x onerror=window.__xss=1>"
    page.goto("/sim")
    page.fill("#f-prompt_lengths", payload)
    page.fill("#f-ramp", payload)
    page.click("#sim-run")
    page.wait_for_selector("#sim-error")
    assert page.input_value("#f-prompt_lengths") == payload
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("#main img").count() == 0
