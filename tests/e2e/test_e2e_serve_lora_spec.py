"""A `vllm serve` command with LoRA or a draft model, pasted on the home page, in Chromium. The plan
opened without the LoRA slots or the draft (the reader kept the flags as ones "the plan does not
model"); now the plan page shows the LoRA / draft column, the knobs and the flags."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_page import paste_serve

pytestmark = pytest.mark.e2e

LLAMA = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768"


def _columns(page: Any) -> list[str]:
    """The rank table's column labels as the page states them (the CSS upper-cases the header)."""
    labels: list[str] = page.eval_on_selector_all("#ranks thead th", "ths => ths.map(t => t.textContent.trim())")
    return labels


def test_lora_command_on_start_serve(page: Any) -> None:
    plan = paste_serve(page, f"{LLAMA} --enable-lora --max-lora-rank 64 --max-loras 4")
    assert plan["engine"]["lora"]["max_loras"] == 4 and plan["ranks"][0]["lora_bytes"] > 0
    assert "LoRA" in _columns(page)
    assert page.input_value("#f-loras") == "4" and page.input_value("#f-lora_rank") == "64"
    flags = page.inner_text("#flags-text")
    assert "--enable-lora" in flags and "--max-lora-rank 64" in flags


def test_speculative_command_on_start_serve(page: Any) -> None:
    plan = paste_serve(page, LLAMA + """ --speculative-config '{"model": "meta-llama/Llama-3.2-1B-Instruct", """
                                """"num_speculative_tokens": 4}'""")
    assert plan["engine"]["speculative"]["method"] == "draft_model" and plan["draft_kv_bytes_per_token"] > 0
    assert "draft" in _columns(page)
    assert "--speculative-config" in page.inner_text("#flags-text")
