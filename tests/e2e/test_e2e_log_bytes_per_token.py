"""A plan from a log that names no catalogue model says what its bytes per token are, in Chromium.

tests/data/vllm-logs/14 (Qwen3-235B-A22B-FP8, 8 × L40S, TP8 with --enable-expert-parallel) names
no model: its plan showed "48,129 B per token per rank" (now 48,128) with the note "model given as bytes per
token per rank", as if someone had stated it — the figure is the log's smallest KV memory over its
14,834 blocks, the largest the log allows (the model's own is 48,128) — and said
"--enable-expert-parallel on a model without MoE layers changes nothing" of a 128-expert MoE model.
The plan now says where the figure comes from and its range, and that the experts are unknown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

LOG14 = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log"


def test_a_log_without_its_model_plans_bytes_per_token_it_says_it_derived(page: Any) -> None:
    page.goto("/import")
    page.set_input_files("#log-file", str(LOG14))
    page.click("form[action='/import'] button[type=submit]")
    page.wait_for_selector(".ranks-preview")
    page.click("text=Make a plan from this run")
    page.wait_for_url("**/plan?base=*")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    body = page.inner_text("main")
    # every worker's own token line bounds it too (9257dfe): 48,128 B, the model's own figure
    assert "48,128 B per token per rank" in body
    assert ("KV bytes per token per rank from the log, not from the model: its smallest KV memory over 14,834 "
            "blocks of 16 tokens gives 48,126 – 48,128 B") in body
    assert "on a model without MoE layers" not in body
    assert "--enable-expert-parallel kept as stated: the model is given as bytes per token" in body
