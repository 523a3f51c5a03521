"""A markup payload typed into every text field stays inert text."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e

PAYLOAD = "<img src=x onerror=window.__xss=1>"
TEXT_FIELDS = "input[type=text], input[type=search], input:not([type]), textarea"


def _text_fields(page: Any) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(TEXT_FIELDS, "els => els.map(e => e.id)")
    return ids


def _assert_inert(page: Any) -> None:
    assert page.evaluate("() => window.__xss") is None
    assert page.evaluate("() => document.querySelectorAll('img[src=x]').length") == 0


def test_payload_in_plan_form_fields_is_inert(page: Any) -> None:
    page.goto("/plan?model=llama-3.1-70b&tp=4")
    fields = _text_fields(page)
    assert {"f-gpu", "f-vllm", "f-kv_bytes", "f-reserve"} <= set(fields)
    for field in fields:
        page.fill(f"#{field}", PAYLOAD)
        page.wait_for_function(
            "id => document.querySelector('#err-' + id.slice(2)).textContent.trim() !== ''", arg=field
        )
        _assert_inert(page)
        page.fill(f"#{field}", "")
        page.wait_for_timeout(400)
    _assert_inert(page)


@pytest.mark.parametrize("path", ["/", "/import", "/compare"])
def test_payload_in_every_form_field_is_inert(page: Any, path: str) -> None:
    page.goto(path)
    forms = page.eval_on_selector_all("main form", "fs => fs.length")
    for index in range(forms):
        page.goto(path)
        form = page.locator("main form").nth(index)
        for field in form.locator(TEXT_FIELDS).all():
            field.fill(PAYLOAD)
        _assert_inert(page)
        button = form.locator("button[type=submit]")
        if button.count():
            button.first.click()
            page.wait_for_load_state()
        page.wait_for_timeout(300)
        _assert_inert(page)
