"""Over a `vllm serve` base or a saved plan, in Chromium: the manual KV budget, max model len, max num
seqs, operating reserve and average live tokens showed the base's value only as a placeholder (over
`--kv-cache-memory-bytes 20G` the budget read "e.g. 40GiB (blank: computed)" while the plan used
20 GiB), and blanking one sent an empty value the URL drops, so the base's value stayed. Now each field
holds the value the plan uses with a hint saying where it came from, a blank is `key=default` (the
knob's `removes`: a computed budget, the model's length, vLLM's default, no reserve, not set), and the
canonical URL reopens the same plan."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .plan_page import SAME, edit_saved, ready, twin

pytestmark = pytest.mark.e2e

SERVE = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --kv-cache-memory-bytes 20G --max-model-len 8192 "
         "--max-num-seqs 64 --enforce-eager")  # fmt: skip
ENGINE_FIELDS = ("kv_bytes", "max_model_len", "max_num_seqs")


def _values(page: Any, keys: tuple[str, ...]) -> dict[str, str]:
    return {k: page.eval_on_selector(f"#f-{k}", "e => e.value") for k in keys}


def _hint(page: Any, key: str) -> str:
    text: str = page.eval_on_selector(f"#f-{key}", "e => e.parentElement.querySelector('.hint')?.textContent || ''")
    return text


def _blank(page: Any, key: str) -> None:
    page.fill(f"#f-{key}", "")
    page.wait_for_url(f"**{key}=default**")
    ready(page)


def test_a_serve_bases_budget_length_and_seqs_show_and_blank(page: Any) -> None:
    made = page.request.post("/api/v1/plan", data=json.dumps({"gpu": {"name": "H100 80GB"}, "serve": SERVE}),
                             headers={**SAME, "Content-Type": "application/json"})  # fmt: skip
    assert made.status == 200, made.text()
    page.goto(made.json()["url"])
    ready(page)
    assert twin(page)["engine"]["kv_cache_memory_bytes"] == 20 * 2**30
    assert _values(page, ENGINE_FIELDS) == {"kv_bytes": "20GiB", "max_model_len": "8192", "max_num_seqs": "64"}
    assert "vllm serve --kv-cache-memory-bytes" in _hint(page, "kv_bytes")
    assert "vllm serve --max-model-len" in _hint(page, "max_model_len")
    _blank(page, "kv_bytes")
    engine = twin(page)["engine"]
    assert engine["kv_cache_memory_bytes"] is None and engine["max_model_len"] == 8192
    _blank(page, "max_model_len")
    assert twin(page)["engine"]["max_model_len"] == 131072  # the model's own length
    _blank(page, "max_num_seqs")
    engine = twin(page)["engine"]
    assert engine["max_num_seqs"] == 1024 and engine["kv_cache_memory_bytes"] is None  # vLLM's H100 default
    assert _values(page, ENGINE_FIELDS) == dict.fromkeys(ENGINE_FIELDS, "")
    canonical = page.url
    page.reload()
    ready(page)
    assert _values(page, ENGINE_FIELDS) == dict.fromkeys(ENGINE_FIELDS, "")
    assert twin(page)["engine"] == engine
    page.goto(canonical)  # the canonical URL reopens the same plan
    ready(page)
    assert twin(page)["engine"] == engine
    page.fill("#f-max_num_seqs", "32")  # a typed value still edits the base's
    page.wait_for_url("**max_num_seqs=32**")
    ready(page)
    assert twin(page)["engine"]["max_num_seqs"] == 32


def test_a_saved_plans_reserve_and_live_tokens_show_and_blank(page: Any) -> None:
    edit_saved(page, {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "title": "reserve and live",
                 "engine": {"enforce_eager": True, "max_model_len": 8192},
                 "policy": {"operating_reserve": "2GiB", "avg_live_tokens": 3000}})  # fmt: skip
    assert _values(page, ("reserve", "live", "max_model_len")) == {
        "reserve": "2GiB", "live": "3000", "max_model_len": "8192"}
    assert "from the base plan" in _hint(page, "reserve")
    _blank(page, "reserve")
    policy = twin(page)["policy"]
    assert policy["operating_reserve_bytes"] == 0 and policy["avg_live_tokens"] == 3000
    _blank(page, "live")
    policy = twin(page)["policy"]
    assert policy["avg_live_tokens"] is None
    page.reload()
    ready(page)
    assert _values(page, ("reserve", "live")) == {"reserve": "", "live": ""}
    assert twin(page)["policy"] == policy
