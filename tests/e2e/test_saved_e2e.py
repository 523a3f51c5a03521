"""Saved plans and deployment history in a real browser: save a plan, open its link in a fresh
browser context and see the same numbers; the demo deployment's history chart and a ledger
diff render (screenshots in tests/artifacts/)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..server import running_server

pytestmark = pytest.mark.e2e

@pytest.fixture(scope="module")
def saved_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`kvledger serve`'s start-up (migrate, seed the demo data, serve) on a fresh data folder."""
    data = tmp_path_factory.mktemp("kvledger-saved-e2e")
    with running_server({"KVLEDGER_DATA_DIR": str(data), "KVLEDGER_DEMO_DATA": "1"}, data / "server.log",
                        ready="/d.json") as url:
        yield url


def _page(browser: Any, base_url: str, errors: list[str]) -> tuple[Any, Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=base_url)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(45_000)  # a condition wait, not a speed check: generous for loaded machines
    return context, page


def _kpis(page: Any) -> dict[str, str]:
    values: dict[str, str] = page.evaluate(
        "() => Object.fromEntries([...document.querySelectorAll('[data-kpi]')]"
        ".map(el => [el.dataset.kpi, el.querySelector('.value').textContent.trim()]))"
    )
    return values


POOL_KV = "() => JSON.stringify(Array.from(document.querySelectorAll('#chart-pool .seg title'), t => t.textContent))"


def test_save_a_plan_and_open_its_link_in_a_fresh_browser(browser: Any, saved_server: str, artifacts: Path) -> None:
    errors: list[str] = []
    context, page = _page(browser, saved_server, errors)
    page.goto("/p")
    page.fill("#f-plan", "/plan?model=llama-3.1-70b&tp=4&util=0.88")
    page.fill("#f-title", "Llama 70B at 0.88")
    page.click("#save-plan-form button[type=submit]")
    page.wait_for_url("**/p/*")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    link = page.url
    numbers, chart = _kpis(page), page.evaluate(POOL_KV)
    assert page.inner_text("#recomputed").startswith("Recomputed with today's core")
    page.screenshot(path=str(artifacts / "saved-plan.png"), full_page=True)
    context.close()

    fresh, other = _page(browser, saved_server, errors)  # no cookies, no history: a colleague
    other.goto(link)
    other.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert _kpis(other) == numbers and other.evaluate(POOL_KV) == chart
    with urllib.request.urlopen(link + ".json") as response:
        saved = json.loads(response.read())
    assert numbers["tokens"] == f"{saved['tokens']:,}" and saved["engine"]["gpu_memory_utilization"] == 0.88
    other.click("#edit-whatif")
    other.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert "/plan?" in other.url and other.inner_text("#adm-tokens") == numbers["tokens"]
    fresh.close()
    assert errors == []


def test_history_chart_and_ledger_diff_render(browser: Any, saved_server: str, artifacts: Path) -> None:
    errors: list[str] = []
    context, page = _page(browser, saved_server, errors)
    page.goto("/d")
    page.click("text=Demo (illustrative): RTX 3090 boxes across vLLM upgrades")
    page.wait_for_selector("#chart-history[data-drawn]", state="attached")
    traces = page.evaluate("() => document.getElementById('chart-history').data.map(t => t.name)")
    assert "rank TP0" in traces and len(traces) >= 4
    assert "CUDA-graph memory now subtracted" in page.inner_text("#chart-history")
    page.screenshot(path=str(artifacts / "saved-history.png"), full_page=True)

    page.click("#changes a:has-text('diff with')")
    page.wait_for_selector("#diff-rows")
    assert page.locator("#diff-rows tbody tr").count() >= 4 * 11
    assert "CUDA-graph memory now subtracted from the budget" in page.inner_text("#readings")
    page.screenshot(path=str(artifacts / "saved-ledger-diff.png"), full_page=True)
    context.close()
    assert errors == []


def test_the_listed_checkbox_decides_whether_the_list_shows_a_plan(browser: Any, saved_server: str) -> None:
    """Listing is opt-in: the save form's "listed" checkbox starts unchecked; a plan saved without
    it opens by its link but is not on /p; one saved with it is."""
    errors: list[str] = []
    context, page = _page(browser, saved_server, errors)
    links = {}
    for title, listed in (("quiet plan e2e", False), ("listed plan e2e", True)):
        page.goto("/p")
        assert page.is_checked("#f-listed") is False  # the default: unlisted
        page.fill("#f-plan", "/plan?model=llama-3.1-8b&tp=1")
        page.fill("#f-title", title)
        if listed:
            page.check("#f-listed")
        page.click("#save-plan-form button[type=submit]")
        page.wait_for_url("**/p/*")
        links[title] = page.url
    page.goto("/p")
    listing = page.inner_text("#saved-list")
    assert "listed plan e2e" in listing and "quiet plan e2e" not in listing
    page.goto(links["quiet plan e2e"])  # unlisted is not private: its link opens it
    assert page.inner_text("h1") == "quiet plan e2e"
    page.goto("/plan?model=llama-3.1-8b")  # the plan page's own save form has the checkbox too
    assert page.is_checked("#save-plan input[name=listed]") is False
    context.close()
    assert errors == []
