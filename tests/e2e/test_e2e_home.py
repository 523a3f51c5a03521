"""Home: catalogue search as you type, and starting a plan from a pasted config.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parents[1] / "data"


def test_catalogue_search_as_you_type(page: Any) -> None:
    page.goto("/")
    page.fill("#q", "qwen3 8b")
    page.wait_for_function("() => document.querySelector('#model-results li a').textContent.includes('Qwen3-8B')")
    assert page.url.endswith("/")
    page.click("#model-results li a >> nth=0")
    page.wait_for_url("**/plan?model=qwen3-8b")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")


def test_example_plans_open(page: Any) -> None:
    page.goto("/")
    links = page.eval_on_selector_all("#start-examples a", "as => as.map(a => a.getAttribute('href'))")
    assert len(links) >= 3
    for href in links:
        page.goto(href)
        page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
        assert page.inner_text("#adm-tokens")


def test_pasted_config_json_starts_a_plan(page: Any) -> None:
    page.goto("/")
    page.fill("#home-config", (DATA / "configs" / "qwen25-7b.json").read_text())
    page.fill("#home-config-gpu", "40GiB")
    page.click("#start-config button[type=submit]")
    page.wait_for_url("**/plan?base=*")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert "40.00 GiB" in page.inner_text("#ranks")
