"""Over a base document (a saved plan reopened by "Edit as a what-if"), in Chromium: the LoRA slots,
CPU KV tier and LMCache disk tier are text fields, whose placeholders say "blank: LoRA off" /
"blank: none". Before, blanking one sent an empty value, which the URL drops, so the base's LoRA and
offload came back (and the offload fields showed blank over the base's 100GiB while the plan ran
with it). Now each shows the plan's value, a blank one is `key=default` (the knob's `removes`: the
base's LoRA section, its offload section, its disk tier), and the canonical URL reopens the same plan."""

from __future__ import annotations

from typing import Any

import pytest

from .plan_page import edit_saved, ready, twin

pytestmark = pytest.mark.e2e

BASE = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "title": "lora and offload",
        "engine": {"enforce_eager": True, "max_model_len": 8192, "lora": {"max_loras": 4, "max_lora_rank": 64},
                   "kv_offload": {"cpu_bytes": "100GiB", "disk_bytes": "500GiB", "backend": "lmcache"}}}  # fmt: skip


FIELDS = ("loras", "offload", "offload_disk")


def _values(page: Any, keys: tuple[str, ...]) -> dict[str, str]:
    return {k: page.eval_on_selector(f"#f-{k}", "e => e.value") for k in keys}


def _blank(page: Any, key: str) -> None:
    page.fill(f"#f-{key}", "")
    page.wait_for_url(f"**{key}=default**")
    ready(page)


def test_blank_lora_slots_and_offload_sizes_clear_a_saved_plans(page: Any) -> None:
    edit_saved(page, BASE)
    assert _values(page, FIELDS) == {
        "loras": "4", "offload": "100GiB", "offload_disk": "500GiB"}
    _blank(page, "offload_disk")
    engine = twin(page)["engine"]
    assert engine["kv_offload"]["cpu_bytes"] == 100 * 2**30 and engine["kv_offload"].get("disk_bytes") is None
    _blank(page, "loras")
    assert twin(page)["engine"].get("lora") is None  # LoRA off, its rank with it
    _blank(page, "offload")
    engine = twin(page)["engine"]
    assert engine.get("kv_offload") is None
    canonical = page.url
    page.reload()
    ready(page)
    assert _values(page, FIELDS) == dict.fromkeys(FIELDS, "")
    assert twin(page)["engine"] == engine
    page.goto(canonical)  # the canonical URL reopens the same plan
    ready(page)
    assert twin(page)["engine"] == engine
    page.fill("#f-loras", "2")  # a value typed again is taken over the cleared base
    page.wait_for_url("**loras=2**")
    ready(page)
    assert twin(page)["engine"]["lora"]["max_loras"] == 2
