"""Import a real vLLM log in the browser, see its ranks, and turn it into a plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
LOG = LOGS / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log"


def test_import_pasted_log_shows_ranks_and_makes_a_plan(page: Any) -> None:
    page.goto("/import")
    page.fill("#log-text", LOG.read_text())
    page.click("form[action='/import'] button[type=submit]")
    page.wait_for_selector(".ranks-preview")
    ranks = page.eval_on_selector_all(".ranks-preview tbody tr", "rows => rows.map(r => r.dataset.rank)")
    assert ranks == ["TP0", "TP1", "TP2", "TP3"]
    page.click("text=Make a plan from this run")
    page.wait_for_url("**/plan?base=*")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    rows = page.eval_on_selector_all("#ranks tbody tr", "rows => rows.map(r => r.dataset.rank)")
    assert rows == ["TP0", "TP1", "TP2", "TP3"]


def test_import_uploaded_log_file(page: Any) -> None:
    page.goto("/import")
    page.set_input_files("#log-file", str(LOGS / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log"))
    page.click("form[action='/import'] button[type=submit]")
    page.wait_for_selector(".ranks-preview")
    count = page.eval_on_selector_all(".ranks-preview tbody tr", "rows => rows.length")
    assert count >= 8
