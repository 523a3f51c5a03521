"""The public/39 walk in a real browser (issue 17 items 7, 8 and 16): a v0.7.2 Qwen2.5-32B TP2 log
(vllm-project/vllm#15815) that names neither its model nor max_model_len.

Before: the import linked a plan that said "Cannot compute: the model does not state
max_position_embeddings", its form showed slider midpoints (util 0.55, block 1, TP 1), it was
titled "Plan from a stored document" and the console showed a 422. Now the import keeps the log
and asks for the model; with it chosen the plan is TP2 with the engine's 3,947 blocks, named,
and its deploy command is `vllm serve Qwen/Qwen2.5-32B --tensor-parallel-size 2 …`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

LOG = next((Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "public").glob("39-*.log"))


def test_public_39_import_asks_for_the_model_then_plans_tp2(page: Any) -> None:
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
    page.goto("/import")
    page.fill("#log-text", LOG.read_text())
    page.click("form[action='/import'] button[type=submit]")
    page.wait_for_selector(".import-run")
    run = page.inner_text(".import-run")
    assert "does not name its model" in run and "config.json" in run
    assert page.locator(".import-run a.button").count() == 0  # no link to a plan that cannot compute
    assert "Loading model weights took 30.7098 GB" in page.input_value("#log-text")  # the log stays

    page.select_option("#log-model", "qwen2.5-32b")
    page.click("form[action='/import'] button[type=submit]")
    page.wait_for_selector(".import-run a.button")
    page.click("text=Make a plan from this run")
    page.wait_for_url("**/plan?base=*")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    assert page.title() == "Plan · Qwen/Qwen2.5-32B · KV Ledger"
    assert page.inner_text("h1") == "Qwen/Qwen2.5-32B"
    assert page.eval_on_selector("select[name=tp]", "s => s.value") == "2"
    assert page.eval_on_selector("input[name=util]", "i => i.value") == "0.9"
    assert page.eval_on_selector("select[name=block_size]", "s => s.value") == "16"
    # The log does not state the run's max_model_len: at the model's 131,072 it does not fit, so
    # the page leads with why and the largest max_model_len that fits is one click away.
    assert page.locator("#flags-refused").count() == 1
    page.click("#start-levers tr[data-knob=max_model_len] a")
    page.wait_for_selector("#flags-text")
    deploy = page.inner_text("#flags-text")
    assert deploy.startswith("vllm serve Qwen/Qwen2.5-32B \\\n  --tensor-parallel-size 2")
    assert "--gpu-memory-utilization 0.9" in deploy
    assert "3,947" in page.inner_text("#results")
    assert console == [], console
