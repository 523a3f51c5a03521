"""A select's "not set" option clears a value the page was opened with, in Chromium: a saved plan
(or a `vllm serve` command) with fp8 KV cache, fp8 weights or the FlashInfer sampler, reopened on
the plan page. Choosing "not set" sent an empty value, which the URL drops, so the base's value
came back (the select showed "not set" over a plan still at fp8); and choosing `auto` for a base
made from `--kv-cache-dtype fp8` was dropped from the URL as the default, and the page reopened
at fp8. Now "not set" is `key=default` (null: vLLM's default) and the URL compares with what the
base really sets."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_page import SAME, edit_saved, ready, twin

pytestmark = pytest.mark.e2e




def _choose(page: Any, key: str, value: str, in_url: str) -> None:
    page.select_option(f"#f-{key}", value)
    page.wait_for_url(f"**{in_url}**")
    ready(page)


def _values(page: Any, *keys: str) -> dict[str, str]:
    return {key: page.eval_on_selector(f"#f-{key}", "e => e.value") for key in keys}



def test_not_set_clears_a_saved_plans_values(page: Any) -> None:
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "title": "fp8 everything",
           # enforce_eager is no knob of the page: the edit link opens the saved document as its base
           "engine": {"kv_cache_dtype": "fp8", "quantization": "fp8", "flashinfer_sampler": True,
                      "enforce_eager": True, "max_model_len": 8192}}
    edit_saved(page, doc)
    assert _values(page, "kv_dtype", "quant", "fi_sampler") == {"kv_dtype": "fp8", "quant": "fp8", "fi_sampler": "true"}

    _choose(page, "quant", "default", "quant=default")
    _choose(page, "fi_sampler", "default", "fi_sampler=default")
    _choose(page, "kv_dtype", "auto", "kv_dtype=auto")
    page.reload()
    ready(page)
    assert _values(page, "kv_dtype", "quant", "fi_sampler") == {"kv_dtype": "auto", "quant": "default",
                                                               "fi_sampler": "default"}
    engine = twin(page)["engine"]
    assert (engine["kv_cache_dtype"], engine["quantization"], engine["flashinfer_sampler"]) == ("auto", None, None)
    assert "--quantization" not in page.inner_text("#flags-text")


def test_auto_kv_cache_stays_chosen_over_a_serve_commands_fp8(page: Any) -> None:
    page.goto("/")
    made = page.request.post("/start/serve", headers=SAME, max_redirects=0, form={
        "command": "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype fp8 --max-model-len 8192 "
                   "--no-enable-prefix-caching",
        "gpu": "H100 80GB"})
    assert made.status == 303, made.text()
    page.goto(made.headers["location"])
    ready(page)
    assert _values(page, "kv_dtype", "prefix") == {"kv_dtype": "fp8", "prefix": "false"}  # the command's own
    _choose(page, "kv_dtype", "auto", "kv_dtype=auto")
    _choose(page, "prefix", "default", "prefix=default")
    page.reload()
    ready(page)
    assert _values(page, "kv_dtype", "prefix") == {"kv_dtype": "auto", "prefix": "default"}
    engine = twin(page)["engine"]
    assert engine["kv_cache_dtype"] == "auto" and engine["enable_prefix_caching"] is True  # vLLM's default
