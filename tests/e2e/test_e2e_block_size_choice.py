"""The page and its URL plan the same block size, in Chromium.

On /plan?model=deepseek-v3&tp=8&pp=2 (H100 80GB), choosing the fp8 KV cache showed 1,677,040
tokens while the address bar's URL — and its .json twin, and the page reloaded — gave 1,676,992:
the block-size select always sent `block_size=16`, which the plan took as stated (so vLLM's MLA
backend rule, 64 for an fp8 cache on Hopper, did not apply), and the canonical URL dropped it as
the default. The select now has "vLLM's choice" (`block_size=default`, not stated), shown when
nothing set it; a chosen 16 stays in the URL.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .plan_page import ready, twin

pytestmark = pytest.mark.e2e



def _choose(page: Any, key: str, value: str, in_url: str) -> None:
    page.select_option(f"#f-{key}", value)
    page.wait_for_url(re.compile(in_url))
    ready(page)


def _shown_tokens(page: Any) -> int:
    body = page.inner_text("main")
    found = re.search(r"TOKENS \(BLOCK-ROUNDED\)\s*\n\s*([\d,]+)", body, re.IGNORECASE)
    assert found, body[:400]
    return int(found.group(1).replace(",", ""))



def test_the_fp8_cache_of_an_mla_model_shows_what_its_url_plans(page: Any) -> None:
    page.goto("/plan?model=deepseek-v3&tp=8&pp=2&gpu=H100+80GB")
    ready(page)
    _choose(page, "kv_dtype", "fp8", r"kv_dtype=fp8")
    plan = twin(page)
    assert _shown_tokens(page) == plan["tokens"]  # was 1,677,040 shown, 1,676,992 in the URL's plan
    assert plan["block_size"] == 64  # vLLM's MLA backend on Hopper with an fp8 cache (app.core.mla_rules)
    assert "block_size" not in page.url
    assert page.eval_on_selector("#f-block_size", "e => e.value") == "default"

    _choose(page, "block_size", "16", r"block_size=16")
    plan = twin(page)
    assert plan["block_size"] == 16
    assert _shown_tokens(page) == plan["tokens"]
    page.reload()
    ready(page)
    assert _shown_tokens(page) == plan["tokens"]
    assert page.eval_on_selector("#f-block_size", "e => e.value") == "16"

    _choose(page, "block_size", "default", r"^(?!.*block_size).*kv_dtype=fp8")
    assert twin(page)["block_size"] == 64
    assert _shown_tokens(page) == twin(page)["tokens"]
