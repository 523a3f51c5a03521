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


def test_import_a_blocks_only_log_makes_a_plan_of_its_tokens(page: Any) -> None:
    """public 03 (vLLM 0.8.4, Llama-3.1-8B, L40S) states "GPU KV cache size: 158,656 tokens" and no KV
    memory: it imported as "no plan" (no per-rank memory). Its room now comes from the blocks."""
    page.goto("/import")
    page.fill("#log-text", (LOGS / "public" / "03-v084-llama31-8b-l40s-tp1.log").read_text())
    page.select_option("#log-model", "llama-3.1-8b")
    page.click("form[action='/import'] button[type=submit]")
    room = page.inner_text("#room-from-blocks-0", timeout=30_000)
    assert "158,656 tokens" in room and "measured-derived" in room and "cannot be checked" in room
    page.click("text=Make a plan from this run")
    page.wait_for_url("**/plan?base=*")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    body = page.inner_text("body")
    assert "158,656" in body and "cannot be checked" in body
    assert page.eval_on_selector_all("#ranks tbody tr", "rows => rows.map(r => r.dataset.rank)") == ["driver"]
