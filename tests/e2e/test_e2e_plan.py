"""The plan page in a real browser: keyboard sliders, htmx swaps, charts, URL state, screenshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e

PLAN = "/plan?model=llama-3.1-70b&tp=4"
# the pool chart as drawn (server-side SVG): every segment's hover title, e.g. "rank TP0 · KV (usable): 16.45 GiB"
POOL_KV = ("() => JSON.stringify(Array.from(document.querySelectorAll('#chart-pool .seg title'), t => t.textContent)"
           ".filter(t => t.includes('KV (usable)')))")


def _open_plan(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")


def _tokens(page: Any) -> str:
    text: str = page.inner_text("#adm-tokens")
    return text


def test_keyboard_slider_recomputes_charts_and_url(page: Any) -> None:
    _open_plan(page, PLAN)
    tokens_before, chart_before = _tokens(page), page.evaluate(POOL_KV)
    assert page.input_value("#f-util") == "0.92"

    page.focus("#f-util")
    page.keyboard.press("ArrowRight")
    page.wait_for_url("**/plan?model=llama-3.1-70b&tp=4&util=0.93")
    page.wait_for_function("before => document.querySelector('#adm-tokens').textContent.trim() !== before",
                           arg=tokens_before)
    page.wait_for_function(f"before => ({POOL_KV})() !== before", arg=chart_before)
    assert page.inner_text("#out-util") == "0.93"
    assert page.evaluate("() => document.activeElement.id") == "f-util"

    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    page.wait_for_url("**/plan?model=llama-3.1-70b&tp=4&util=0.91")
    page.wait_for_function(PLAN_IDLE)
    tokens_after, chart_after = _tokens(page), page.evaluate(POOL_KV)
    assert tokens_after != tokens_before and chart_after != chart_before

    page.reload()
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert _tokens(page) == tokens_after
    assert page.evaluate(POOL_KV) == chart_after
    assert page.input_value("#f-util") == "0.91"


def test_history_is_not_flooded_by_slider_ticks(page: Any) -> None:
    _open_plan(page, PLAN)
    length = page.evaluate("() => history.length")
    page.focus("#f-util")
    # three ticks back to back: a gap of COMMIT_MS (700 ms, static/app.js) between two of them
    # would rightly commit an entry, and a fixed wait between them stretches past that under load
    for _ in range(3):
        page.keyboard.press("ArrowLeft")
    page.wait_for_url("**util=0.89")
    # the ticks replace the address; the what-if they end on is one entry (issue 17 item 22)
    page.wait_for_function("n => history.length === n + 1", arg=length)
    page.wait_for_timeout(1000)  # not a speed check: no further entry appears once it rests
    assert page.evaluate("() => history.length") == length + 1


def test_invalid_text_shows_inline_error_then_recovers(page: Any) -> None:
    _open_plan(page, PLAN)
    assert page.is_visible("#save-plan button")
    page.fill("#f-gpu", "lots")
    page.wait_for_function("() => document.querySelector('#err-gpu').textContent.trim() !== ''")
    assert "unknown GPU 'lots'" in page.inner_text("#err-gpu")
    assert not page.is_visible("#save-plan button")  # nothing valid to save until the field is fixed
    page.fill("#f-gpu", "40GiB")
    page.wait_for_url("**gpu=40GiB**")
    page.wait_for_function("() => document.querySelector('#err-gpu').textContent.trim() === ''")
    page.wait_for_selector("#adm-tokens")
    assert page.is_visible("#save-plan button")
    assert page.url.endswith(page.input_value("#save-plan input[name=plan]"))  # saves the plan now shown


def test_large_plan_aggregates_and_loads_levers(page: Any) -> None:
    page.goto("/plan?ranks=1024&tp=8")
    page.wait_for_selector("#chart-dist[data-drawn]", state="attached")
    page.wait_for_selector("#chart-levers[data-drawn]", state="attached")
    assert 1 <= page.locator("#chart-pool .column").count() <= 3


def test_copy_flags_button(page: Any) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    _open_plan(page, PLAN)
    page.click("button[data-copy='flags-text']")
    page.wait_for_selector("button.copied")


def test_reading_works_without_javascript(browser: Any, server_url: str) -> None:
    context = browser.new_context(java_script_enabled=False, base_url=server_url)
    page = context.new_page()
    page.goto(PLAN)
    assert page.inner_text("#adm-tokens")
    page.select_option("#f-kv_dtype", "fp8")
    page.click("button[type=submit]")
    page.wait_for_url("**/plan?kv_dtype=fp8&model=llama-3.1-70b&tp=4")
    assert page.inner_text("#adm-tokens")
    context.close()


@pytest.mark.parametrize(
    ("name", "url"),
    [("plan-1-rank", "/plan?model=llama-3.1-8b&gpu=24GiB&live=4000"),
     ("plan-64-ranks", "/plan?model=llama-3.1-405b&tp=8&pp=8"),
     ("plan-seed000", "/plan?base=seed000"),
     ("plan-1024-ranks", "/plan?ranks=1024&tp=8")],
)
def test_screenshots(page: Any, artifacts: Path, name: str, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_selector("#chart-levers[data-drawn]", state="attached")
    page.wait_for_timeout(300)
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
    assert (artifacts / f"{name}.png").stat().st_size > 10_000


def test_levers_refresh_once_the_slider_rests(page: Any) -> None:
    levers = "() => JSON.stringify(document.getElementById('chart-levers').data[0].x)"
    _open_plan(page, PLAN)
    page.wait_for_selector("#chart-levers[data-drawn]", state="attached")
    before = page.evaluate(levers)
    page.focus("#f-util")
    for _ in range(5):
        page.keyboard.press("ArrowLeft")
    page.wait_for_url("**util=0.87")
    page.wait_for_function(f"before => ({levers})() !== before", arg=before)  # the page's hang guard, not a speed limit


def test_compare_link_pins_the_opened_plan_against_the_moved_one(page: Any) -> None:
    _open_plan(page, PLAN)
    page.focus("#f-util")
    page.keyboard.press("ArrowLeft")
    page.wait_for_url("**util=0.91")
    page.click("a[data-compare-link]")
    page.wait_for_url("**/compare?**")
    assert page.input_value("#cmp-a") == PLAN
    assert page.input_value("#cmp-b") == PLAN + "&util=0.91"
    assert page.locator("#compare-results tr[data-key='tokens']").count() == 1


def test_deploy_copy_blocks_load_their_file_when_opened(page: Any) -> None:
    _open_plan(page, PLAN)
    assert "model:" not in page.inner_text("#vllm-config-text")  # nothing written until asked for
    page.click("#deploy-exports details:has(#vllm-config-text) summary")
    page.wait_for_function("() => document.querySelector('#vllm-config-text').textContent.startsWith('model:')")
    assert "tensor-parallel-size: 4" in page.inner_text("#vllm-config-text")
    page.click("#deploy-exports details:has(#kserve-text) summary")
    page.wait_for_function("() => document.querySelector('#kserve-text').textContent.includes('InferenceService')")


def test_a_deploy_block_opened_after_a_tick_shows_the_ticked_plan(page: Any) -> None:
    _open_plan(page, PLAN)
    block = "#deploy-exports details:has(#vllm-config-text)"
    page.click(f"{block} summary")  # loaded once for the first plan (util 0.92)
    page.wait_for_function("() => document.querySelector('#vllm-config-text').textContent.includes('0.92')")
    page.evaluate(f"() => {{ document.querySelector('{block}').kvMark = 1; }}")
    page.focus("#f-util")
    page.keyboard.press("ArrowLeft")
    page.wait_for_url("**util=0.91")
    page.wait_for_function(PLAN_IDLE)
    # the tick patched the block in place (an htmx element was re-created and processed every tick)
    assert page.evaluate(f"() => document.querySelector('{block}').kvMark") == 1
    assert page.get_attribute(block, "data-export-url").endswith("util=0.91")
    if page.evaluate(f"() => document.querySelector('{block}').open"):
        page.click(f"{block} summary")  # close it (the tick does: the fragment's block is closed)
    page.focus(f"{block} summary")
    page.keyboard.press("Enter")  # the keyboard opens it as the mouse does
    page.wait_for_function("() => document.querySelector('#vllm-config-text').textContent.startsWith('model:')")
    text = page.inner_text("#vllm-config-text")
    assert "gpu-memory-utilization: 0.91" in text and "0.92" not in text


def test_a_fast_drag_is_coalesced_to_the_newest_position(page: Any) -> None:
    _open_plan(page, PLAN)
    sent: list[str] = []
    page.on("request", lambda req: sent.append(req.url) if "/plan?" in req.url else None)
    # 30 input events in one task: one request goes out, later ones replace each other in the queue.
    page.evaluate("""() => { const e = document.getElementById('f-util');
      for (let k = 0; k < 30; k++) { e.value = (0.50 + k / 100).toFixed(2);
        e.dispatchEvent(new Event('input', {bubbles: true})); } }""")
    page.wait_for_url("**util=0.79")
    page.wait_for_function(PLAN_IDLE)
    page.wait_for_function("() => document.getElementById('chart-pool').getAttribute('data-drawn') === "
                           "document.getElementById('kpis').dataset.version")
    assert 1 <= len(sent) <= 2 and "util=0.79" in sent[-1], sent
    assert page.inner_text("#out-util") == "0.79"


def test_an_out_of_range_number_gets_the_servers_message_in_its_slot(page: Any) -> None:
    """The plan form does not let the browser halt its requests on a min/max constraint (htmx checked
    every field's validity, one event each, on every slider tick, and an out-of-range number stopped
    the request with no word on the page): the server answers with the field's message, and a slider
    tick with the field still wrong says so too."""
    _open_plan(page, PLAN)
    page.fill("#f-pp", "0")
    page.wait_for_function("() => document.querySelector('#err-pp').textContent.trim() !== ''")
    message = page.inner_text("#err-pp")
    assert message == "pp 0 is out of range: give a whole number from 1 to 1,024", message
    with page.expect_response(lambda r: "util=0.77" in r.url and "pp=0" in r.url) as tick:
        page.evaluate("() => { const e = document.getElementById('f-util'); e.value = '0.77'; "
                      "e.dispatchEvent(new Event('input', {bubbles: true})); }")
    assert tick.value.status == 422  # the request went out: the browser did not halt it
    page.wait_for_function(PLAN_IDLE)
    assert page.inner_text("#err-pp") == message
    page.fill("#f-pp", "1")
    page.wait_for_function("() => document.querySelector('#err-pp').textContent.trim() === ''")
    page.wait_for_selector("#adm-tokens")
