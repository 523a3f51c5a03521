"""VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 as a plan-page knob: `allow_long` ↔ engine.allow_long_max_model_len.

vLLM refuses a max_model_len above the model's derived length unless that variable is set; with it,
it warns and starts (vllm/config/model.py `_get_and_verify_max_len` @28be48fa9: ``if
envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN: logger.warning_once("%s %s", msg, warning) else: raise
ValueError(...)``). Before, a plan on estimated rows was refused with no way to plan such a run:
the refusal named the variable but no knob set it. Qwen3-14B states max_position_embeddings 40,960.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.core import exports
from app.services.plan_query import plan_from_query, query_from_plan

from .support import HX, TestClient

LONG = {"model": "qwen3-14b", "max_model_len": "65536"}


def _plan(client: TestClient, params: dict[str, str]) -> dict[str, Any]:
    response = client.get("/plan.json", params=params)
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


def test_refused_without_it_saying_how_to_set_it(client: TestClient) -> None:
    response = client.get("/plan.json", params=LONG)
    assert response.status_code == 422
    text = response.text
    assert "derived maximum length 40,960" in text and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in text
    assert "'Allow long max model len' on the plan page" in text and "allow_long=true" in text
    assert "engine.allow_long_max_model_len: true" in text


def test_planned_with_it_at_the_longer_length_with_vllms_warning(client: TestClient) -> None:
    result = _plan(client, {**LONG, "allow_long": "true"})
    assert result["engine"]["max_model_len"] == 65536 and result["engine"]["allow_long_max_model_len"] is True
    notes = [n for n in result["notes"] if "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in n]
    assert len(notes) == 1
    assert "65,536 is more than the model's derived maximum length 40,960 (max_position_embeddings" in notes[0]
    assert "warns instead of refusing" in notes[0] and "extreme caution" in notes[0]
    assert "nan" in notes[0] and "out-of-bounds" in notes[0]
    # the longer length is what the plan sizes: more KV per request than at the model's own length
    own = _plan(client, {"model": "qwen3-14b", "max_model_len": "40960"})
    assert result["tokens"] == own["tokens"]  # the pool is the same memory ...
    key = "max_concurrency_at_max_model_len"
    assert result[key] < own[key]  # ... holding fewer max-length requests


def test_at_or_below_the_models_length_it_changes_no_number_and_adds_no_note(client: TestClient) -> None:
    short = {"model": "qwen3-14b", "max_model_len": "32768"}
    on, off = _plan(client, {**short, "allow_long": "true"}), _plan(client, short)
    assert on["tokens"] == off["tokens"]
    assert not any("VLLM_ALLOW_LONG" in n for n in on["notes"])
    assert exports.env_of(on) == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}  # still the run's environment


@pytest.mark.parametrize("alias", [{"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, {"allow_long_max_model_len": "true"},
                                   {"allow-long-max-model-len": "1"}, {"allow_long": "on"}])
def test_read_under_its_document_and_env_names(client: TestClient, alias: dict[str, str]) -> None:
    assert _plan(client, {**LONG, **alias}) == _plan(client, {**LONG, "allow_long": "true"})


def test_the_url_document_round_trip() -> None:
    doc = plan_from_query({**LONG, "allow_long": "true"})
    assert doc["engine"]["allow_long_max_model_len"] is True
    assert query_from_plan(doc)["allow_long"] == "true"
    assert "allow_long" not in query_from_plan(plan_from_query({**LONG, "allow_long": "false"}))  # the default


def test_the_canonical_url_and_the_form(client: TestClient) -> None:
    result = _plan(client, {**LONG, "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert result["url"] == "/plan?allow_long=true&max_model_len=65536&model=qwen3-14b"
    html = client.get("/plan", params={**LONG, "allow_long": "true"}).text
    assert re.search(r'<input type="checkbox" id="f-allow_long" name="allow_long" value="true" checked', html)
    assert '<input type="hidden" name="allow_long" value="false">' in html
    unticked = client.get("/plan", params={"model": "qwen3-14b"}).text
    assert re.search(r'<input type="checkbox" id="f-allow_long" name="allow_long" value="true" aria', unticked)
    # the form's submission, ticked (hidden false, then the box's true) and unticked
    ticked = client.get("/plan?model=qwen3-14b&max_model_len=65536&allow_long=false&allow_long=true", headers=HX)
    assert ticked.status_code == 200
    assert ticked.headers["HX-Replace-Url"] == "/plan?allow_long=true&max_model_len=65536&model=qwen3-14b"
    refused = client.get("/plan?model=qwen3-14b&max_model_len=65536&allow_long=false", headers=HX)
    assert "Allow long max model len" in refused.text and "derived maximum length 40,960" in refused.text


def test_the_deploy_exports_set_the_variable(client: TestClient) -> None:
    result = _plan(client, {**LONG, "allow_long": "true"})
    assert exports.env_of(result)["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in exports.env_of(_plan(client, {"model": "qwen3-14b"}))
    served = client.get("/plan/export/serve", params={**LONG, "allow_long": "true"})
    assert served.status_code == 200 and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in served.text
    html = client.get("/plan", params={**LONG, "allow_long": "true"}).text
    flags = re.search(r'<pre id="flags-text">(.*?)</pre>', html, re.S)
    assert flags and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 " in flags.group(1)



def test_the_refused_pages_sliders_hold_vllms_defaults_not_the_midpoint(client: TestClient) -> None:
    """A freshly loaded error page has no plan to fill its sliders from: util and mnbt were rendered
    value="" and the browser put a range input with no value at its midpoint, so ticking the box on the
    refused page planned at util 0.55 and mnbt 33,024 (found by the Chromium test). They now hold vLLM's
    defaults for the plan the query describes, as the page of a valid plan shows them."""
    page = client.get("/plan", params=LONG)
    assert page.status_code == 422
    planned = _plan(client, {**LONG, "allow_long": "true"})["engine"]
    for key, value in (("util", planned["gpu_memory_utilization"]), ("mnbt", planned["max_num_batched_tokens"]),
                       ("growth", 0)):
        found = re.search(rf'<input type="range" id="f-{key}" name="{key}" value="([^"]*)"', page.text)
        assert found and float(found.group(1)) == float(value), key
