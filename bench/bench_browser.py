"""Browser benchmark: `.venv/bin/python bench/bench_browser.py [--before REF] [--check]` (writes
bench/RESULTS-browser.md).

Our server under uvicorn (one worker) on 127.0.0.1, driven by headless Debian Chromium through
Playwright (executable_path, as tests/e2e/conftest.py). With `--before REF` (default `main`) a
second server runs `git archive REF` from a temporary directory, and every phase runs on both in
turn (loads alternate, ticks alternate one by one), so before/after ratios come from one run under
the same load. Measured in the page with `performance.now()`:

1. First load of the plan page in a fresh browser context (no cache), 5 times each way: navigated
   at once, and navigated once the browser is idle (the new context's tab opened, then Chromium's
   processes together under 10 ms of CPU in each of three 100 ms windows): a new window's own
   start-up (its omnibox popup is a WebUI renderer loading about 180 chrome:// resources) shares
   the two cores with a page navigated at once. Both are the page's own Paint Timing relative to
   its navigation start, cold cache. First paint, the page's first and last byte, DOM interactive,
   DOMContentLoaded, first chart drawn, the render-blocking requests, and compressed bytes on the
   wire (Resource Timing transferSize) before first paint and in all. Targets: first paint <= 200 ms
   (the page; the figure navigated at once is shown beside it) and <= 150 KB transferred before
   it; the chart library requested only after first paint.
2. Slider → chart: 50 ticks of the utilization slider on the plan page, one at a time, each a
   position never computed before. Per tick, from the input event: request sent → response
   received → the new numbers in the DOM (the fragment's figure version in the document) → the
   pool chart updated (its element's `data-drawn` is that version: plotly resolved, or the
   server-drawn SVG patched in) → repainted (the frame after); medians and p90.
   Target: median input → chart repainted <= 50 ms.
3. A drag: 30 input events 16 ms apart (a 60 Hz pointer); how many requests were sent, and the
   time from the last input to the chart showing the last position with the address updated.

The run always completes and records what it measured (a phase that fails is recorded as an
error); `--check` exits 1 when a target of this tree is missed or a phase failed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from bench_web import FIRST_PAGE, free_port, load_average, machine  # noqa: E402

from tests.e2e.plan_js import PLAN_IDLE  # noqa: E402  (htmx marks the form's hx-indicator, not the form)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
TICKS, WARMUP_TICKS, DRAG_EVENTS, LOADS = 50, 5, 30, 5
TARGET_TICK_MS = 50.0
TARGET_FIRST_PAINT_MS = 200.0
TARGET_FIRST_PAINT_BYTES = 150 * 1024
# A fresh context's tab is navigated once Chromium is idle: under 10 ms of CPU in each of three 100 ms windows.
SETTLE_CPU_S, SETTLE_POLL_S, SETTLE_WINDOWS, SETTLE_MAX_S = 0.010, 0.1, 3, 10.0

# The version of the numbers in the document: `#kpis[data-version]`, or on a tree before it the pool
# figure's JSON beside the chart (`#chart-pool-data`, no longer sent).
NUMBERS_JS = """() => document.querySelector("#kpis[data-version]") || document.getElementById("chart-pool-data")"""

# One slider tick, timed in the page: resolves with milliseconds from the input event to each phase.
# "sent": htmx:beforeSend (the XHR is about to go out); "response": the XHR's Resource Timing
# responseEnd ("server" is its responseStart - requestStart); "dom": the new fragment's numbers'
# version is in the document; "chart": the pool chart element says it shows that version
# (data-drawn); "painted": the frame after that has been produced.
TICK_JS = """
([id, value]) => new Promise((resolve, reject) => {
  const data = """ + NUMBERS_JS + """;
  const chart = () => document.getElementById("chart-pool");  // a swap may replace it: asked each time
  const form = document.getElementById("plan-form");
  const before = data().dataset.version;
  let sent = null, dom = null, drawn = null;
  const onSend = () => { if (sent === null) { sent = performance.now(); } };
  form.addEventListener("htmx:beforeSend", onSend);
  const t0 = performance.now();
  const done = () => {
    observer.disconnect();
    form.removeEventListener("htmx:beforeSend", onSend);
    requestAnimationFrame(() => setTimeout(() => {
      const painted = performance.now() - t0;
      const xhrs = performance.getEntriesByType("resource").filter(
        r => r.initiatorType === "xmlhttprequest" && r.startTime >= t0 - 0.5);
      const last = xhrs.filter(r => new URL(r.name).pathname === "/plan").pop();
      resolve({sent: sent === null ? null : sent - t0, response: last ? last.responseEnd - t0 : null,
               server: last ? last.responseStart - last.requestStart : null,
               dom: dom - t0, chart: drawn - t0, painted: painted, requests: xhrs.length});
    }, 0));
  };
  const check = () => {
    const now = performance.now();
    if (dom === null && data() && data().dataset.version !== before) { dom = now; }
    if (dom !== null && drawn === null && chart() && chart().getAttribute("data-drawn") === data().dataset.version) {
      drawn = now; done();
    }
  };
  const observer = new MutationObserver(check);
  observer.observe(document.body, {subtree: true, childList: true, attributes: true,
                                   attributeFilter: ["data-drawn", "data-version"]});
  setTimeout(() => { observer.disconnect(); reject(new Error("no chart update within 60 s")); }, 60000);
  const input = document.getElementById(id);
  input.value = value;
  input.dispatchEvent(new Event("input", {bubbles: true}));
})
"""

# A drag: input events every 16 ms; counts htmx requests; resolves when the last position is drawn.
DRAG_JS = """
([id, values]) => new Promise((resolve, reject) => {
  const input = document.getElementById(id);
  let last = null, i = 0;
  const step = () => {
    input.value = values[i];
    input.dispatchEvent(new Event("input", {bubbles: true}));
    i += 1;
    if (i < values.length) { setTimeout(step, 16); return; }
    last = performance.now();
    const want = input.value;
    const poll = () => {
      const url = new URL(window.location.href);
      const data = (""" + NUMBERS_JS + """)();
      const chart = document.getElementById("chart-pool");
      if (url.searchParams.get("util") === want && chart.getAttribute("data-drawn") === data.dataset.version
          && (""" + PLAN_IDLE + """)()) {
        resolve({settle: performance.now() - last, events: values.length});
        return;
      }
      if (performance.now() - last > 60000) { reject(new Error("drag never settled")); return; }
      requestAnimationFrame(poll);
    };
    requestAnimationFrame(poll);
  };
  step();
})
"""

FIRST_LOAD_JS = """
() => {
  const paints = Object.fromEntries(performance.getEntriesByType("paint").map(e => [e.name, e.startTime]));
  const nav = performance.getEntriesByType("navigation")[0];
  const resources = performance.getEntriesByType("resource");
  const fp = paints["first-paint"] ?? paints["first-contentful-paint"];
  const before = nav.transferSize + resources.filter(r => r.responseEnd <= fp).reduce((a, r) => a + r.transferSize, 0);
  const all = nav.transferSize + resources.reduce((a, r) => a + r.transferSize, 0);
  const charts = resources.filter(r => r.name.includes("plotly"));
  const blocking = resources.filter(r => r.renderBlockingStatus === "blocking").map(r => new URL(r.name).pathname);
  return {first_paint: fp, fcp: paints["first-contentful-paint"], dcl: nav.domContentLoadedEventEnd,
          ttfb: nav.responseStart, html_done: nav.responseEnd, dom_interactive: nav.domInteractive,
          bytes_before_paint: before, bytes_all: all, chart_lib_start: charts.length ? charts[0].startTime : null,
          blocking: blocking,
          resources: [["page", nav.transferSize], ...resources.map(r => [new URL(r.name).pathname, r.transferSize])]};
}
"""


def _util_values(page: Any, count: int) -> list[str]:
    """`count` slider positions, none of them the page's own (so every one is a fresh plan)."""
    lo, hi, step, current = page.evaluate(
        "() => { const e = document.getElementById('f-util'); return [e.min, e.max, e.step, e.value].map(Number); }")
    steps = round((hi - lo) / step)
    values = [f"{lo + k * step:.2f}" for k in range(steps, -1, -1)]
    values = [v for v in values if abs(float(v) - current) > step / 2]
    if len(values) < count:
        raise RuntimeError(f"the slider has {len(values)} positions; {count} needed")
    return values[:count]


