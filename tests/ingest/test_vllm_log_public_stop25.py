"""The importer on stop 25's public log (tests/data/vllm-logs/public/56, generative-computing/mellea PR #416): a V0
v0.9.1 start-up of Qwen3-0.6B whose every row, block count and graph figure is read, and whose blocks agree with
Qwen3-0.6B's KV bytes per token (28 layers x 8 KV heads x 128 x K and V x 2 bytes, computed here from the shape)."""

from __future__ import annotations

from .ingest_helpers import LOGS, parsed, rank, read, runs

PUBLIC = LOGS / "public"
GIB = 2**30


def test_v0_rows_blocks_and_graphs_of_public_56() -> None:
    (path,) = PUBLIC.glob("56-*.log")
    doc = parsed(read(path))
    (run,) = runs(doc)
    assert run["findings"] == []
    driver = rank(run, "driver")
    rows = {k: driver[k] for k in ("total_bytes", "requested_bytes", "weights_bytes", "non_torch_bytes",
                                   "activation_bytes", "kv_bytes", "cuda_graph_bytes")}  # fmt: skip
    assert rows == {"total_bytes": round(79.19 * GIB), "requested_bytes": round(63.35 * GIB),
                    "weights_bytes": round(1.12 * GIB), "non_torch_bytes": round(0.16 * GIB),
                    "activation_bytes": round(0.23 * GIB), "kv_bytes": round(61.84 * GIB),
                    "cuda_graph_bytes": round(0.13 * GIB)}  # fmt: skip
    assert run["settings"]["gpu_memory_utilization"] == 0.8 and run["settings"]["max_model_len"] == 8192
    engine = run["engine"]
    assert (engine["num_gpu_blocks"], engine["num_cpu_blocks"]) == (36184, 2340)
    assert (engine["max_concurrency"], engine["max_concurrency_tokens"]) == (70.67, 8192)
    per_token = 28 * 8 * 128 * 2 * 2  # Qwen3-0.6B, bf16
    blocks_bytes = 36184 * 16 * per_token
    assert abs(blocks_bytes - driver["kv_bytes"]) <= 0.005 * GIB  # 61.84 GiB as printed
    assert round(36184 * 16 / 8192, 2) == 70.67  # the concurrency line is blocks x 16 / max_model_len
