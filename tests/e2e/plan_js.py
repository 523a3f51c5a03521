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

#: The pool chart as drawn (every segment's hover title), the figure beside it (JSON), and the
#: numbers shown ("KV on the binding rank", each rank's KV in the rank table), read together: no
#: response can land between them.
POOL_STATE = """() => {
  const heads = Array.from(document.querySelectorAll("#ranks thead th"), th => th.textContent.trim());
  const at = heads.indexOf("KV");
  const kpi = document.querySelector("#kpis [data-kpi=kv] .value");
  return {
    titles: Array.from(document.querySelectorAll("#chart-pool .seg title"), t => t.textContent),
    figure: document.getElementById("chart-pool-data").textContent,
    version: document.getElementById("chart-pool-data").dataset.version,
    drawn: document.getElementById("chart-pool").getAttribute("data-drawn"),
    kpi_kv: kpi ? kpi.textContent.trim() : null,
    rank_kv: Object.fromEntries(Array.from(document.querySelectorAll("#ranks tbody tr[data-rank]"),
      tr => [tr.dataset.rank, tr.children[at].textContent.trim()])),
  };
}"""

#: Records POOL_STATE in every animation frame (what each painted frame shows) while it changes:
#: window.__frames, a list of distinct states in frame order; window.__stopFrames() ends it.
RECORD_FRAMES = """() => {
  window.__frames = [];
  let last = "", on = true;
  const read = """ + POOL_STATE + """;
  const record = () => {
    const state = read();
    const key = JSON.stringify(state);
    if (key !== last) { window.__frames.push(state); last = key; }
  };
  const frame = () => { if (on) { record(); requestAnimationFrame(frame); } };
  window.__stopFrames = () => { record(); on = false; return window.__frames; };
  requestAnimationFrame(frame);
}"""
