"""Qwen3-Next's own MTP command, pasted on the home page, in Chromium.

`vllm serve Qwen/Qwen3-Next-80B-A3B-Thinking -tp 4 --speculative-config '{"method":"qwen3_next_mtp",
"num_speculative_tokens":2}'` (the model card's command) came back to the home page with "mtp needs
MTP layers in the target's checkpoint, and this config has no num_nextn_predict_layers": vLLM turns
every qwen3_next config into qwen3_next_mtp and Qwen3NextMTP builds getattr(config,
"num_nextn_predict_layers", 1) layers (vllm/config/speculative.py:555, vllm/model_executor/models/
qwen3_next_mtp.py:60 @28be48fa9), so the checkpoint's one MTP layer is planned as the draft.
"""

from __future__ import annotations

from typing import Any

import pytest

from .plan_page import paste_serve

pytestmark = pytest.mark.e2e

COMMAND = ("vllm serve Qwen/Qwen3-Next-80B-A3B-Thinking -tp 4 "
           """--speculative-config '{"method":"qwen3_next_mtp","num_speculative_tokens":2}'""")


def test_qwen3_next_mtp_command_opens_a_plan_with_its_draft(page: Any) -> None:
    plan = paste_serve(page, COMMAND, "H100 80GB")
    spec = plan["engine"]["speculative"]
    assert (spec["method"], spec["num_speculative_tokens"]) == ("mtp", 2)
    # one MTP layer like the last (full-attention, MoE) decoder layer, split over TP4
    assert 0.5 * 2**30 < plan["ranks"][0]["speculative_bytes"] < 1.5 * 2**30
    headers = page.eval_on_selector_all("#ranks thead th", "ths => ths.map(t => t.textContent.trim())")
    assert "draft" in headers
    assert "--speculative-config" in page.inner_text("#flags-text")
