"""The engine's environment settings as plan-page knobs: `mla_off` (engine.mla_disable,
VLLM_MLA_DISABLE), `fi_sampler` (engine.flashinfer_sampler, VLLM_USE_FLASHINFER_SAMPLER) and
`cg_estimate` (engine.estimate_cudagraphs, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).

Before, the document and the core had them but the dashboard did not: no form control, no URL
key (`/plan?mla_disable=1` planned the latent cache with no word). Each key moves the numbers,
round-trips through the URL, is read under its document and vLLM environment names, reaches the
`vllm serve` command the page shows, and refuses a value that is not a boolean by its name.
"""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from app.core import exports
from app.services.plan_query import BY_KEY, KNOBS
from app.web import querystring

from .support import HX, TestClient

CATALOGUE = Path(__file__).resolve().parents[2] / "app" / "data" / "catalogue"
ENV_KNOBS = [k for k in KNOBS if k.env]
DSV2 = {"model": "deepseek-v2-lite", "tp": "1", "pp": "1"}  # layout stated: full K/V at 163,840 tokens opens at
# TP2 otherwise (and at TP1 × PP2 with the TP alone)
QWEN_0101 = {"model": "qwen2.5-7b-instruct", "vllm": "0.10.1"}
QWEN_021 = {"model": "qwen2.5-7b-instruct", "vllm": "0.21.0"}


def _plan(client: TestClient, params: dict[str, str]) -> dict[str, Any]:
    response = client.get("/plan.json", params=params)
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


def _flags_text(html: str) -> str:
    match = re.search(r'<pre id="flags-text">(.*?)</pre>', html, re.S)
    assert match, "no serve command on the page"
    return match.group(1)


def test_the_engine_settings_are_knobs_with_their_env_names() -> None:
    assert {k.path: k.env for k in ENV_KNOBS} == {
        "engine.mla_disable": "VLLM_MLA_DISABLE",
        "engine.flashinfer_sampler": "VLLM_USE_FLASHINFER_SAMPLER",
        "engine.estimate_cudagraphs": "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS",
        "engine.allow_long_max_model_len": "VLLM_ALLOW_LONG_MAX_MODEL_LEN",  # test_allow_long_max_model_len
    }
    for knob in ENV_KNOBS:
        assert knob.kind == "bool" and not knob.whatif
        assert querystring.LEGACY_KEYS[knob.env or ""] == knob.key
        assert querystring.LEGACY_KEYS[knob.path.split(".", 1)[1]] == knob.key  # the document's field name
        assert querystring.field_key(knob.path) == knob.key


@pytest.mark.parametrize("knob", ENV_KNOBS, ids=lambda k: k.key)
def test_each_env_name_is_the_variable_the_deploy_exports_write(client: TestClient, knob: Any) -> None:
    """`Knob.env` (what a URL reads) and `app.core.exports.env_of` (what a deploy file writes) name
    the same variable, with 1 for on."""
    params = {**QWEN_021, knob.key: "true"}
    result = _plan(client, params)
    assert exports.env_of(result).get(knob.env) == "1"
    assert knob.env not in exports.env_of(_plan(client, QWEN_021))  # unset: the version's default, not written


def _mla_ratio() -> float:
    """Full K/V over the latent per token and layer, from the model's config.json: K and V of
    qk_nope + qk_rope per head (app.core.mla_rules.full_kv_shape) over kv_lora_rank + qk_rope."""
    config = json.loads((CATALOGUE / "deepseek-v2-lite.json").read_text(encoding="utf-8"))["config"]
    head = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    latent = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    return float(2 * config["num_key_value_heads"] * head / latent)


