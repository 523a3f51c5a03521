"""The GPU picker and the checkpoint index in a real browser: presets offered, free text taken,
an index pasted next to config.json sizes the weights, and the page says where totals came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.gpus import PRESETS

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parents[1] / "data"
NOTES = "() => [...document.querySelectorAll('#results li')].map(li => li.textContent).join('\\n')"


def _open_plan(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")


def test_gpu_picker_offers_presets_and_takes_free_text(page: Any) -> None:
    _open_plan(page, "/plan?model=llama-3.1-8b")
    assert page.input_value("#f-gpu") == "H100 80GB"
    offered = page.eval_on_selector_all("#list-gpu option", "os => os.map(o => o.value)")
    assert offered == [p.name for p in PRESETS]
    assert "H100 80GB preset" in page.evaluate(NOTES)

    page.fill("#f-gpu", "A100 80GB")
    page.wait_for_url("**gpu=A100+80GB**")
    page.wait_for_function(f"() => ({NOTES})().includes('A100 80GB preset')")

    page.fill("#f-gpu", "H900")
    page.wait_for_function("() => document.querySelector('#err-gpu').textContent.includes('unknown GPU')")
    assert "nearest" in page.inner_text("#err-gpu")

    page.fill("#f-gpu", "75GiB")
    page.wait_for_url("**gpu=75GiB**")
    page.wait_for_function("() => document.querySelector('#err-gpu').textContent.trim() === ''")


def test_config_with_its_safetensors_index_starts_a_plan_on_a_preset(page: Any) -> None:
    page.goto("/")
    assert page.input_value("#home-config-gpu") == "H100 80GB"
    page.fill("#home-config", (DATA / "configs" / "llama31-8b.json").read_text())
    page.fill("#home-index", json.dumps({"metadata": {"total_size": 16_060_522_496}, "weight_map": {}}))
    page.fill("#home-config-gpu", "L40S 48GB")
    page.click("#start-config button[type=submit]")
    page.wait_for_url("**/plan?base=*")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    notes = page.evaluate(NOTES)
    assert "model.safetensors.index.json: total_size 16,060,522,496 B" in notes
    assert "L40S 48GB preset" in notes
    assert page.input_value("#f-gpu") == "L40S 48GB"


def test_a_bad_index_is_shown_on_the_config_form(page: Any) -> None:
    page.goto("/")
    page.fill("#home-config", (DATA / "configs" / "llama31-8b.json").read_text())
    page.fill("#home-index", '{"metadata": {}}')
    page.click("#start-config button[type=submit]")
    page.wait_for_selector("#start-config .form-error, #start-config [role=alert]")
    assert "model.safetensors_index.metadata" in page.inner_text("#start-config")


def test_a_catalogue_click_opens_at_the_smallest_layout_that_starts(page: Any) -> None:
    page.goto("/")
    page.fill("#q", "llama 3.1 70b")
    page.wait_for_function("() => [...document.querySelectorAll('#model-results li a')]"
                           ".some(a => a.textContent.trim() === 'Llama-3.1-70B')")
    page.click("#model-results li a:text-is('Llama-3.1-70B')")
    page.wait_for_url("**/plan?model=llama-3.1-70b")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert page.input_value("#f-tp") == "4"
    assert "opened at TP4: the smallest layout that starts on H100 80GB" in page.inner_text("#layout-choice")
    # choosing TP1 keeps TP1 (in the URL) and shows it will not start
    page.select_option("#f-tp", "1")
    page.wait_for_url("**tp=1**")
    shown = page.evaluate("() => fetch('/plan.json' + location.search).then(r => r.json())"
                          ".then(j => [j.layout.tp, j.will_start])")
    assert shown == [1, False]
