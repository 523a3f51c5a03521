"""A lever promises what the page it points to shows.

The levers panel of an estimated plan (a catalogue model on a GPU preset) said "tensor_parallel_size
4 → 8: 1,334,176 tokens" for Llama-3.1-70B on H100 80GB, and /plan?tp=8 showed 1,334,144: the lever
re-sharded the TP4 rows by 4/8 (missing the replicated norms and rope, and the CUDA graphs' share
that moves with TP) where the page estimates the TP8 rows afresh. Every lever here is checked
against the plan opened at the value it sets, through the HTTP API.
"""

from __future__ import annotations

import pytest

from .support import TestClient

#: lever knob → the query key that sets its "after" value on /plan.json
_QUERY = {
    "tensor_parallel_size": "tp",
    "kv_cache_dtype": "kv_cache_dtype",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_num_batched_tokens": "max_num_batched_tokens",
}


def _after(change: str) -> str:
    return change.split("→")[1].strip().replace(",", "")


@pytest.mark.parametrize(
    ("model", "tp", "extra"),
    [("llama-3.1-70b", 4, {}), ("llama-3.1-8b", 1, {}), ("qwen3-30b-a3b", 2, {}), ("gemma-2-9b-it", 1, {}),
     ("gpt-oss-20b", 1, {}), ("deepseek-v2-lite", 1, {}), ("jamba-1.5-mini", 2, {}), ("qwen3-next-80b-a3b", 4, {}),
     # a MoE model in a DP group: the TP lever re-estimated one engine without DP's expert share (850,912
     # tokens promised, 1,145,824 on the TP2 page); the vision encoder's profile moves with the chunk
     ("qwen3-30b-a3b", 1, {"dp": 2}), ("qwen3-30b-a3b", 1, {"dp": 2, "ep": "on"}),
     ("qwen3-vl-30b-a3b-instruct", 2, {}),
     # MLA on Hopper: the fp8 KV lever kept block 16 where the fp8 page runs vLLM's MLA backend at 64
     ("deepseek-v3", 8, {"pp": 2})],
)
def test_each_lever_of_an_estimated_plan_is_the_page_it_sets(
    client: TestClient, model: str, tp: int, extra: dict[str, object]
) -> None:
    query = {"model": model, "tp": tp, "pp": 1, "gpu": "H100 80GB", **extra}
    plan = client.get("/plan.json", params=query).json()
    levers = {lv["knob"]: lv for lv in plan["levers"]}
    assert "tensor_parallel_size" in levers, levers
    for knob, key in _QUERY.items():
        if knob not in levers:
            continue
        lever = levers[knob]
        opened = client.get("/plan.json", params={**query, key: _after(lever["change"])}).json()
        assert opened["layout"]["pp"] == query["pp"], opened["notes"][:1]
        assert lever["tokens_after"] == opened["tokens"], (knob, lever["change"], lever, opened["tokens"])
    quantized = client.get("/plan.json", params={**query, "quantization": "fp8"}).json()
    if "quantization" in levers:
        assert levers["quantization"]["tokens_after"] == quantized["tokens"]
