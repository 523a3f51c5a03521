"""The plan page's first paint and a slider tick (issue 14's browser targets), as behaviour:
the numbers are on screen before any chart code is fetched or run, the chart library is asked for
only after the first paint, a slider read-out is written as Intl.NumberFormat would write it
(app.js formats without Intl: a fresh renderer's first Intl.NumberFormat cost 23-57 ms before
DOMContentLoaded), and one tick moves the numbers and the server-drawn chart together. Times are
measured by bench/bench_browser.py, never asserted here."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_js import PLAN_IDLE, POOL_STATE

pytestmark = pytest.mark.e2e

PLAN = "/plan?model=llama-3.1-70b&tp=4"

# Installed before any page script: when a plotly <script> is added to the document, whether the
# page had a paint entry by then (the library is to be requested only after the first paint).
WATCH_CHART_SCRIPT = """
window.__chartScript = null;
new MutationObserver((records, observer) => {
  for (const record of records) {
    for (const node of record.addedNodes) {
      if (node.nodeName === "SCRIPT" && /plotly/.test(node.src || "")) {
        window.__chartScript = {painted: performance.getEntriesByType("paint").length > 0};
        observer.disconnect();
        return;
      }
    }
  }
}).observe(document, {subtree: true, childList: true});
"""

# Every KPI tile: its key, label and value, whether it is rendered (has a box, not hidden) and
# inside the first screen.
KPIS = """() => Array.from(document.querySelectorAll("#kpis [data-kpi]"), el => {
  const box = el.getBoundingClientRect();
  const style = getComputedStyle(el);
  return {key: el.dataset.kpi, label: el.querySelector(".label").textContent.trim(),
          value: el.querySelector(".value").textContent.trim(),
          shown: box.width > 0 && box.height > 0 && style.visibility === "visible" && style.display !== "none"
                 && Number(style.opacity) > 0,
          onScreen: box.top >= 0 && box.bottom <= innerHeight};
})"""

# A read-out field app.js formats (any input[data-output]), outside the plan form so no request
# goes out: the text it writes for each value against Intl.NumberFormat("en-US") with the same
# fraction digits. Values whose binary form rounds the other way (0.95 is 0.94999... in binary;
# Intl rounds the shortest decimal form half away from zero) and thousands groups.
READOUTS = """(cases) => {
  const box = document.createElement("div");
  box.innerHTML = '<input type="number" id="t-fmt" data-output="t-out"><output id="t-out"></output>';
  document.body.appendChild(box);
  const input = document.getElementById("t-fmt"), out = document.getElementById("t-out");
  const rows = cases.map(([value, digits]) => {
    input.setAttribute("data-digits", String(digits));
    input.value = String(value);
    input.dispatchEvent(new Event("input", {bubbles: true}));
    const intl = new Intl.NumberFormat("en-US", {minimumFractionDigits: digits, maximumFractionDigits: digits});
    return [value, digits, out.textContent, intl.format(value)];
  });
  box.remove();
  return rows;
}"""

READOUT_CASES = [[0.95, 1], [0.85, 1], [1.005, 2], [2.675, 2], [9.995, 2], [99.95, 1], [0.44999999999999996, 1],
                 [1234.5, 0], [131072, 0], [1234567.891, 2], [0.9, 2], [0, 2], [12, 3], [-1234.567, 1]]


def _kpis(page: Any) -> list[dict[str, Any]]:
    kpis: list[dict[str, Any]] = page.evaluate(KPIS)
    return kpis


def test_the_numbers_are_shown_before_the_chart_library_loads(page: Any) -> None:
    """plotly is held (its request never answered): the KPIs, the server-drawn pool chart and the
    rank table are on the page and visible, the read-outs are written, and the library was asked
    for only after the page's first paint."""
    held: list[Any] = []
    page.add_init_script(WATCH_CHART_SCRIPT)
    page.route("**/plotly*", lambda route: held.append(route))
    page.goto(PLAN)
    page.wait_for_function("() => window.__chartScript !== null")
    assert page.evaluate("() => window.__chartScript") == {"painted": True}
    assert page.evaluate("() => typeof window.Plotly") == "undefined"
    kpis = _kpis(page)
    assert len(kpis) >= 4, kpis
    for kpi in kpis:
        assert kpi["shown"] and kpi["onScreen"], kpi
        assert kpi["label"] and kpi["value"], kpi
    assert page.locator("#kpis [data-kpi=kv] .value").is_visible()
    assert page.locator("#chart-pool svg .seg").count() > 0 and page.locator("#chart-pool").is_visible()
    assert page.locator("#ranks tbody tr[data-rank]").count() == 4  # TP 4: one row per rank
    util = page.get_attribute("#f-util", "value")
    assert util is not None and page.inner_text("#out-util") == f"{float(util):.2f}"  # data-digits 2
    assert held, "the chart library was never requested"


def test_a_read_out_is_written_as_intl_writes_it(page: Any) -> None:
    page.goto(PLAN)
    page.wait_for_selector("#kpis")
    rows = page.evaluate(READOUTS, READOUT_CASES)
    assert [row[2] for row in rows] == [row[3] for row in rows], rows
    assert rows[0][2] == "1.0" and rows[7][2] == "1,235"  # not toFixed's "0.9"; grouped


def test_one_tick_moves_the_numbers_and_the_chart_together(page: Any) -> None:
    page.goto(PLAN)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_selector("#chart-levers[data-drawn]", state="attached")
    before = page.evaluate(POOL_STATE)
    kpis_before = _kpis(page)
    assert before["drawn"] == before["version"]
    page.evaluate("() => { const e = document.getElementById('f-util'); e.value = '0.80'; "
                  "e.dispatchEvent(new Event('input', {bubbles: true})); }")
    assert page.inner_text("#out-util") == "0.80"  # the read-out follows the slider at once
    page.wait_for_function("v => document.getElementById('kpis').dataset.version !== v", arg=before["version"])
    page.wait_for_function(PLAN_IDLE)
    after = page.evaluate(POOL_STATE)
    assert after["version"] != before["version"]
    assert after["drawn"] == after["version"]  # the chart says it draws the numbers shown
    assert "util=0.8" in after["url"]
    assert after["titles"] != before["titles"]  # the chart moved
    assert after["rows"] != before["rows"] and _kpis(page) != kpis_before  # and the numbers did
    # the chart's KV per rank is the table's (usable + stranded), so the two moved to the same plan
    for rank, cells in after["rows"].items():
        drawn = {t.split(" · ", 1)[1].split(":")[0]: float(t.rsplit(": ", 1)[1].split(" ")[0])
                 for t in after["titles"] if t.startswith(f"rank {rank} · ")}
        kv = drawn.get("KV (usable)", 0.0) + drawn.get("KV stranded", 0.0)
        assert abs(kv - float(cells["KV"][0].removesuffix(" GiB"))) <= 0.0101, (rank, drawn, cells)
