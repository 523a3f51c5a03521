"""What a slider tick costs the browser (issue 14): the pool chart is server-drawn SVG, patched in
place with the numbers in the same task (no chart code on a tick, nothing redrawn by plotly), the
results are patched, not re-created, and htmx does not snapshot the page for a history cache it
never keeps. Behaviour, not wall-clock time."""

from __future__ import annotations

import re
from typing import Any

import pytest

from .plan_js import FRESH_STATE, PLAN_IDLE, POOL_STATE, RECORD_FRAMES

pytestmark = pytest.mark.e2e

PLAN = "/plan?model=llama-3.1-70b&tp=4"

# Counts plotly redraws per element, history snapshots, and whether the pool chart drawn on screen
# was already the new fragment's when the task that swapped in the new numbers ended (so no frame
# can show new numbers beside the old chart): the observer runs in a microtask after that task.
SPY = """() => {
  window.__draws = {};
  window.__snapshots = 0;
  window.__sameFrame = null;
  for (const name of ["react", "newPlot", "animate", "restyle", "relayout", "update"]) {
    const original = window.Plotly[name];
    window.Plotly[name] = function (el, ...rest) {
      const id = typeof el === "string" ? el : el.id;
      window.__draws[id] = (window.__draws[id] || 0) + 1;
      return original.call(this, el, ...rest);
    };
  }
  document.body.addEventListener("htmx:beforeHistorySave", () => { window.__snapshots += 1; });
  const before = document.getElementById("adm-tokens").textContent;
  new MutationObserver((records, observer) => {
    const now = document.getElementById("adm-tokens");
    if (!now || now.textContent === before) { return; }
    observer.disconnect();
    window.__sameFrame = document.getElementById("chart-pool").getAttribute("data-drawn")
      === document.getElementById("kpis").dataset.version;
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""

# The pool chart as drawn: every segment's hover title, "rank R · row: GiB (source)".
DRAWN = "() => Array.from(document.querySelectorAll('#chart-pool .seg title'), t => t.textContent)"
TITLE = re.compile(r"^rank (.+?) · (.+): (-?[0-9.]+) GiB \((.*)\)$")
#: The chart's rows that are the rank table's column of the same name, value and source.
SAME_ROWS = ("weights", "non-torch", "activation")


def _drawn(page: Any) -> list[tuple[str, str, str]]:
    titles = page.evaluate(DRAWN)
    return [(m[1], m[2], m[3]) for m in map(TITLE.match, titles) if m]


def _gib(text: str) -> float:
    return float(text.removesuffix(" GiB"))


def _assert_agrees(state: dict[str, Any]) -> None:
    """One reading of the page (POOL_STATE): the chart drawn is marked as the numbers' version, and
    it draws the numbers shown: each rank's column holds the rank table's rows (weights, non-torch,
    CUDA graphs, activation: the same value and source; usable + stranded KV the table's KV to its
    rounding; the headroom above the budget the table's, less graphs drawn outside it), the rank
    the table says binds is the one outlined and noted, and the KPI is its KV."""
    assert state["drawn"] == state["version"] and state["version"], state
    drawn: dict[str, dict[str, tuple[float, str]]] = {}
    for m in map(TITLE.match, state["titles"]):
        assert m, state["titles"]
        drawn.setdefault(m[1], {})[m[2]] = (float(m[3]), m[4])
    assert state["columns"] == list(state["rows"]) and set(drawn) <= set(state["rows"]), state
    for rank, cells in state["rows"].items():
        bars = drawn.get(rank, {})

        def shown(row: str, bars: dict[str, tuple[float, str]] = bars) -> float:
            return bars.get(row, (0.0, ""))[0]

        for row in SAME_ROWS:
            assert shown(row) == _gib(cells[row][0]), (rank, row, bars, cells)
            assert row not in bars or bars[row][1] == cells[row][1], (rank, row, bars, cells)
        outside = "CUDA graphs (outside budget)" in bars
        graphs = shown("CUDA graphs (outside budget)" if outside else "CUDA graphs")
        assert graphs == _gib(cells["CUDA graphs"][0]), (rank, bars, cells)
        assert shown("KV stranded") == _gib(cells["stranded"][0]), (rank, bars, cells)
        assert abs(shown("KV (usable)") + shown("KV stranded") - _gib(cells["KV"][0])) <= 0.0101, (rank, bars, cells)
        headroom = shown("headroom (outside budget)") + (graphs if outside else 0.0)
        assert abs(headroom - _gib(cells["headroom"][0])) <= (0.0101 if outside else 0.0), (rank, bars, cells)
    assert state["outlined"] == [state["binding"]] and state["notes"] == ["binds"], state
    # "—": a plan vLLM refuses shows no capacity
    assert state["kpi_kv"] in ("—", state["rows"][state["binding"]]["KV"][0]), state


def _fresh(page: Any, url: str) -> dict[str, Any]:
    """POOL_STATE of the whole page at `url`, as a fresh load shows it (fetched beside the page, not
    through its routes)."""
    response = page.context.request.get(url)
    assert response.ok, (url, response.status)
    state: dict[str, Any] = page.evaluate(FRESH_STATE, response.text())
    return state


def _assert_shows(page: Any, state: dict[str, Any]) -> None:
    """A reading agrees with itself and is what a fresh load of its address shows: the same chart
    (every title, column, outline), version and numbers."""
    _assert_agrees(state)
    assert state == _fresh(page, state["url"])


def _open(page: Any) -> None:
    page.goto(PLAN)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_selector("#chart-levers[data-drawn]", state="attached")


def _tick(page: Any, value: str) -> None:
    page.evaluate("v => { const e = document.getElementById('f-util'); e.value = v; "
                  "e.dispatchEvent(new Event('input', {bubbles: true})); }", value)
    page.wait_for_function("() => document.getElementById('chart-pool').getAttribute('data-drawn') === "
                           "document.getElementById('kpis').dataset.version "
                           "&& !document.querySelector('.htmx-request') && window.__sameFrame !== null")


def test_a_tick_draws_the_pool_chart_with_the_numbers_and_no_chart_code(page: Any) -> None:
    _open(page)
    levers_figure = page.evaluate("() => document.getElementById('chart-levers-data').textContent")
    drawn_before = _drawn(page)
    _assert_shows(page, page.evaluate(POOL_STATE))
    page.evaluate(SPY)
    _tick(page, "0.85")
    assert page.evaluate("() => window.__draws") == {}  # no plotly redraw: neither the pool chart nor the levers
    # the levers refresh in their own request on a committed change; a tick leaves their figure alone
    assert page.evaluate("() => document.getElementById('chart-levers-data').textContent") == levers_figure
    assert page.evaluate("() => window.__sameFrame") is True
    state = page.evaluate(POOL_STATE)
    assert "util=0.85" in state["url"]
    _assert_shows(page, state)
    assert _drawn(page) != drawn_before


def test_a_tick_patches_the_results_in_place(page: Any) -> None:
    """The results' elements survive a tick (only changed text and attributes are written), the
    chart's SVG included, and the deploy-file blocks, which still load their file when opened."""
    _open(page)
    page.evaluate("""() => { for (const id of ["results", "kpis", "chart-pool", "adm-tokens", "ranks"]) {
      document.getElementById(id).__kept = true; }
      document.querySelector("#chart-pool svg").__kept = true; }""")
    tokens = page.inner_text("#adm-tokens")
    page.evaluate(SPY)
    _tick(page, "0.80")
    assert page.inner_text("#adm-tokens") != tokens
    kept = page.evaluate("""() => [...["results", "kpis", "chart-pool", "adm-tokens", "ranks"].map(
      id => document.getElementById(id).__kept === true), document.querySelector("#chart-pool svg").__kept === true]""")
    assert all(kept), kept
    exports = page.locator("#deploy-exports details[data-export-url]")
    assert exports.count() == 4  # plain elements now: patched in place (their URL), not re-created
    exports.first.locator("summary").click()  # and a deploy file still loads on open after the patch
    page.wait_for_function("() => !document.querySelector('#deploy-exports details[open] pre')"
                           ".textContent.startsWith('(loading')")


def test_a_tick_patches_the_summary_and_the_save_form_keeping_what_was_typed(page: Any) -> None:
    """The out-of-band pieces of a tick (the summary line, the save form) are patched in place too:
    their elements survive, their new text and hidden plan URL arrive, and a box the person ticked
    on the save form stays ticked (the outerHTML swap re-created the form unticked on every tick)."""
    _open(page)
    page.check("#f-listed")
    page.evaluate("() => ['plan-summary', 'save-plan'].forEach(id => { document.getElementById(id).__kept = true; })")
    page.evaluate(SPY)
    _tick(page, "0.82")
    page.wait_for_function("() => document.querySelector('#save-plan input[name=plan]').value.includes('util=0.82')")
    assert page.evaluate("() => ['plan-summary', 'save-plan'].map(id => document.getElementById(id).__kept === true)") \
        == [True, True]
    assert page.is_checked("#f-listed")
    assert "util%3D0.82" in (page.get_attribute("#plan-summary a[data-compare-link]", "href") or "")


def test_the_pool_chart_is_readable_before_any_chart_code(page: Any) -> None:
    """The chart library blocked: the pool chart is on the page with its legend and hover titles."""
    page.route("**/plotly*", lambda route: route.abort())
    page.goto(PLAN)
    page.wait_for_selector("#chart-pool svg .seg", state="attached")
    assert page.evaluate("() => typeof window.Plotly") == "undefined"
    legend = page.locator("#chart-pool .chart-legend li").all_inner_texts()
    assert "KV (usable)" in legend and "requested budget" in legend
    _assert_agrees(page.evaluate(POOL_STATE))
    assert page.locator("#chart-pool .budget").count() == 4  # one dashed budget segment per rank
    assert page.locator("#chart-pool .seg[stroke]").count() == 1  # the binding rank's KV, outlined
    assert page.locator("#chart-pool .note").text_content() == "binds"


def test_a_tick_writes_its_address_once_after_the_numbers(page: Any) -> None:
    """htmx wrote two replaceState calls (the current address, then the new one) before swapping;
    a plan-form tick writes the new address once, after the numbers are in the page."""
    _open(page)
    length = page.evaluate("() => history.length")
    page.evaluate("""() => { window.__writes = [];
      const original = history.replaceState.bind(history);
      history.replaceState = (state, title, url) => {
        window.__writes.push([String(url), document.getElementById("chart-pool").getAttribute("data-drawn")]);
        return original(state, title, url); }; }""")
    page.evaluate(SPY)
    _tick(page, "0.81")
    page.wait_for_url("**util=0.81**")
    writes = page.evaluate("() => window.__writes")
    version = page.evaluate("() => document.getElementById('kpis').dataset.version")
    assert len(writes) == 1 and "util=0.81" in writes[0][0] and writes[0][1] == version, writes
    assert page.evaluate("() => history.length") == length  # replaced, not pushed


def test_a_tick_takes_no_history_snapshot(page: Any) -> None:
    _open(page)
    page.evaluate(SPY)
    _tick(page, "0.80")
    page.wait_for_url("**util=0.8**")
    assert page.evaluate("() => window.__snapshots") == 0
    assert page.evaluate("() => sessionStorage.getItem('htmx-history-cache')") is None


BURST = """values => new Promise(resolve => {
  const input = document.getElementById("f-util");
  let i = 0;
  const step = () => {
    input.value = values[i];
    input.dispatchEvent(new Event("input", {bubbles: true}));
    i += 1;
    if (i < values.length) { setTimeout(step, 5); } else { resolve(); }
  };
  step();
})"""

def _burst_ends_agreeing(page: Any, values: list[str]) -> dict[str, Any]:
    page.evaluate(BURST, values)
    page.wait_for_url(f"**util={values[-1]}**")
    page.wait_for_function(PLAN_IDLE)
    state: dict[str, Any] = page.evaluate(POOL_STATE)
    assert f"util={values[-1]}" in state["url"]
    _assert_shows(page, state)
    return state


def test_a_burst_ends_with_the_chart_of_the_numbers_shown_even_when_the_last_request_fails(page: Any) -> None:
    """Whatever the timing of a burst, the chart ends drawn from the fragment on screen (the figure
    beside it), also when the newest request fails; the numbers and the chart agree in every frame."""
    _open(page)
    page.evaluate(RECORD_FRAMES)
    values = [f"{0.60 + k / 100:.2f}" for k in range(12)]
    page.route("**/plan?*util=0.71*", lambda route: route.abort())
    page.evaluate(BURST, values)
    page.wait_for_function(PLAN_IDLE)
    _assert_shows(page, page.evaluate(POOL_STATE))
    # the slider reads 0.71 beside an older plan: the form says the update failed
    assert page.inner_text("#out-util") == "0.71" and page.inner_text("#busy").startswith("not updated")
    page.unroute("**/plan?*util=0.71*")
    _burst_ends_agreeing(page, ["0.55", "0.54", "0.53"])
    assert page.inner_text("#out-util") == "0.53"
    assert page.inner_text("#busy") == "updating…" and not page.is_visible("#busy.failed")
    frames = page.evaluate("() => window.__stopFrames()")
    assert len(frames) >= 2  # the page as opened, and at least the last burst's plan
    fresh = {url: _fresh(page, url) for url in {frame["url"] for frame in frames}}
    for frame in frames:
        _assert_agrees(frame)
        assert frame == fresh[frame["url"]]


def _is_plan_tick(url: str) -> bool:
    return "/plan?" in url


def _wait_for_held(page: Any, held: list[Any], count: int) -> None:
    """Route handlers run while Playwright is waited on: wait (on the condition) until `count` are held,
    polling at most 4,500 times (a hang guard, not a time limit)."""
    for _ in range(4500):
        if len(held) >= count:
            return
        page.wait_for_timeout(10)
    raise AssertionError(f"{len(held)} of {count} requests reached the route")


def test_a_held_response_keeps_the_plan_busy_and_every_frame_agrees(page: Any) -> None:
    """The race forced: the burst's first request is held at the network until the test lets it go,
    and the newest (queued behind it) fails. While it is held the plan form reports a request in
    flight (the old wait, `#plan-form.htmx-request`, said idle here); when it lands the chart, the
    figure and the numbers move together, in every frame, to that request's plan."""
    _open(page)
    opened = page.evaluate(POOL_STATE)
    _assert_shows(page, opened)
    held: list[Any] = []
    page.route(_is_plan_tick, lambda route: route.abort() if "util=0.71" in route.request.url else held.append(route))
    page.evaluate(RECORD_FRAMES)
    page.evaluate(BURST, [f"{0.61 + k / 100:.2f}" for k in range(11)])
    _wait_for_held(page, held, 1)
    assert "util=0.61&" in held[0].request.url
    assert page.evaluate(PLAN_IDLE) is False  # a request in flight: no reading may be taken as final
    assert page.evaluate(POOL_STATE) == opened  # nothing moved yet: the page as opened, consistent
    held[0].continue_()
    page.wait_for_url("**util=0.61**")
    page.wait_for_function(PLAN_IDLE)
    final = page.evaluate(POOL_STATE)
    assert "util=0.61&" in final["url"] + "&"
    _assert_shows(page, final)
    assert final["version"] != opened["version"] and len(held) == 1  # the 0.71 request failed, not held
    assert page.inner_text("#busy").startswith("not updated: the request failed")
    frames = page.evaluate("() => window.__stopFrames()")
    assert frames == [opened, final], frames  # every frame the page as opened or as the held response's fresh page


def test_the_first_paint_waits_for_no_request_and_the_styles_apply(page: Any) -> None:
    """The stylesheet is inline (a linked one blocked the first paint for its round trip); the CSP
    allows it (the page fixture fails on a CSP console message) and the chart library comes later."""
    page.goto(PLAN)
    page.wait_for_selector("#chart-pool svg .seg", state="attached")
    blocking = page.evaluate("""() => performance.getEntriesByType("resource")
      .filter(r => r.renderBlockingStatus === "blocking").map(r => r.name)""")
    assert blocking == []
    style = "([selector, property]) => getComputedStyle(document.querySelector(selector))[property]"
    assert page.evaluate(style, [".topbar", "backgroundColor"]) == "rgb(22, 33, 62)"
    assert page.evaluate(style, [".pool-svg .budget", "strokeDasharray"]) != "none"


def test_the_pool_chart_reads_without_javascript(browser: Any, server_url: str) -> None:
    context = browser.new_context(java_script_enabled=False, base_url=server_url)
    try:
        page = context.new_page()
        page.goto(PLAN)
        assert page.locator("#chart-pool svg .seg").count() > 0
        _assert_agrees(page.evaluate(POOL_STATE))  # the page's own reading: its scripts do not run
        assert "needs JavaScript" not in (page.locator("#results").text_content() or "")  # nothing to apologise for
    finally:
        context.close()


def test_a_tick_writes_no_session_storage(page: Any) -> None:
    """htmx handled a tick's HX-Replace-Url although its history writes were off: a page query for
    [hx-history=false] and three sessionStorage writes per tick. The address is app.js's to write;
    a tick now writes no storage at all, and the address still follows the slider."""
    _open(page)
    page.evaluate("""() => { window.__storage = [];
      for (const name of ["setItem", "removeItem"]) {
        const original = Storage.prototype[name];
        Storage.prototype[name] = function (...args) {
          window.__storage.push([name, args[0]]);
          return original.apply(this, args);
        };
      } }""")
    page.evaluate(SPY)
    _tick(page, "0.79")
    page.wait_for_url("**util=0.79**")
    assert page.evaluate("() => window.__storage") == []

