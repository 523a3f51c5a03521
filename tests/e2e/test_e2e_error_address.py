"""A value the plan refuses, typed in the plan form, in Chromium. Before, the 422 showed the error
beside the field but left the address bar at the last good plan: a reload (or a copied link) showed a
plan with the old value, not what the user was looking at. Now the address is what was asked, written
as a canonical plan URL is (the form's fields left at their defaults dropped), so a reload shows the
same refusal with the typed value in its field; correcting the value gives the good plan's URL."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from .plan_js import PLAN_IDLE

pytestmark = pytest.mark.e2e


def _query(page: Any) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(page.url).query))


def test_a_refused_value_is_the_address(page: Any) -> None:
    page.goto("/plan?model=llama-3.1-8b&max_model_len=8192")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_function(PLAN_IDLE)
    page.fill("#f-max_model_len", "999999")  # above Llama-3.1's derived 131,072: vLLM refuses it
    page.wait_for_function("() => document.getElementById('err-max_model_len').textContent.includes('131,072')")
    page.wait_for_url("**/plan?max_model_len=999999")  # as a plan's canonical URL is: no field left at its default
    page.reload()
    page.wait_for_selector("#err-max_model_len")
    assert "131,072" in page.inner_text("#err-max_model_len")
    assert page.input_value("#f-max_model_len") == "999999"
    page.fill("#f-max_model_len", "16384")
    page.wait_for_url("**/plan?max_model_len=16384")
    page.wait_for_function(PLAN_IDLE)
    assert page.inner_text("#err-max_model_len") == ""
    page.fill("#f-gpu_free", "lots")  # a value that does not parse stays as typed
    page.wait_for_function("() => window.location.search.includes('gpu_free=lots')")
    assert _query(page)["max_model_len"] == "16384"
    page.reload()
    page.wait_for_selector("#err-gpu_free")
    assert page.input_value("#f-gpu_free") == "lots" and page.inner_text("#err-gpu_free") != ""
