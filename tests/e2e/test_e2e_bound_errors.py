"""An out-of-range number on the plan page, in Chromium: the message beside the input says, in our
words, what is wrong, where and the stated range (it showed pydantic's "Input should be less than
or equal to 1"); and a link that sets a knob by vLLM's flag name or an environment variable has its
error name that key, beside the knob's input (it was told under `util` / `mla_off`)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e


def _slot(page: Any, key: str) -> str:
    page.wait_for_function(f"() => document.querySelector('#err-{key}').textContent.trim() !== ''")
    text: str = page.inner_text(f"#err-{key}").strip()
    return text


def test_util_out_of_range_says_the_range_in_our_words(page: Any) -> None:
    page.goto("/plan?util=1.7")
    assert _slot(page, "util") == "gpu_memory_utilization 1.7 is out of range: give a fraction in (0, 1]"
    assert "Input should" not in page.inner_text("main")
    # the form of the plan that failed shows the model and GPU it plans (the model list's first
    # entry, CodeLlama-34B, and an empty GPU were shown)
    assert page.eval_on_selector("#f-model", "e => e.value") == "llama-3.1-8b"
    assert page.input_value("#f-gpu") == "H100 80GB"


def test_typing_an_out_of_range_number_says_its_range(page: Any) -> None:
    page.goto("/plan?model=llama-3.1-8b")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.fill("#f-max_num_seqs", "0")
    assert _slot(page, "max_num_seqs") == "max_num_seqs 0 is out of range: give a whole number from 1 to 1,000,000"


@pytest.mark.parametrize(("query", "key", "message"), [
    ("gpu-memory-utilization=1.7", "util", "gpu-memory-utilization 1.7 is out of range: give a fraction in (0, 1] "
                                           "(read as util: engine.gpu_memory_utilization)"),
    ("VLLM_MLA_DISABLE=maybe", "mla_off",
     "VLLM_MLA_DISABLE: expected true or false, got 'maybe' (read as mla_off: engine.mla_disable)"),
])
def test_an_alias_error_names_the_key_the_link_wrote(page: Any, query: str, key: str, message: str) -> None:
    page.goto(f"/plan?{query}")
    assert _slot(page, key) == message
    assert message in page.inner_text("[role=alert].alert")