def test_mla_off_caches_full_kv(client: TestClient) -> None:
    latent, full = _plan(client, DSV2), _plan(client, {**DSV2, "mla_off": "true"})
    ratio = full["kv_bytes_per_token"] / latent["kv_bytes_per_token"]
    assert ratio == pytest.approx(_mla_ratio()) and 10.5 < ratio < 10.8
    assert full["tokens"] < latent["tokens"]
    assert full["engine"]["mla_disable"] is True and latent["engine"]["mla_disable"] is False
    assert full["url"] == "/plan?mla_off=true&model=deepseek-v2-lite&pp=1&tp=1"  # TP1 × PP1 does not start
    assert any(n.startswith("VLLM_MLA_DISABLE=1") for n in full["notes"])
    assert not any("VLLM_MLA_DISABLE" in n for n in latent["notes"])
    # off is the default: it leaves the URL
    assert _plan(client, {**DSV2, "mla_off": "false"})["url"] == "/plan?model=deepseek-v2-lite"  # TP1 is its opening


@pytest.mark.parametrize("alias", [{"mla_disable": "1"}, {"mla-disable": "true"}, {"VLLM_MLA_DISABLE": "1"},
                                   {"mla_off": "on"}])
def test_mla_off_is_read_under_its_document_and_env_names(client: TestClient, alias: dict[str, str]) -> None:
    assert _plan(client, {**DSV2, **alias}) == _plan(client, {**DSV2, "mla_off": "true"})


def test_the_page_at_mla_off_shows_the_box_ticked_and_serves_with_the_variable(client: TestClient) -> None:
    # at its 163,840-token max_model_len the full cache does not fit one request: no serve command then
    short = {**DSV2, "max_model_len": "32768"}
    html = client.get("/plan", params={**short, "mla_off": "true"}).text
    assert re.search(r'<input type="checkbox" id="f-mla_off" name="mla_off" value="true" checked', html)
    assert '<input type="hidden" name="mla_off" value="false">' in html  # what an unticked box submits
    assert _flags_text(html).startswith("VLLM_MLA_DISABLE=1 ")
    unticked = client.get("/plan", params=short).text
    assert "VLLM_MLA_DISABLE" not in _flags_text(unticked)
    assert re.search(r'<input type="checkbox" id="f-mla_off" name="mla_off" value="true" aria', unticked)
    served = client.get("/plan/export/serve", params={**short, "mla_off": "true"})
    assert served.status_code == 200 and "VLLM_MLA_DISABLE=1" in served.text


def test_the_form_as_submitted_ticked_and_unticked(client: TestClient) -> None:
    """The form submits the hidden false and, when ticked, the box's true after it: the last wins."""
    ticked = client.get("/plan?model=deepseek-v2-lite&mla_off=false&mla_off=true", headers=HX)
    assert ticked.status_code == 200 and ticked.headers["HX-Replace-Url"] == "/plan?mla_off=true&model=deepseek-v2-lite"
    unticked = client.get("/plan?model=deepseek-v2-lite&mla_off=false", headers=HX)
    assert unticked.headers["HX-Replace-Url"] == "/plan?model=deepseek-v2-lite"
    # a plain GET of the form's submission is sent to the canonical address
    plain = client.get("/plan?model=deepseek-v2-lite&mla_off=false&mla_off=true", follow_redirects=False)
    assert plain.status_code == 303 and plain.headers["location"] == "/plan?mla_off=true&model=deepseek-v2-lite"


def test_flashinfer_sampler_on_leaves_more_kv_than_off(client: TestClient) -> None:
    """vLLM 0.10.1's V1 native top-k/top-p sorts the logits; FlashInfer's path does not, so its
    sampler peak (in the profiled activation) is smaller and the KV budget larger."""
    unset, on, off = (_plan(client, {**QWEN_0101, **extra}) for extra in ({}, {"fi_sampler": "true"},
                                                                         {"fi_sampler": "false"}))
    assert on["tokens"] > off["tokens"]
    assert on["ranks"][0]["activation_bytes"] < off["ranks"][0]["activation_bytes"]
    assert unset["tokens"] == off["tokens"]  # not stated: sized as the native path
    assert on["url"] == "/plan?fi_sampler=true&model=qwen2.5-7b-instruct&vllm=0.10.1"
    assert off["url"] == "/plan?fi_sampler=false&model=qwen2.5-7b-instruct&vllm=0.10.1"  # stated: written back
    assert unset["url"] == "/plan?model=qwen2.5-7b-instruct&vllm=0.10.1"
    assert any(n.startswith("VLLM_USE_FLASHINFER_SAMPLER=1: the profile run's sampler peak") for n in on["notes"])
    assert not any("FLASHINFER" in n for n in unset["notes"])
    html = client.get("/plan", params={**QWEN_0101, "VLLM_USE_FLASHINFER_SAMPLER": "1"}, follow_redirects=True).text
    assert _flags_text(html).startswith("VLLM_USE_FLASHINFER_SAMPLER=1 ")
    assert re.search(r'<option value="true" selected>on \(=1\)</option>', html)


