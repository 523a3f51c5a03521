"""The importer on stop 27's public logs (tests/data/vllm-logs/public/57-): the v0.21.0 start-up of Qwen3-8B on an
RTX A5000 that LMCache issue #3430 quotes (CUDA-graph estimate inside the budget, available KV, the
util-equivalence advice, KV tokens, concurrency), whose tokens agree with Qwen3-8B's KV bytes per token (36 layers x
8 KV heads x 128 x K and V x 2 bytes, computed here from the shape)."""

from __future__ import annotations

from .ingest_helpers import LOGS, parsed, rank, read, runs

PUBLIC = LOGS / "public"
GIB = 2**30


def test_v021_estimate_kv_and_advice_of_public_57() -> None:
    (path,) = PUBLIC.glob("57-*.log")
    doc = parsed(read(path))
    assert doc["findings"] == []
    (run,) = runs(doc)
    assert run["findings"] == []
    assert run["version"]["inferred_min"] == "0.21.0"  # the advice line's '(default since v0.21.0)'
    assert run["semantics"]["cuda_graphs_inside_budget"] is True
    core = rank(run, "EngineCore")
    assert core["kv_bytes"] == round(6.37 * GIB)
    assert core["cuda_graph_estimate_bytes"] == round(0.52 * GIB)
    advice = (core["hint_gpu_memory_utilization"], core["util_equivalent_without_cg"], core["util_suggested"])
    assert advice == (0.9764, 0.9543, 0.9984)
    assert run["settings"]["gpu_memory_utilization"] == 0.9764 and run["settings"]["max_model_len"] == 16384
    engine = run["engine"]
    assert (engine["kv_tokens"], engine["max_concurrency"], engine["max_concurrency_tokens"]) == (46368, 2.83, 16384)
    per_token = 36 * 8 * 128 * 2 * 2  # Qwen3-8B, bf16
    assert abs(46368 * per_token - core["kv_bytes"]) <= 0.005 * GIB  # 6.37 GiB as printed
    assert round(46368 / 16384, 2) == 2.83  # the concurrency line is tokens / max_model_len
    # The advice line's two utilizations differ by the estimate over the card's total: 0.52 / 0.0221 = 23.5 GiB,
    # the 24,564 MiB class the bench case assumes (bench/bench_unseen.py, 23.52 GiB)
    implied_total = core["cuda_graph_estimate_bytes"] / (0.9764 - 0.9543) / GIB
    assert 23.2 < implied_total < 23.8
