"""Issue 17 items 17 and 22 in a real browser.

Item 22: every page family logs no console error — home, plan, a plan from an imported log
(tests/data/vllm-logs/18, four RTX 3090 ranks), a plan from nvidia-smi (tests/data/nvidia-smi),
a saved plan, compare, import, deployments and their history, a ledger and a diff, the simulator,
sizing and the API docs — including a 422 fragment on plans from a log and from nvidia-smi,
whose form has no GPU fields (htmx logged "oobErrorNoTarget" for the `#err-*` slots it lacked);
the chart toolbar has no cloud button; releasing a slider adds one history entry (a drag or a
run of key presses replaces it), so Back undoes the what-if.

Item 17: "Edit as a what-if" then "Save as a new version" saves a new version of the saved plan,
with no address to paste, and both pages list each other.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..server import running_server

pytestmark = pytest.mark.e2e
DATA = Path(__file__).resolve().parents[1] / "data"
LOG18 = DATA / "vllm-logs" / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log"
SMI = DATA / "nvidia-smi" / "table-r550-4gpu.txt"


@pytest.fixture(scope="module")
def clean_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("kvledger-pages-clean-e2e")
    with running_server({"KVLEDGER_DATA_DIR": str(data), "KVLEDGER_DEMO_DATA": "1"}, data / "server.log",
                        ready="/d.json") as url:
        yield url


class Console:
    """Every console error and uncaught page error of one browser context, with the page it came from."""

    def __init__(self, browser: Any, base_url: str) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=base_url)
        self.page = self.context.new_page()
        self.page.set_default_timeout(45_000)
        self.errors: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"{self.page.url}: {exc}"))

    def _console(self, message: Any) -> None:
        # Chromium itself logs every 4xx answer ("Failed to load resource: … 422"): a 422 is the
        # page's answer to the invalid value the test types, shown inline; anything else counts.
        expected_422 = message.text.startswith("Failed to load resource") and "422" in message.text
        if message.type == "error" and not expected_422:
            self.errors.append(f"{self.page.url}: {message.text}")

    def open(self, path: str, ready: str = "main") -> Any:
        self.page.goto(path)
        self.page.wait_for_selector(ready, state="attached")
        return self.page


def _plan_from_import(page: Any) -> None:
    page.goto("/import")
    page.fill("#log-text", LOG18.read_text(encoding="utf-8"))
    page.click("form[action='/import'] button[type=submit]")
    page.click("text=Make a plan from this run")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")


def _plan_from_smi(page: Any) -> None:
    page.goto("/")
    page.fill("#home-smi", SMI.read_text(encoding="utf-8"))
    page.select_option("#home-smi-model", "llama-3.1-8b")
    page.click("#start-smi button[type=submit]")
    page.wait_for_url("**/plan?*")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")


def _bad_value_shows_inline(page: Any) -> None:
    """A 422 fragment: an unreadable operating reserve shows its error inline, then the plan recovers."""
    page.fill("#f-reserve", "lots")
    page.wait_for_function("() => document.querySelector('#err-reserve').textContent.includes('lots')")
    page.fill("#f-reserve", "")
    page.wait_for_function("() => document.querySelector('#err-reserve').textContent.trim() === ''")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")


def test_no_page_logs_a_console_error(browser: Any, clean_server: str) -> None:
    c = Console(browser, clean_server)
    c.open("/")
    c.open("/plan?model=llama-3.1-8b", "#chart-pool[data-drawn]")
    _bad_value_shows_inline(c.page)
    _plan_from_import(c.page)
    _bad_value_shows_inline(c.page)
    _plan_from_smi(c.page)
    _bad_value_shows_inline(c.page)
    page = c.open("/p")
    saved = page.locator("main a[href^='/p/']").first.get_attribute("href")
    c.open(saved, "#chart-pool[data-drawn]")
    c.open(f"/compare?a={saved}&b=/plan?model=llama-3.1-8b", "main")
    c.open("/import")
    c.open("/d")
    page = c.open("/d/demo-3090-box", "#chart-history[data-drawn]")
    ledger = page.locator("#ledger-list a[href^='/l/']").first.get_attribute("href")
    c.open(ledger, "#ledger-ranks")
    page = c.open("/d/demo-3090-box", "#changes")
    page.click("#changes a:has-text('diff with')")
    page.wait_for_selector("#diff-rows")
    c.open("/sim", "#sim-form")
    c.open("/size", "main")
    c.open("/docs", "#swagger-ui .information-container")
    c.context.close()
    assert c.errors == []


def test_the_chart_toolbar_has_no_cloud_button(browser: Any, clean_server: str) -> None:
    c = Console(browser, clean_server)
    page = c.open("/plan?model=llama-3.1-8b", "#chart-levers[data-drawn]")  # a plotly chart (the pool chart is SVG)
    page.hover("#chart-levers")
    page.wait_for_selector("#chart-levers .modebar-btn", state="attached")
    titles = page.eval_on_selector_all("#chart-levers .modebar-btn",
                                       "els => els.map(e => e.getAttribute('data-title'))")
    assert titles and any("png" in (t or "").lower() for t in titles)  # the toolbar is there
    assert not [t for t in titles if re.search(r"cloud|chart studio|share|edit", t or "", re.I)]
    c.context.close()
    assert c.errors == []


def test_releasing_a_slider_adds_one_history_entry_and_back_undoes_it(browser: Any, clean_server: str) -> None:
    c = Console(browser, clean_server)
    page = c.open("/plan?model=llama-3.1-8b&tp=1", "#chart-pool[data-drawn]")
    opened, tokens = page.url, page.inner_text("#adm-tokens")
    length = page.evaluate("() => history.length")
    page.focus("#f-util")
    for _ in range(3):  # three presses in a row: one what-if, one entry
        page.keyboard.press("ArrowLeft")
    page.wait_for_url("**util=0.89*")
    page.wait_for_function("n => history.length === n + 1", arg=length)
    page.wait_for_function("t => document.querySelector('#adm-tokens').textContent.trim() !== t", arg=tokens)

    # a drag: the pointer moves the thumb through many values and is released once
    box = page.locator("#f-util").bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.5, y)
    page.mouse.down()
    for step in range(1, 8):
        page.mouse.move(box["x"] + box["width"] * (0.5 - step * 0.03), y)
    page.mouse.up()
    page.wait_for_function("n => history.length === n + 2", arg=length)
    dragged = page.url
    assert dragged != opened and "util=0.89" not in dragged

    page.go_back()
    page.wait_for_url("**util=0.89*")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert page.input_value("#f-util") == "0.89"
    page.go_back()
    page.wait_for_url(opened)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert page.inner_text("#adm-tokens") == tokens and page.input_value("#f-util") == "0.92"
    c.context.close()
    assert c.errors == []


def test_edit_as_a_what_if_then_save_makes_a_linked_version(browser: Any, clean_server: str) -> None:
    c = Console(browser, clean_server)
    page = c.open("/plan?model=llama-3.1-8b&tp=1", "#chart-pool[data-drawn]")
    with page.expect_navigation():
        page.click("#save-plan button")
    page.wait_for_url("**/p/*")
    original = page.url.split("/p/", 1)[1]
    title = page.inner_text("h1")

    page.click("#edit-whatif")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert f"from={original}" in page.url
    assert page.inner_text("#save-plan button") == "Save as a new version"
    page.focus("#f-util")
    page.keyboard.press("ArrowLeft")
    page.wait_for_url("**util=0.91*")
    page.wait_for_function("() => document.querySelector('#save-plan input[name=plan]').value.includes('util=0.91')")
    assert f"from={original}" in page.url  # a slider tick keeps what the what-if edits
    with page.expect_navigation():
        page.click("#save-plan button")
    page.wait_for_url("**/p/*")
    new = page.url.split("/p/", 1)[1]
    assert new != original and page.inner_text("h1") == title  # a new version keeps its plan's title
    versions = page.inner_text("#versions")
    assert page.locator(f"#versions a[href='/p/{original}']").count() == 1 and "(this version)" in versions
    assert "0.91" in page.inner_text("#flags-text")

    page.goto(f"/p/{original}")
    page.wait_for_selector("#versions")
    assert page.locator(f"main a[href='/p/{new}']").count() >= 1  # the original lists its new version
    c.context.close()
    assert c.errors == []
