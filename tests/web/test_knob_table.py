"""The knob table is the one vocabulary of the plan form: its limits are the validator's, the form
renders them, and every part of the what-if machinery reads its keys from it.

What a new knob needs (the fp8-weights knob touched ten files before the table): one row in
`app.services.plan_query.KNOBS`, one field in `app.schemas`, one core transform (for a what-if
knob: `app.core.whatif`, applied in `app.services.plans`) and one line in
`templates/partials/_plan_form.html`. `test_every_knob_reaches_the_form_the_query_and_the_errors`
fails when a row is missing one of the others.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.core.errors import InputError
from app.schemas import validate_plan
from app.services import plan_query
from app.services.plan_query import KNOBS, Knob
from app.web import querystring
from app.web.plan.form import FORM_KEYS

from .support import TestClient

FORM = Path(__file__).resolve().parents[2] / "templates" / "partials" / "_plan_form.html"


def _input(html: str, key: str) -> str:
    match = re.search(rf'<(?:input|select)[^>]*\bname="{key}"[^>]*>', html)
    return match.group(0) if match else ""


def _attr(tag: str, name: str) -> str | None:
    match = re.search(rf'\b{name}="([^"]*)"', tag)
    return match.group(1) if match else None


def _sample(knob: Knob, value: float) -> object:
    """A value for the knob's document field (ints for int fields)."""
    return int(value) if knob.kind == "int" else value


def _document_at(knob: Knob, value: object) -> dict[str, object]:
    *parents, name = knob.path.split(".")
    doc: dict[str, object] = {"model": {"kv_bytes_per_token": 1024}, "gpu": {"total": "80 GiB"}}
    node = doc
    for part in parents:
        child = node.setdefault(part, {})
        assert isinstance(child, dict)
        node = child
    node[name] = value
    return doc


@pytest.mark.parametrize("knob", [k for k in KNOBS if k.limits.lo is not None or k.limits.hi is not None],
                         ids=lambda k: k.key)
def test_limits_are_the_validators(knob: Knob) -> None:
    """The table's limits are read from the pydantic constraints: the validator accepts a value
    at each closed bound and refuses one just outside it."""
    limits = knob.limits
    step = 1.0 if knob.kind == "int" else 1e-6
    for bound, outside, is_open in ((limits.lo, -step, limits.lo_open), (limits.hi, step, limits.hi_open)):
        if bound is None:
            continue
        inside = bound - outside if is_open else bound
        validate_plan(_document_at(knob, _sample(knob, inside)))
        with pytest.raises(InputError):
            validate_plan(_document_at(knob, _sample(knob, bound + outside if not is_open else bound)))


@pytest.mark.parametrize("knob", [k for k in KNOBS if k.slider], ids=lambda k: k.key)
def test_slider_spans_lie_within_the_validators_limits(knob: Knob) -> None:
    assert knob.slider is not None
    low, high, step = knob.slider
    assert low < high and step > 0
    assert knob.limits.admits(low) and knob.limits.admits(high)


def test_the_form_renders_the_tables_limits(client: TestClient) -> None:
    html = client.get("/plan").text
    for knob in KNOBS:
        tag = _input(html, knob.key)
        assert tag, knob.key
        if knob.slider:
            assert _attr(tag, "type") == "range"
            assert [float(_attr(tag, a) or "nan") for a in ("min", "max", "step")] == [float(x) for x in knob.slider]
        elif _attr(tag, "type") == "number":
            assert knob.limits.lo is not None
            assert float(_attr(tag, "min") or "nan") == knob.limits.lo, knob.key
            if knob.limits.hi is not None:
                assert float(_attr(tag, "max") or "nan") == knob.limits.hi, knob.key


def test_every_knob_reaches_the_form_the_query_and_the_errors(client: TestClient) -> None:
    form = FORM.read_text(encoding="utf-8")
    html = client.get("/plan").text
    for knob in KNOBS:
        assert f'"{knob.key}"' in form, f"{knob.key}: no line in {FORM}"
        assert knob.key in querystring.KEYS and knob.key in FORM_KEYS
        assert querystring.field_key(knob.path) == knob.key
        if knob.whatif:
            assert querystring.field_key(f"whatif.{knob.whatif}") == knob.key
        assert f'name="{knob.key}"' in html, knob.key
        plan_query.validator_limits(knob.path)  # the path is a field of the validator


def test_defaults_are_decided_once_and_dropped_from_the_url(client: TestClient) -> None:
    """A range input always submits its value: at vLLM's default it leaves the URL."""
    page = client.get("/plan.json?util=0.92&mnbt=8192&growth=0&tp=1").json()
    assert page["url"] == "/plan"
    moved = client.get("/plan.json?util=0.85&mnbt=4096").json()
    assert moved["url"] == "/plan?mnbt=4096&util=0.85"
