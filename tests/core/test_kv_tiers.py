"""KV offload tiers (issue 15 item 4) against vLLM's rules, recomputed here from vLLM's own formulas.

vLLM commit 28be48fa944d: ``VllmConfig._post_init_kv_transfer_config`` (vllm/config/vllm.py) turns
``--kv-offloading-size S`` into ``cpu_bytes_to_use = S × 2**30`` (native) or
``lmcache.max_local_cpu_size = S / (tp × pp)`` (lmcache); ``CPUOffloadingSpec`` (vllm/v1/kv_offload/
cpu/spec.py) makes ``cpu_bytes_to_use // ((total_gpu_kv_bytes // num_blocks) × world_size)`` blocks.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.errors import InputError
from app.core.kv_tiers import KVOffload, kv_tiers
from app.core.kvspec import rank_kv_uniform
from app.services.plans import run_plan
from tests.core.test_explain_identities import _check

GIB = 2**30
# Qwen3-8B (catalogue): 36 layers, 8 KV heads of 128, bf16.
LAYERS, KV_HEADS, HEAD_DIM, DTYPE_BYTES = 36, 8, 128, 2


def _plan(tp: int = 2, offload: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"model": {"catalogue": "qwen3-8b"}, "gpu": {"name": "H100"}, "layout": {"tp": tp},
                           "policy": {"avg_live_tokens": 4000}}
    if offload is not None:
        doc["engine"] = {"kv_offload": offload}
    doc.update(extra)
    return doc


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_native_cpu_tier_is_vllms_block_count(tp: int) -> None:
    result = run_plan(_plan(tp, {"backend": "native", "cpu_bytes": "200 GiB"}), with_levers=False)
    gpu, cpu = result["kv_tiers"]
    assert gpu["name"] == "gpu" and cpu["name"] == "cpu"
    assert gpu["tokens"] == result["tokens"]
    # vLLM: per-worker bytes per block = the worker's KV tensors / num_blocks (all its layers, its heads).
    block_per_worker = LAYERS * 2 * 16 * (KV_HEADS // tp) * HEAD_DIM * DTYPE_BYTES
    cpu_bytes_to_use = int(200.0 * (1 << 30))
    num_blocks = cpu_bytes_to_use // (block_per_worker * tp)
    assert cpu["tokens"] == num_blocks * 16
    assert cpu["bytes_per_rank"] == num_blocks * block_per_worker  # what each worker pins
    assert cpu["bytes"] <= cpu_bytes_to_use
    # The tier holds the same logical tokens whatever the TP degree (the size is the engine's total).
    assert cpu["tokens"] == pytest.approx(200 * GIB / (LAYERS * 2 * KV_HEADS * HEAD_DIM * DTYPE_BYTES), abs=16)
    assert "--kv-offloading-backend native" in result["flags"] and "--kv-offloading-size 200" in result["flags"]


def test_lmcache_tiers_split_per_rank_in_whole_chunks() -> None:
    offload = {"backend": "lmcache", "cpu_bytes": "64 GiB", "disk_bytes": "1 TiB", "chunk_size": 512}
    result = run_plan(_plan(4, offload), with_levers=False)
    names = [t["name"] for t in result["kv_tiers"]]
    assert names == ["gpu", "cpu", "disk"]
    per_token_rank = LAYERS * 2 * (KV_HEADS // 4) * HEAD_DIM * DTYPE_BYTES
    # vLLM: lmcache.max_local_cpu_size = 64 / (tp × pp) GiB per rank; LMCache keeps whole chunks.
    per_rank = 64 / 4 * GIB
    assert result["kv_tiers"][1]["tokens"] == int(per_rank // (512 * per_token_rank)) * 512
    assert result["kv_tiers"][2]["tokens"] == int(1024 / 4 * GIB // (512 * per_token_rank)) * 512
    env = result["kv_offload_env"]
    assert env["LMCACHE_CHUNK_SIZE"] == "512" and env["LMCACHE_MAX_LOCAL_DISK_SIZE"] == "256"
    assert "--kv-offloading-backend lmcache" in result["flags"]


def test_lmcache_before_the_flags_uses_kv_transfer_config_and_env() -> None:
    result = run_plan({**_plan(4, {"backend": "lmcache", "cpu_bytes": "40 GiB"}), "vllm_version": "0.9.2"},
                      with_levers=False)
    assert any(f.startswith("--kv-transfer-config") and "LMCacheConnectorV1" in f for f in result["flags"])
    assert not any(f.startswith("--kv-offloading") for f in result["flags"])
    assert result["kv_offload_env"]["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "10"


def test_every_tier_entry_of_explain_is_an_identity() -> None:
    for offload in ({"backend": "native", "cpu_bytes": "123.4 GiB"},
                    {"backend": "lmcache", "cpu_bytes": "50 GiB", "disk_bytes": "300 GiB"}):
        for model in ("qwen3-8b", "qwen3-next-80b-a3b", "llama-3.1-8b"):
            doc = {**_plan(2, offload), "model": {"catalogue": model}}
            explain = run_plan(doc, with_levers=False)["explain"]
            entries = {k: v for k, v in explain.items() if k.startswith("kv_tiers.")}
            assert entries
            for key, entry in entries.items():
                _check(key, entry)


@pytest.mark.parametrize(
    ("offload", "field", "words"),
    [
        ({"backend": "nixl", "cpu_bytes": "1 GiB"}, "engine.kv_offload.backend", "native, lmcache"),
        ({"backend": "native", "cpu_bytes": -5}, "engine.kv_offload.cpu_bytes", ""),
        ({"backend": "native", "cpu_bytes": 0}, "engine.kv_offload.cpu_bytes", ""),
        ({"backend": "native", "cpu_bytes": 100}, "engine.kv_offload.cpu_bytes", "--kv-offloading-size 0"),
        ({"backend": "native", "cpu_bytes": "1e30 GiB"}, "engine.kv_offload.cpu_bytes", "4 PiB"),
        ({"backend": "native", "cpu_bytes": "1 GiB", "disk_bytes": "1 TiB"}, "engine.kv_offload.disk_bytes", "disk"),
        ({"backend": "lmcache", "cpu_bytes": "1 GiB", "chunk_size": 0}, "engine.kv_offload.chunk_size", ""),
        ({"cpu_bytes": "1 GiB", "size": 3}, "engine.kv_offload.size", "unknown field"),
    ],
)
def test_bad_offload_input_names_the_field(offload: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        run_plan(_plan(2, offload), with_levers=False)
    assert err.value.field == field and words in err.value.message


def test_native_offloading_before_its_flags_is_refused_with_the_pr() -> None:
    with pytest.raises(InputError) as err:
        run_plan({**_plan(2, {"backend": "native", "cpu_bytes": "8 GiB"}), "vllm_version": "0.10.2"},
                 with_levers=False)
    assert err.value.field == "engine.kv_offload.backend" and "#27621" in err.value.message


def test_pinned_host_memory_per_node_against_its_ram() -> None:
    offload = {"backend": "native", "cpu_bytes": "2 TiB"}
    fits = run_plan(_plan(8, offload, node={"host_memory_bytes": "2 TiB", "gpus_per_node": 8}), with_levers=False)
    assert "kv_offload_exceeds_host_memory" not in {w["code"] for w in fits["warnings"]}
    over = run_plan(_plan(8, offload, node={"host_memory_bytes": "1 TiB", "gpus_per_node": 8}), with_levers=False)
    warning = next(w for w in over["warnings"] if w["code"] == "kv_offload_exceeds_host_memory")
    assert "8 workers × 256.00 GiB" in warning["message"] and "1024.00 GiB" in warning["message"]
    # Two DP replicas of TP4 on one 8-GPU node: each engine pins its own size.
    dp = run_plan(_plan(4, offload, layout={"tp": 4, "dp": 2}, node={"host_memory_bytes": "3 TiB"}),
                  with_levers=False)
    assert "kv_offload_exceeds_host_memory" in {w["code"] for w in dp["warnings"]}


def test_serve_command_round_trip() -> None:
    doc = {"serve": "vllm serve Qwen/Qwen3-8B -tp 2 --kv-offloading-size 100 --kv-offloading-backend lmcache",
           "gpu": {"name": "H100"}}
    result = run_plan(doc, with_levers=False)
    assert result["engine"]["kv_offload"] == {"backend": "lmcache", "cpu_bytes": 100 * GIB, "disk_bytes": None,
                                              "chunk_size": 256}
    assert "--kv-offloading-size 100" in result["flags"]


@settings(max_examples=200, deadline=None)
@given(per_token=st.integers(1, 2**20), small=st.integers(1, 2**44), extra=st.integers(0, 2**44),
       workers=st.integers(1, 16), backend=st.sampled_from(["native", "lmcache"]), chunk=st.integers(1, 1024))
def test_a_larger_tier_never_holds_fewer_tokens(per_token: int, small: int, extra: int, workers: int,
                                                backend: str, chunk: int) -> None:
    rkv = rank_kv_uniform(per_token, 16)
    tiers = [kv_tiers(rkv, 100, workers, KVOffload(backend, size, size if backend == "lmcache" else None,  # type: ignore[arg-type]
                                                   chunk))
             for size in (small, small + extra)]
    for a, b in zip(tiers[0][1:], tiers[1][1:], strict=True):
        assert a.tokens <= b.tokens
        assert b.bytes <= small + extra and b.bytes_per_rank * workers == b.bytes  # never more than given
        assert b.tokens * per_token <= b.bytes_per_rank  # every token's shard fits on each worker


def test_a_tier_smaller_than_one_block_says_it_holds_nothing() -> None:
    """A byte short of one Qwen3-8B block on each of two workers (36 layers × 4 heads × 128 × 2 × 2 B ×
    16 tokens = 1,179,648 B a worker): vLLM makes 0 CPU blocks, and the plan says so."""
    block = LAYERS * (KV_HEADS // 2) * HEAD_DIM * 2 * DTYPE_BYTES * 16
    small = run_plan(_plan(2, {"backend": "native", "cpu_bytes": 2 * block - 1}), with_levers=False)
    assert small["kv_tiers"][1]["tokens"] == 0
    (warning,) = [w for w in small["warnings"] if w["code"] == "kv_offload_holds_nothing"]
    assert "1,179,647 B a worker is less than one GPU block (1,179,648 B a worker)" in warning["message"]
    one = run_plan(_plan(2, {"backend": "native", "cpu_bytes": 2 * block}), with_levers=False)
    assert one["kv_tiers"][1]["tokens"] == 16
    assert all(w["code"] != "kv_offload_holds_nothing" for w in one["warnings"])
