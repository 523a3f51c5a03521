"""`/plan?tp=²` answered a 500: the form's TP select read the value with `str.isdigit()`, which takes
'²' (a superscript two), and `int('²')` then raised. Every whole-number key of the plan page, given
digits int() does not read, answers the form with its message, never a 500."""

from __future__ import annotations

import pytest

from app.services import plan_query

from .support import TestClient

INT_KEYS = sorted(knob.key for knob in plan_query.KNOBS if knob.kind == "int")


@pytest.mark.parametrize("key", INT_KEYS)
@pytest.mark.parametrize("digits", ["²", "٣", "１"])  # superscript, Arabic-Indic, fullwidth
def test_a_whole_number_in_other_digits_is_refused_on_the_form(client: TestClient, key: str, digits: str) -> None:
    for path in ("/plan", "/plan.json"):
        response = client.get(path, params={"model": "llama-3.1-8b", key: digits})
        assert response.status_code in (200, 303, 422), (path, key, response.status_code, response.text[:300])
        if response.status_code == 422 and path == "/plan":
            assert "Traceback" not in response.text