def test_cg_estimate_moves_the_cuda_graphs_in_and_out_of_the_budget(client: TestClient) -> None:
    default, off = _plan(client, QWEN_021), _plan(client, {**QWEN_021, "cg_estimate": "false"})
    assert default["cuda_graphs_in_budget"] is True and off["cuda_graphs_in_budget"] is False
    assert off["tokens"] > default["tokens"]
    assert "cuda_graphs" in default["explain"]["kv_bytes"]["formula"]
    assert "cuda_graphs" not in off["explain"]["kv_bytes"]["formula"]
    assert off["url"] == "/plan?cg_estimate=false&model=qwen2.5-7b-instruct&vllm=0.21.0"
    assert any(n.startswith("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0") and "default is on" in n
               for n in off["notes"])
    older = _plan(client, {"model": "qwen2.5-7b-instruct", "vllm": "0.19.0", "cg_estimate": "true"})
    assert older["cuda_graphs_in_budget"] is True
    assert older["tokens"] < _plan(client, {"model": "qwen2.5-7b-instruct", "vllm": "0.19.0"})["tokens"]
    html = client.get("/plan", params={**QWEN_021, "cg_estimate": "false"}).text
    assert _flags_text(html).startswith("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 ")
    assert "version default (on)" in html
    assert "version default (off)" in client.get("/plan", params={**QWEN_0101}).text


@pytest.mark.parametrize(("key", "sent_as"), [("mla_off", "mla_disable"), ("mla_off", "mla_off"),
                                              ("fi_sampler", "VLLM_USE_FLASHINFER_SAMPLER"),
                                              ("cg_estimate", "cg_estimate")])
def test_a_value_that_is_not_a_boolean_is_refused_by_its_key(client: TestClient, key: str, sent_as: str) -> None:
    """Refused under the name the request wrote (an environment variable, vLLM's field name), beside
    the knob's input: before, `VLLM_USE_FLASHINFER_SAMPLER=maybe` was reported as `fi_sampler`."""
    response = client.get("/plan.json", params={**DSV2, sent_as: "maybe"})
    assert response.status_code == 422
    path = f"read as {key}: engine.{'mla_disable' if key == 'mla_off' else 'flashinfer_sampler'})"
    message = "expected true or false, got 'maybe'" if sent_as == key else \
        f"{sent_as}: expected true or false, got 'maybe' ({path}"
    assert response.json()["error"] == {"field": sent_as, "message": message}
    page = client.get("/plan", params={**DSV2, sent_as: "maybe"})
    assert page.status_code == 422
    slot = re.search(rf'<span class="field-error" id="err-{key}" role="alert">([^<]*)</span>', page.text)
    assert slot and unescape(slot.group(1)) == message


def test_cg_estimate_on_before_vllm_018_is_refused_beside_its_field(client: TestClient) -> None:
    response = client.get("/plan.json", params={**QWEN_0101, "cg_estimate": "true"})
    assert response.status_code == 422 and "exists from vLLM 0.18" in response.json()["error"]["message"]
    page = client.get("/plan", params={**QWEN_0101, "cg_estimate": "true"})
    slot = re.search(r'<span class="field-error" id="err-cg_estimate" role="alert">([^<]*)</span>', page.text)
    assert slot and "exists from vLLM 0.18" in slot.group(1)
    assert BY_KEY["cg_estimate"].path == "engine.estimate_cudagraphs"
