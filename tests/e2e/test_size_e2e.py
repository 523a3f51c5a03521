"""The /size page in a real browser: the example ranked and charted, a new target searched through
htmx (the indicator shows while it runs, no navigation, the URL keeps the state), a row opening its
plan with the same tokens, and an unknown GPU answered beside its field."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

pytestmark = pytest.mark.e2e

WATCH = """() => {
  window.sizeMarker = 'still here';
  window.busySeen = false;
  document.body.addEventListener('htmx:beforeSend', () => {
    window.busySeen = document.getElementById('size-busy').classList.contains('htmx-request')
      || document.getElementById('size-form').classList.contains('htmx-request');
  });
}"""


def test_search_rank_chart_and_open_a_plan(page: Any, artifacts: Path) -> None:
    page.goto("/size")
    page.wait_for_selector("#chart-size[data-drawn]", state="attached")
    assert "2 GPUs serve" in page.inner_text("#size-message")
    traces = page.evaluate("() => document.getElementById('chart-size').data.map(t => t.name)")
    assert {"H100 80GB", "H200 141GB", "Pareto front"} <= set(traces)
    page.screenshot(path=str(artifacts / "size-page.png"), full_page=True)

    page.evaluate(WATCH)
    page.fill("#f-gpus", "H100 80GB")
    page.fill("#f-concurrency", "80")
    page.click("#size-submit")
    page.wait_for_function("() => document.getElementById('size-message').textContent.includes('H100 80GB')")
    assert page.evaluate("() => window.sizeMarker") == "still here"  # an htmx swap, not a page load
    assert page.evaluate("() => window.busySeen") is True  # the indicator was on while the search ran
    state = dict(parse_qsl(urlsplit(page.url).query))
    assert state["concurrency"] == "80" and state["gpus"] == "H100 80GB" and "tokens" not in state
    page.wait_for_selector("#chart-size[data-drawn]", state="attached")
    traces = page.evaluate("() => document.getElementById('chart-size').data.map(t => t.name)")
    assert "H200 141GB" not in traces
    assert page.evaluate("() => document.getElementById('f-concurrency').value") == "80"

    tokens = page.inner_text("#size-options tbody tr:first-child td.tokens")
    page.click("#size-options tbody tr:first-child a.plan-link")
    page.wait_for_url("**/plan?*")
    assert page.inner_text("[data-kpi=tokens] .value") == tokens


def test_unknown_gpu_is_answered_beside_its_field(page: Any) -> None:
    page.goto("/size?model=llama-3.1-8b&max_model_len=8192&gpus=L4%2024GB&max_gpus=2")
    page.wait_for_selector("#size-message")
    page.fill("#f-gpus", "H100 90GB")
    page.click("#size-submit")
    page.wait_for_function("() => document.getElementById('err-gpus').textContent.includes('nearest')")
    assert "H100 80GB" in page.inner_text("#err-gpus")
    assert page.evaluate("() => document.getElementById('f-gpus').value") == "H100 90GB"


def test_a_refused_search_pushes_its_canonical_url(page: Any) -> None:
    """A 422 on /size pushed the raw form submission (every field, blanks and the unticked
    allow_long=false included) into the address bar; it is now the canonical URL of what was asked,
    as the plan page writes a refused what-if's (and as /size writes an answer's), so a reload shows the
    same refusal and Back returns to the last answer."""
    start = "/size?gpus=L4+24GB&max_gpus=2&max_model_len=8192&model=llama-3.1-8b"
    page.goto(start)
    page.wait_for_selector("#size-message")
    page.fill("#f-gpus", "H100 90GB")
    page.click("#size-submit")
    page.wait_for_function("() => document.getElementById('err-gpus').textContent.includes('nearest')")
    page.wait_for_url("**/size?gpus=H100+90GB&max_gpus=2&max_model_len=8192&model=llama-3.1-8b")
    assert "allow_long" not in page.url and "concurrency=" not in page.url  # no blank or unticked field
    page.reload()
    page.wait_for_selector("#err-gpus")
    assert "nearest" in page.inner_text("#err-gpus")
    assert page.input_value("#f-gpus") == "H100 90GB"
    page.go_back()
    page.wait_for_url(f"**{start}")
