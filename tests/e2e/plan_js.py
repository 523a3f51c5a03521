"""Page-side conditions the plan-page browser tests wait on, each read in one evaluation.

htmx marks a request in flight with its request class on the element's `hx-indicator` when it has
one, not on the element: the plan form names `#busy`, so `#plan-form.htmx-request` never matches
and a wait on it passes with a request still in flight (the burst test read the chart, then the
figure beside it, with a response landing in between: a flaky "disagreement" one run in 6-10).
"""

from __future__ import annotations

#: No plan-form request in flight or queued to go out (htmx issues a queued request in the task that
#: ends the one before, so no evaluation sees the gap between them).
PLAN_IDLE = """() => {
  const form = document.getElementById("plan-form");
  const indicator = document.querySelector(form.getAttribute("hx-indicator")) || form;
  return !indicator.classList.contains("htmx-request");
}"""

#: The pool chart as drawn (every segment's hover title, the column it stands in, the outlined
#: segment's column), the version it says it shows (`data-drawn`) beside the numbers' (`#kpis`), the
#: plan's address (the save form's, swapped in with them) and the numbers shown ("KV on the binding
#: rank", every rank-table cell with its source class), read together: no response can land
#: between them. Reads `doc` (a parsed page: what a fresh load of an address shows) or the document.
POOL_STATE = """(doc) => {
  doc = doc || document;
  const heads = Array.from(doc.querySelectorAll("#ranks thead th"), th => th.textContent.trim());
  const kpi = doc.querySelector("#kpis [data-kpi=kv] .value");
  const plan = doc.querySelector("#save-plan input[name=plan]");
  const binding = doc.querySelector("#ranks tbody tr.binding");
  return {
    titles: Array.from(doc.querySelectorAll("#chart-pool .seg title"), t => t.textContent),
    columns: Array.from(doc.querySelectorAll("#chart-pool .column"), c => c.getAttribute("data-rank")),
    outlined: Array.from(doc.querySelectorAll("#chart-pool .seg[stroke], #chart-pool .seg rect[stroke]"),
      s => s.closest(".column").getAttribute("data-rank")),
    notes: Array.from(doc.querySelectorAll("#chart-pool .note"), t => t.textContent),
    drawn: doc.getElementById("chart-pool").getAttribute("data-drawn"),
    version: doc.getElementById("kpis").getAttribute("data-version"),
    url: plan ? plan.value : null,
    kpi_kv: kpi ? kpi.textContent.trim() : null,
    binding: binding ? binding.dataset.rank : null,
    rows: Object.fromEntries(Array.from(doc.querySelectorAll("#ranks tbody tr[data-rank]"),
      tr => [tr.dataset.rank, Object.fromEntries(Array.from(tr.children, (td, i) =>
        [heads[i], [td.textContent.trim(), td.className.replace(/^num ?/, "")]]))])),
  };
}"""

#: POOL_STATE of a whole page's HTML (a fresh load of an address, parsed, its scripts not run):
#: what the page shows when opened there, to compare a ticked page's state with.
FRESH_STATE = """text => (""" + POOL_STATE + """)(new DOMParser().parseFromString(text, "text/html"))"""

#: Records POOL_STATE in every animation frame (what each painted frame shows) while it changes:
#: window.__frames, a list of distinct states in frame order; window.__stopFrames() ends it.
RECORD_FRAMES = """() => {
  window.__frames = [];
  let last = "", on = true;
  const read = """ + POOL_STATE + """;
  const record = () => {
    const state = read(document);
    const key = JSON.stringify(state);
    if (key !== last) { window.__frames.push(state); last = key; }
  };
  const frame = () => { if (on) { record(); requestAnimationFrame(frame); } };
  window.__stopFrames = () => { record(); on = false; return window.__frames; };
  requestAnimationFrame(frame);
}"""
