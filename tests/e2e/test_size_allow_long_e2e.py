"""The /size page's 'Allow long max model len' box in a real browser: a 16k target for gemma-2-9b-it
(derived length 8,192) is refused with the box's name in the message; ticking it searches through
htmx, the address bar carries allow_long=true, a reload keeps the box ticked, and the first option's
plan link opens the plan at 16k with the variable (its exports' environment)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

pytestmark = pytest.mark.e2e

QUERY = (
    "model=gemma-2-9b-it&max_model_len=16384&concurrency=1&gpus=H100+80GB&max_gpus=1&kv_dtype=auto&quant=none&engines=1"
)


def test_tick_allow_long_sizes_a_long_target(page: Any) -> None:
    page.goto(f"/size?{QUERY}")
    page.wait_for_selector("#size-error")
    assert "Allow long max model len" in page.inner_text("#size-error")
    page.check("#f-allow_long")
    page.click("#size-submit")
    page.wait_for_selector("#size-options")
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in page.inner_text(".size-note")
    assert dict(parse_qsl(urlsplit(page.url).query))["allow_long"] == "true"
    page.reload()
    page.wait_for_selector("#size-options")
    assert page.is_checked("#f-allow_long")
    page.uncheck("#f-allow_long")
    page.click("#size-submit")
    page.wait_for_selector("#size-error")
    assert dict(parse_qsl(urlsplit(page.url).query)).get("allow_long") != "true"
    page.go_back()
    page.wait_for_selector("#size-options")
    page.click("#size-options tbody tr:first-child a.plan-link")
    page.wait_for_url("**/plan?*")
    assert page.is_checked("#f-allow_long")
    assert page.input_value("#f-max_model_len") == "16384"
