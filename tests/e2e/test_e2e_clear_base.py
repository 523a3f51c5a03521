"""Over a base document (a saved plan reopened by "Edit as a what-if"), in Chromium: "not set" on
LoRA rank, offload backend and speculative method sent an empty value, which the URL drops, so the
base's rank 64 / lmcache / ngram came back (and the backend select showed "native" over the base's
lmcache). Now it is `key=default`, which removes the base's value (LoRA at vLLM's rank 16, its slots
kept; offload native, its size kept) or section (no speculative decoding), in a URL that reopens
the same plan."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_page import edit_saved, ready, twin

pytestmark = pytest.mark.e2e


def test_not_set_removes_a_saved_plans_lora_rank_offload_backend_and_speculative(page: Any) -> None:
    edit_saved(page, {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "title": "everything on",
                 "engine": {"enforce_eager": True, "max_model_len": 8192,
                            "lora": {"max_loras": 4, "max_lora_rank": 64},
                            "kv_offload": {"cpu_bytes": "100GiB", "backend": "lmcache"},
                            "speculative": {"method": "ngram", "num_speculative_tokens": 3}}})
    keys = ("lora_rank", "offload_backend", "spec")
    assert {k: page.eval_on_selector(f"#f-{k}", "e => e.value") for k in keys} == {
        "lora_rank": "64", "offload_backend": "lmcache", "spec": "ngram"}
    for key in keys:  # each "not set" sent an empty value, which the URL drops: the base's came back
        page.select_option(f"#f-{key}", "default")
        page.wait_for_url(f"**{key}=default**")
        ready(page)
    canonical = page.url
    page.reload()
    ready(page)
    assert {k: page.eval_on_selector(f"#f-{k}", "e => e.value") for k in keys} == dict.fromkeys(keys, "default")
    engine = twin(page)["engine"]
    assert engine["lora"]["max_loras"] == 4 and engine["lora"]["max_lora_rank"] == 16  # vLLM's default rank
    assert engine["kv_offload"]["backend"] == "native" and engine["kv_offload"]["cpu_bytes"] == 100 * 2**30
    assert engine.get("speculative") is None
    page.goto(canonical)  # the canonical URL reopens the same plan
    ready(page)
    assert twin(page)["engine"] == engine