def _open_for_ticks(browser: Any, url: str) -> tuple[Any, Any, list[str]]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    levers: list[str] = []
    page.on("request", lambda req: levers.append(req.url) if "/plan/levers" in req.url else None)
    page.goto(url + FIRST_PAGE)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached", timeout=60_000)
    page.wait_for_selector("#chart-levers[data-drawn]", state="attached", timeout=60_000)
    levers.clear()
    return context, page, levers


def _drag(page: Any, url: str) -> dict[str, Any]:
    drag_values = [f"{0.50 + k / 100:.2f}" for k in range(DRAG_EVENTS)]  # 0.50 → 0.79, step by step
    page.evaluate("() => { const e = document.getElementById('f-util'); e.value = '0.30'; "
                  "e.dispatchEvent(new Event('input', {bubbles: true})); }")
    page.wait_for_url("**util=0.3**", timeout=60_000)
    page.wait_for_function(PLAN_IDLE)
    sent: list[str] = []
    page.on("request", lambda req: sent.append(req.url) if req.url.startswith(url + "/plan?") else None)
    return {**page.evaluate(DRAG_JS, ["f-util", drag_values]), "requests": len(sent)}


def slider_ticks(browser: Any, urls: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The same ticks on every server's page, one tick each in turn (side by side, same load)."""
    opened = {name: _open_for_ticks(browser, url) for name, url in urls.items()}
    values = {name: _util_values(page, WARMUP_TICKS + TICKS) for name, (_, page, _) in opened.items()}
    ticks: dict[str, list[dict[str, Any]]] = {name: [] for name in urls}
    for k in range(WARMUP_TICKS + TICKS):
        for name in (list(opened) if k % 2 == 0 else list(reversed(opened))):
            tick = opened[name][1].evaluate(TICK_JS, ["f-util", values[name][k]])
            if k >= WARMUP_TICKS:
                ticks[name].append(tick)
    out = {}
    for name, (context, page, levers) in opened.items():
        out[name] = {"ticks": ticks[name], "tick_levers": len(levers), "drag": _drag(page, urls[name])}
        context.close()
    return out


# Installed before any page script: the moment the pool chart is first drawn, from the page's clock
# (a server-drawn chart: the moment its element, drawn, is parsed).
FIRST_CHART_INIT = """
new MutationObserver((records, observer) => {
  const el = document.getElementById("chart-pool");
  if (el && el.hasAttribute("data-drawn")) { window.__firstChart = performance.now(); observer.disconnect(); }
}).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ["data-drawn"]});
"""


# Resolves once the page has a paint entry (no Playwright script in the page before it).
FIRST_PAINT_JS = """new Promise(resolve => {
  const done = () => performance.getEntriesByType("paint").length > 0;
  if (done()) { resolve(true); return; }
  new PerformanceObserver((list, observer) => { observer.disconnect(); resolve(true); })
    .observe({type: "paint", buffered: true});
  setTimeout(() => resolve(false), 60000);
})"""


def _chromium_cpu_s(cdp: Any) -> float:
    """CPU seconds used so far by all of Chromium's processes (browser, GPU, renderers, utilities)."""
    return float(sum(p["cpuTime"] for p in cdp.send("SystemInfo.getProcessInfo")["processInfo"]))


def _settle(cdp: Any) -> float:
    """Wait until Chromium is idle: its processes together used under SETTLE_CPU_S of CPU in each of
    SETTLE_WINDOWS consecutive SETTLE_POLL_S windows (bounded by SETTLE_MAX_S). Returns seconds waited."""
    start = time.monotonic()
    last, quiet = _chromium_cpu_s(cdp), 0
    while quiet < SETTLE_WINDOWS and time.monotonic() - start < SETTLE_MAX_S:
        time.sleep(SETTLE_POLL_S)
        now = _chromium_cpu_s(cdp)
        quiet = quiet + 1 if now - last < SETTLE_CPU_S else 0
        last = now
    return time.monotonic() - start


def _first_load(browser: Any, url: str, cdp: Any | None = None) -> dict[str, Any]:
    """One first load in a fresh context (empty cache, no cookies). With `cdp` (a browser-level
    session) the new context's tab is opened first and the browser left to settle before navigating:
    a new window's own start-up (the omnibox popup's WebUI renderer loads about 180 chrome://
    resources) then no longer shares the two cores with the page's load."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(FIRST_CHART_INIT)
    page = context.new_page()
    session = context.new_cdp_session(page)
    settled = _settle(cdp) if cdp is not None else None
    page.goto(url + FIRST_PAGE)
    # The first paint is awaited through CDP's Runtime.evaluate before any Playwright wait: a
    # wait_for_selector (or wait_for_function) first evaluates Playwright's injected script in the
    # page, 10.4 ms of its main thread (a trace of a settled load, 2026-12-03), which ran after the
    # load event and before the first paint (the first frame's tiles were still rasterizing): the
    # harness's own work inside the measure.
    session.send("Runtime.evaluate", {"expression": FIRST_PAINT_JS, "awaitPromise": True, "returnByValue": True})
    session.detach()
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached", timeout=60_000)
    page.wait_for_function("() => window.__firstChart !== undefined", timeout=60_000)
    page.wait_for_selector("#chart-levers[data-drawn]", state="attached", timeout=60_000)
    load = {**page.evaluate(FIRST_LOAD_JS), "chart_drawn": page.evaluate("() => window.__firstChart"),
            "settled_s": settled}
    context.close()
    return load


def first_loads(browser: Any, urls: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """LOADS fresh-context loads per server, the servers in turn (which goes first alternates): each
    a load navigated at once ("at once") and one navigated once the browser settled ("page")."""
    cdp = browser.new_browser_cdp_session()
    loads: dict[str, list[dict[str, Any]]] = {name: [] for name in urls}
    for k in range(LOADS):
        for name in (list(urls) if k % 2 == 0 else list(reversed(urls))):
            at_once = _first_load(browser, urls[name])
            page = _first_load(browser, urls[name], cdp)
            loads[name].append({**page, "at_once": at_once})
    cdp.detach()
    return loads


def _row(measure: str, value: float | None, unit: str, target: float | None = None, scale: float = 1.0) -> str:
    if value is None:
        return f"| {measure} | — | | | |"
    shown = f"{value / scale:,.1f} {unit}"
    if target is None:
        return f"| {measure} | {shown} | | | |"
    ok = value <= target
    verdict = "PASS" if ok else "FAIL"
    return f"| {measure} | **{shown}** | <= {target / scale:,.0f} {unit} | {value / target:.2f} | {verdict} |"


def _pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


TICK_PHASES = (("sent", "request sent (htmx:beforeSend)"), ("response", "response received (XHR responseEnd)"),
               ("dom", "numbers in the DOM (fragment swapped in)"),
               ("chart", "chart updated (data-drawn: plotly resolved, or the SVG patched in)"),
               ("painted", "chart repainted (the frame after)"))


def _tick_rows(s: dict[str, Any]) -> tuple[list[str], bool]:
    ticks = s["ticks"]
    painted = [t["painted"] for t in ticks]
    rows = [_row(f"slider tick, input → chart repainted (median of {len(ticks)})", statistics.median(painted), "ms",
                 TARGET_TICK_MS)]
    rows.append("")
    rows.append(f"Per phase over the {len(ticks)} ticks (ms from the input event):")
    rows.append("")
    rows.append("| input → | median | p90 | max |")
    rows.append("| --- | ---: | ---: | ---: |")
    for key, label in (*TICK_PHASES, ("server", "(server: XHR responseStart − requestStart)")):
        values = [float(t[key]) for t in ticks if t.get(key) is not None]
        if values:
            rows.append(f"| {label} | {statistics.median(values):.1f} | {_pct(values, 0.9):.1f} | {max(values):.1f} |")
    requests = sorted({t["requests"] for t in ticks})
    rows += ["", "| other | value |", "| --- | --- |",
             f"| XHRs per tick | {', '.join(map(str, requests))} |",
             f"| `/plan/levers` requests during the {len(ticks)} ticks (input events only) | {s['tick_levers']} |",
             f"| a drag: {s['drag']['events']} input events 16 ms apart → requests sent | {s['drag']['requests']} |",
             f"| the drag: last input → its position drawn, URL updated, no request in flight "
             f"| {s['drag']['settle']:,.1f} ms |"]
    return rows, statistics.median(painted) <= TARGET_TICK_MS


def _load_rows(loads: list[dict[str, Any]]) -> tuple[list[str], bool]:
    def m(key: str, variant: str = "page") -> float:
        return statistics.median(float((load if variant == "page" else load["at_once"])[key]) for load in loads)

    every = [*loads, *(load["at_once"] for load in loads)]
    after = all(load["chart_lib_start"] is None or load["chart_lib_start"] >= load["first_paint"] for load in every)
    ok = after and m("first_paint") <= TARGET_FIRST_PAINT_MS and m("bytes_before_paint") <= TARGET_FIRST_PAINT_BYTES
    blocking = sorted({path for load in every for path in load["blocking"]})
    n = len(loads)
    rows = [
        _row(f"first load: first paint, the page (fresh context, cold cache, navigated once the browser is idle; "
             f"median of {n})", m("first_paint"), "ms", TARGET_FIRST_PAINT_MS),
        _row(f"first load: first paint, navigated at once (the new window's browser start-up included; median of {n})",
             m("first_paint", "at_once"), "ms", TARGET_FIRST_PAINT_MS),
        _row("first load: bytes on the wire before first paint (compressed)", m("bytes_before_paint"), "KB",
             TARGET_FIRST_PAINT_BYTES, 1024),
        f"| first load: chart library requested after first paint | {'yes' if after else 'NO'} | yes | | "
        f"{'PASS' if after else 'FAIL'} |",
    ]
    for key, label in (("ttfb", "page's first byte (responseStart)"), ("html_done", "page's last byte (responseEnd)"),
                       ("dom_interactive", "DOM interactive (parsed)"), ("fcp", "first contentful paint"),
                       ("dcl", "DOMContentLoaded"), ("chart_drawn", "first chart drawn")):
        rows.append(f"| first load: {label}, the page / at once | {m(key):,.1f} / {m(key, 'at_once'):,.1f} ms | | | |")
    rows += [
        _row("first load: all bytes on the wire, chart library included", m("bytes_all"), "KB", None, 1024),
        f"| first load: render-blocking requests | {', '.join(f'`{b}`' for b in blocking) or 'none'} | | | |",
        f"| first load: first paint per run, the page | {', '.join(str(round(x['first_paint'])) for x in loads)} ms"
        " | | | |",
        f"| first load: first paint per run, at once | "
        f"{', '.join(str(round(x['at_once']['first_paint'])) for x in loads)} ms | | | |",
        f"| first load: waited for the browser to settle, per run | "
        f"{', '.join(format(x['settled_s'], '.1f') for x in loads)} s | | | |",
    ]
    return rows, ok


SUMMARY: tuple[tuple[str, str, Callable[[Any], float]], ...] = (  # (label, phase, one server's value)
    ("first paint, the page, median (ms)", "loads", lambda v: statistics.median(x["first_paint"] for x in v)),
    ("first paint, navigated at once, median (ms)", "loads",
     lambda v: statistics.median(x["at_once"]["first_paint"] for x in v)),
    ("DOM interactive, median (ms)", "loads", lambda v: statistics.median(x["dom_interactive"] for x in v)),
    ("bytes before first paint, median (KB)", "loads",
     lambda v: statistics.median(x["bytes_before_paint"] for x in v) / 1024),
    ("first chart drawn, median (ms)", "loads", lambda v: statistics.median(x["chart_drawn"] for x in v)),
    ("tick: input → numbers in the DOM, median (ms)", "slider",
     lambda v: statistics.median(t["dom"] for t in v["ticks"])),
    ("tick: input → chart repainted, median (ms)", "slider",
     lambda v: statistics.median(t["painted"] for t in v["ticks"])),
    ("tick: input → response received, median (ms)", "slider",
     lambda v: statistics.median(t["response"] for t in v["ticks"] if t["response"] is not None)),
    ("drag: last input → drawn and settled (ms)", "slider", lambda v: v["drag"]["settle"]),
)


def _summary(measured: dict[str, Any], names: list[str]) -> str:
    """Before and after side by side: the same phase, the servers in turn, in one run."""
    if len(names) < 2:
        return ""
    before, after = names[1], names[0]
    rows = [f"| measure | {before} | {after} | {after} / {before} |", "| --- | ---: | ---: | ---: |"]
    for label, phase, value in SUMMARY:
        runs = measured.get(phase) or {}
        if before in runs and after in runs:
            b, a = value(runs[before]), value(runs[after])
            rows.append(f"| {label} | {b:,.1f} | {a:,.1f} | {a / b:.2f} |" if b else f"| {label} | {b} | {a} | |")
    return "\n".join(rows)


def _variant(measured: dict[str, Any], name: str) -> tuple[str, bool]:
    ok, load_part, tick_part, resources = True, "", "", ""
    if name in measured.get("loads", {}):
        rows, passed = _load_rows(measured["loads"][name])
        ok &= passed
        load_part = "\n".join(rows)
        resources = "\n".join(f"| `{res}` | {size:,} |" for res, size in measured["loads"][name][0]["resources"])
        resources = ("\n#### First load, per resource (transferSize, first run)\n\n| resource | bytes |\n"
                     f"| --- | ---: |\n{resources}\n")
    if name in measured.get("slider", {}):
        rows, passed = _tick_rows(measured["slider"][name])
        ok &= passed
        tick_part = "\n".join(rows)
    text = f"""### {name}

#### First load

| measure | result | target | ratio to target | |
| --- | --- | --- | --- | --- |
{load_part}

#### Slider ticks

| measure | result | target | ratio to target | |
| --- | --- | --- | --- | --- |
{tick_part}
{resources}"""
    return text, ok


def report(measured: dict[str, Any], errors: list[str], load_before: str, names: list[str]) -> tuple[str, bool]:
    parts = [_variant(measured, name) for name in names]
    ok = not errors and bool(parts) and parts[0][1]  # the targets are this tree's (the first)
    problems = "".join(f"\n- ERROR: {e}" for e in errors)
    summary = _summary(measured, names)
    text = f"""# Browser benchmark results

Command: `.venv/bin/python bench/bench_browser.py [--before REF]` (each run rewrites this file; `--check` exits 1
on a miss of this tree's targets). `--before REF` (default `main`) also serves `git archive REF` from a temporary
directory, and every phase runs on both servers in turn, in one run, under the same load.

## Machine

{machine()}
- browser: headless Debian Chromium ({CHROMIUM}) through Playwright
- load average (1, 5, 15 min) before / after the run: {load_before} / {load_average()} (other work shares this machine)

## Side by side
{problems}

{summary}

Page: `{FIRST_PAGE}`, served by uvicorn (one worker) on 127.0.0.1; times from `performance.now()` in
the page. A tick sets the utilization slider and dispatches its input event; "numbers in the DOM" is the
fragment's numbers' version in the document (`#kpis[data-version]`), "chart updated" the moment the pool
chart element on the page says it shows that version (`data-drawn`: plotly resolved, or the server-drawn
SVG swapped in), and "repainted" the first frame after that. Every tick is a slider position the server has not computed
before. Bytes are Resource Timing `transferSize` (headers + compressed body) of the page and every
resource that finished before the first paint. The first loads run first, in fresh browser contexts (an empty
cache), each way in turn: "at once" navigates the new context's tab as soon as it exists; "the page" opens the tab,
waits until Chromium's processes together use under 10 ms of CPU in each of three 100 ms windows, then navigates.
The difference is the new window's own start-up (Chromium's omnibox popup is a WebUI renderer that loads about 180
chrome:// resources, with the browser and GPU processes busy beside it), not the page: both figures are the page's
Paint Timing from its own navigation start.

## Results

{chr(10).join(text for text, _ in parts)}"""
    return text, ok


def _export(ref: str, into: Path) -> Path:
    """`git archive ref` unpacked into a temporary directory (the tree as committed; no checkout)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _serve(root: Path, data: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "KVLEDGER_DATA_DIR": str(data), "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", f"from app.web.app import serve; serve('127.0.0.1', {port})"],
                            cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120  # start-up migrates the database: slow on a loaded machine
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/", timeout=1):
                return url, proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"the server in {root} did not start within 120 s")


def measure(measured: dict[str, Any], errors: list[str], names: list[str], before: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-browser-") as tmp:
        roots = {names[0]: ROOT}
        if before:
            Path(tmp, "before").mkdir()
            roots[names[1]] = _export(before, Path(tmp) / "before")
        servers = {name: _serve(root, Path(tmp) / f"data-{i}") for i, (name, root) in enumerate(roots.items())}
        urls = {name: url for name, (url, _) in servers.items()}
        try:
            from playwright.sync_api import sync_playwright

            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for phase, run in (("loads", first_loads), ("slider", slider_ticks)):
                    try:
                        measured[phase] = run(browser, urls)
                    except Exception as exc:  # recorded in the results; the run goes on
                        errors.append(f"{phase}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                browser.close()
        finally:
            for _, proc in servers.values():
                proc.terminate()
                proc.wait(timeout=10)


NOTES_HEADING = "## Where a tick's time goes (hand-recorded profiles)"


def _kept_notes(results: Path) -> str:
    """The hand-recorded section at the end of the old results (profiles, not this run): kept as is."""
    old = results.read_text() if results.exists() else ""
    at = old.find(NOTES_HEADING)
    return "\n" + old[at:] if at >= 0 else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--no-write", action="store_true", help="print the report, do not write RESULTS-browser.md")
    parser.add_argument("--before", default="main", help="a git ref measured side by side ('' for none)")
    args = parser.parse_args()
    load_before = load_average()
    measured: dict[str, Any] = {}
    errors: list[str] = []
    names = ["after (this tree)"] + ([f"before ({args.before})"] if args.before else [])
    if not Path(CHROMIUM).exists():
        errors.append(f"{CHROMIUM} is not installed (apt-get install chromium): nothing measured")
    else:
        try:
            measure(measured, errors, names, args.before or None)
        except Exception as exc:  # e.g. the server did not start: recorded
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    text, ok = report(measured, errors, load_before, names)
    results = ROOT / "bench" / "RESULTS-browser.md"
    text += _kept_notes(results)
    print(text)
    if not args.no_write:
        results.write_text(text)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
