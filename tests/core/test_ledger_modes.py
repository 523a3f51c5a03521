"""Manual kv_cache_memory_bytes, version-dependent CUDA-graph accounting, estimated rows."""

from __future__ import annotations

from typing import Any

from app.services.plans import run_plan

GIB = 2**30
ROWS = {
    "total": 80 * GIB,
    "free_at_start": 79 * GIB,
    "weights": 18 * GIB,
    "non_torch": 4 * GIB,
    "cuda_graphs": 3 * GIB,
    "activation": 3 * GIB,
}


def doc(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": {"kv_bytes_per_token": 131072},
        "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192},
        "ranks": [dict(ROWS), dict(ROWS, free_at_start=60 * GIB)],
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


def test_manual_budget_replaces_kv_and_checks_fit() -> None:
    result = run_plan(doc(engine={"kv_cache_memory_bytes": "40 GiB"}, policy={"operating_reserve": "1 GiB"}))
    assert [r["kv_bytes"] for r in result["ranks"]] == [40 * GIB, 40 * GIB]
    # rank 0: 28 GiB rows + 40 GiB KV + 1 GiB reserve = 69 ≤ 79 free; rank 1: 69 > 60 free
    assert [r["will_start"] for r in result["ranks"]] == [True, False]
    codes = [(w["code"], w["rank"]) for w in result["warnings"]]
    assert ("manual_does_not_fit", "1") in codes
    assert result["ranks"][0]["requested_bytes"] is None  # vLLM ignores utilization in this mode
    assert "--kv-cache-memory-bytes 42949672960" in result["flags"]


def test_graphs_outside_budget_before_021() -> None:
    new = run_plan(doc(vllm_version="0.21.0"))["ranks"][0]
    old = run_plan(doc(vllm_version="0.10.2"))["ranks"][0]
    assert new["kv_bytes"] == 44 * GIB
    assert old["kv_bytes"] == 47 * GIB  # graphs captured after KV sizing, out of the headroom
    assert old["headroom_bytes"] == new["headroom_bytes"] == 8 * GIB


def test_default_utilization_follows_version() -> None:
    d = doc()
    d["engine"].pop("gpu_memory_utilization")
    assert run_plan(dict(d, vllm_version="0.20.0"))["engine"]["gpu_memory_utilization"] == 0.9
    assert run_plan(dict(d, vllm_version="0.21.0"))["engine"]["gpu_memory_utilization"] == 0.92


def test_largest_max_model_len_when_request_does_not_fit() -> None:
    tight = dict(ROWS, weights=61 * GIB)  # 72 − 61 − 4 − 3 − 3 = 1 GiB of KV = 8,192 tokens at 128 KiB/token
    result = run_plan(doc(ranks=[tight], engine={"max_model_len": 32768}))
    assert result["fits_max_model_len"] is False
    assert result["largest_max_model_len"] == 8192
    assert result["binding_limit"] == "max_model_len"
    assert any(w["code"] == "max_model_len_does_not_fit" for w in result["warnings"])


def test_estimated_plan_marks_every_row() -> None:
    result = run_plan(
        {
            "model": {"catalogue": "Llama-3.1-70B"},
            "layout": {"tp": 4},
            "gpu": {"total": "80 GiB"},
            "engine": {"max_model_len": 8192},
        }
    )
    assert len(result["ranks"]) == 4
    sources = result["ranks"][0]["sources"]
    for key in ("weights_bytes", "non_torch_bytes", "cuda_graph_bytes", "activation_bytes", "kv_bytes"):
        assert sources[key] == "estimated", key
    assert sources["total_bytes"] == "measured"
    assert any(w["code"] == "estimated_rows" for w in result["warnings"])
    # weights: ≈ 70.6 B params × 2 B / 4 ranks ≈ 32.9 GiB
    assert 31 * GIB < result["ranks"][0]["weights_bytes"] < 35 * GIB
    assert result["kv_bytes_per_token"] == 81920
