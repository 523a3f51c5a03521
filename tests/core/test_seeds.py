"""The worked examples of the four seed documents, run through `kvledger plan` / `kv-bytes`.

Expected values are computed here from the seeds' inputs (independently of the core), and the
seeds' printed figures are checked against them; DESIGN.md's list of slips is checked too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.core.padding import compare_padding

GIB = 2**30
KIB = 2**10
DATA = Path(__file__).resolve().parent.parent / "data"


def run_plan_cli(tmp_path: Path, doc: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    assert main(["plan", str(path), "--json"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


SEED000_RANK = {
    "total": "80 GiB",
    "free_at_start": "79.3 GiB",
    "weights": "18 GiB",
    "non_torch": "4 GiB",
    "cuda_graphs": "3 GiB",
    "activation": "3 GiB",
}


def seed000_doc(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": {"kv_bytes_per_token": 128 * KIB},
        "layout": {"tp": len(ranks)},
        "engine": {
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8192,
            "max_num_batched_tokens": 8192,
            "max_num_seqs": 256,
        },
        "policy": {"growth_reserve": 0.08, "operating_reserve": "0.9 GiB", "avg_live_tokens": 12000},
        "ranks": ranks,
    }


def test_seed000_single_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_plan_cli(tmp_path, seed000_doc([SEED000_RANK]), capsys)
    rank = result["ranks"][0]
    assert rank["requested_bytes"] == 72 * GIB
    assert rank["headroom_bytes"] == 8 * GIB
    assert rank["kv_bytes"] == (72 - 18 - 4 - 3 - 3) * GIB == 44 * GIB
    assert result["kv_bytes_per_token"] == 131072
    assert result["raw_tokens"] == 44 * GIB // (128 * KIB) == 360_448
    assert result["tokens"] == 360_448
    assert result["schedulable_tokens"] == 331_612  # floor(360,448 × 0.92)
    assert result["concurrency_ceiling"] == 27  # floor(331,612 / 12,000)
    assert result["binding_limit"] == "kv_blocks"
    # conservation: rows + kv + headroom = total
    rows = sum(rank[k] for k in ("weights_bytes", "non_torch_bytes", "cuda_graph_bytes", "activation_bytes"))
    assert rows + rank["kv_bytes"] + rank["headroom_bytes"] == rank["total_bytes"]
    assert rank["sources"]["kv_bytes"] == "measured"


def test_seed000_min_rank_binds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ranks = [dict(SEED000_RANK), dict(SEED000_RANK), {"kv_room": "42 GiB"}, dict(SEED000_RANK)]
    result = run_plan_cli(tmp_path, seed000_doc(ranks), capsys)
    assert result["binding_rank"] == "2"
    assert result["tokens"] == 42 * GIB // (128 * KIB)
    assert [r["stranded_bytes"] for r in result["ranks"]] == [2 * GIB, 2 * GIB, 0, 2 * GIB]
    assert result["stranded_bytes"] == 6 * GIB
    # four ranks do not make 4 × 360,448 tokens
    assert result["tokens"] < 360_448


def test_seed000_preflight(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    low = dict(SEED000_RANK, free_at_start="71.3 GiB")
    result = run_plan_cli(tmp_path, seed000_doc([dict(SEED000_RANK), dict(SEED000_RANK), low]), capsys)
    assert [r["will_start"] for r in result["ranks"]] == [True, True, False]
    messages = [w["message"] for w in result["warnings"] if w["code"] == "free_below_requested"]
    assert messages == ["rank 2 will not start: 71.30 GiB free at start, 72.00 GiB requested"]
    assert result["will_start"] is False


def test_seed001_uniform_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rooms = ["18.8 GiB", "17.6 GiB", "12.9 GiB", "16.4 GiB"]
    doc = {
        "model": {"kv_bytes_per_token": 256 * KIB},
        "layout": {"tp": 4},
        "engine": {"max_model_len": 8192, "max_num_batched_tokens": 8192, "max_num_seqs": 256},
        "policy": {"operating_reserve": "0.9 GiB"},
        "ranks": [{"kv_room": r} for r in rooms],
    }
    result = run_plan_cli(tmp_path, doc, capsys)
    ub = result["uniform_budget"]
    page = 16 * 256 * KIB
    safe = [round(x * GIB) - round(0.9 * GIB) for x in (18.8, 17.6, 12.9, 16.4)]
    expected = min(safe) // page * page
    assert ub["kv_cache_memory_bytes"] == expected == 12 * GIB
    assert ub["flag"] == f"--kv-cache-memory-bytes {12 * GIB}"
    assert ub["stranded_bytes"] == sum(s - expected for s in safe)
    assert round(ub["stranded_bytes"] / GIB, 1) == 14.1
    assert ub["tokens"] == 49_152
    assert ub["concurrency_at_max_model_len"] == 6
    assert ub["binding_rank"] == "2"
    assert ub["min_bytes"] == min(safe) and ub["max_bytes"] == max(safe)
    assert ub["min_over_median"] == pytest.approx(min(safe) / ((safe[1] + safe[3]) / 2))
    assert [round(r["stranded_bytes"] / GIB, 1) for r in ub["ranks"]] == [5.9, 4.7, 0.0, 3.5]
    # issue 17 item 12: the deploy flags carry the uniform budget, and no utilization beside it
    assert ub["in_flags"] is True
    assert f"--kv-cache-memory-bytes {12 * GIB}" in result["flags"]
    assert not any(f.startswith("--gpu-memory-utilization") for f in result["flags"])
    assert {"flag": "--kv-cache-memory-bytes", "value": str(12 * GIB)} in result["vllm_args"]


def test_seed001_without_a_reserve_or_a_full_request_says_why_not(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    rooms = ["18.8 GiB", "17.6 GiB", "12.9 GiB", "16.4 GiB"]
    base = {"model": {"kv_bytes_per_token": 256 * KIB}, "layout": {"tp": 4},
            "engine": {"max_model_len": 8192}, "ranks": [{"kv_room": r} for r in rooms]}
    no_reserve = run_plan_cli(tmp_path, base, capsys)
    assert no_reserve["uniform_budget"]["in_flags"] is False
    assert "no operating reserve" in no_reserve["uniform_budget"]["in_flags_reason"]
    assert not any(f.startswith("--kv-cache-memory-bytes") for f in no_reserve["flags"])
    # a reserve that leaves the binding rank less than one 8,192-token request (+ vLLM's null block)
    tight = {**base, "policy": {"operating_reserve": "12.8 GiB"}}
    result = run_plan_cli(tmp_path, tight, capsys)
    assert result["uniform_budget"]["in_flags"] is False
    assert "holds no max_model_len" in result["uniform_budget"]["in_flags_reason"]
    assert not any(f.startswith("--kv-cache-memory-bytes") for f in result["flags"])


def test_seed002_decimal_gb_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {
        "model": {"kv_bytes_per_token": 2 * 32 * 8 * 128 * 2},
        "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192},
        "ranks": [{"total": "24 GB", "weights": "16.06 GB", "non_torch": "1.8 GB"}],
    }
    result = run_plan_cli(tmp_path, doc, capsys)
    assert result["kv_bytes_per_token"] == 131_072
    assert result["ranks"][0]["kv_bytes"] == 3_740_000_000
    assert result["raw_tokens"] == 28_533
    assert result["blocks"] == 1_783
    assert result["tokens"] == 1_783 * 16


def test_seed002_padding() -> None:
    # 32 requests from 120 to 7,900 tokens holding about 44,000 tokens between them
    lengths = [120, 7900] + [1199] * 29 + [1209]
    cmp = compare_padding(lengths)
    assert cmp.padded_slots == 32 * 7900 == 252_800
    assert cmp.real_tokens == 44_000
    assert round(cmp.padded_waste_factor, 1) == 5.7
    assert -(-120 // 16) == 8 and -(-7900 // 16) == 494
    assert cmp.paged_waste_fraction < 0.01


def test_seed003_llama70b_per_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    config = DATA / "configs" / "llama31-70b.json"
    assert main(["kv-bytes", str(config), "--json"]) == 0
    tp1 = json.loads(capsys.readouterr().out)
    assert tp1["kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 2 == 327_680
    assert main(["kv-bytes", str(config), "--tp", "4", "--max-model-len", "8192", "--json"]) == 0
    tp4 = json.loads(capsys.readouterr().out)
    assert tp4["kv_bytes_per_token"] == 81_920
    assert tp4["kv_heads_per_rank"] == 2
    # the slip: 81,920 B × 8,192 tokens is 640 MiB, not "655.36 MB"; 100 of them are 62.5 GiB
    assert tp4["per_request_bytes"] == 671_088_640 == 640 * 2**20
    assert 100 * tp4["per_request_bytes"] == 62.5 * GIB
    # "131,072 blocks per GPU" cannot fit an 80 GB card at 81,920 B/token
    assert 131_072 * tp4["page_bytes"] > 80 * GIB


def test_seed001_a_uniform_16_gib_is_unsafe_on_the_weak_rank(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # "Rank 2 is the ceiling. A uniform 16 GiB setting is unsafe even though the average available
    # room is 16.4 GiB": a manual --kv-cache-memory-bytes above a rank's measured room fails that rank.
    rooms = ["18.8 GiB", "17.6 GiB", "12.9 GiB", "16.4 GiB"]
    assert round(sum((18.8, 17.6, 12.9, 16.4)) / 4, 1) == 16.4
    doc: dict[str, Any] = {
        "model": {"kv_bytes_per_token": 256 * KIB},
        "layout": {"tp": 4},
        "engine": {"max_model_len": 8192, "kv_cache_memory_bytes": "16 GiB"},
        "ranks": [{"kv_room": r} for r in rooms],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    assert main(["plan", str(path), "--check"]) == 1
    out = capsys.readouterr().out
    assert "CHECK FAILED rank_starts: rank 2 will not fit --kv-cache-memory-bytes 17179869184" in out
    result = run_plan_cli(tmp_path, doc, capsys)
    assert [r["will_start"] for r in result["ranks"]] == [True, True, False, True]
    assert result["will_start"] is False
    # the uniform budget is priced on the measured rooms, not on the manual value that replaced them
    page = 16 * 256 * KIB
    assert result["uniform_budget"]["kv_cache_memory_bytes"] == round(12.9 * GIB) // page * page
    assert round(result["uniform_budget"]["stranded_bytes"] / GIB, 1) == 14.1  # 5.9 + 4.7 + 0 + 3.5
    # at the uniform 12 GiB (after the 0.9 GiB reserve) every rank starts
    doc["engine"]["kv_cache_memory_bytes"] = "12 GiB"
    doc["policy"] = {"operating_reserve": "0.9 GiB"}
    assert all(r["will_start"] for r in run_plan_cli(tmp_path, doc, capsys)["ranks"])


def test_seed001_weakest_rank_after_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "If the weakest rank has 13.1 GiB after capture and policy requires 1 GiB free, the candidate
    # budget is 12.1 GiB before block rounding"; "min 12 GiB, median 18 GiB: one-third removed".
    doc = {
        "model": {"kv_bytes_per_token": 256 * KIB},
        "engine": {"max_model_len": 8192},
        "policy": {"operating_reserve": "1 GiB"},
        "ranks": [{"kv_room": "13.1 GiB"}, {"kv_room": "20 GiB"}],
    }
    ub = run_plan_cli(tmp_path, doc, capsys)["uniform_budget"]
    assert ub["min_bytes"] == round(13.1 * GIB) - GIB
    assert round(ub["min_bytes"] / GIB, 2) == 12.1
    page = 16 * 256 * KIB
    assert ub["kv_cache_memory_bytes"] == (round(13.1 * GIB) - GIB) // page * page == 12_989_759_488
    doc["ranks"] = [{"kv_room": f"{x} GiB"} for x in (13, 19, 19, 21)]
    ub = run_plan_cli(tmp_path, doc, capsys)["uniform_budget"]
    assert (ub["min_bytes"], ub["median_bytes"]) == (12 * GIB, 18 * GIB)
    assert ub["min_over_median"] == pytest.approx(2 / 3)


def test_seed002_headroom_and_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "the gpu_memory_utilization=0.90 guard hands back another 2.4 to the driver"; "an 8B model holds
    # eight billion parameters, and bf16 stores each of them in two bytes": Llama-3.1-8B's 8.03e9
    # parameters are the seed's 16.06 GB of weights.
    doc = {
        "model": {"kv_bytes_per_token": 131072},
        "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192},
        "ranks": [{"total": "24 GB", "weights": "16.06 GB", "non_torch": "1.8 GB"}],
    }
    rank = run_plan_cli(tmp_path, doc, capsys)["ranks"][0]
    assert rank["headroom_bytes"] == 2_400_000_000 and rank["requested_bytes"] == 21_600_000_000
    hidden, inter, vocab, layers, kv_dim = 4096, 14336, 128256, 32, 1024
    per_layer = 2 * hidden * hidden + 2 * hidden * kv_dim + 3 * hidden * inter + 2 * hidden
    params = 2 * vocab * hidden + layers * per_layer + hidden
    assert params == 8_030_261_248 and round(2 * params / 1e9, 2) == 16.06
    # vLLM's loaded weights add the rotary cos/sin cache (131,072 positions × 128 × bf16), which log
    # 01 measures: "Loading model weights took 14.9888 GB" (GiB) = 16,094,076,928 B
    est = run_plan_cli(tmp_path, {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}}, capsys)
    assert est["ranks"][0]["weights_bytes"] == 2 * params + 131072 * 128 * 2
    assert round(est["ranks"][0]["weights_bytes"] / GIB, 4) == 14.9888


def test_seed003_slips_and_the_impossible_block_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = DATA / "configs" / "llama31-70b.json"
    # "320 KB × 8192 = 2.62 GB" mixes KiB with decimal GB: 327,680 B × 8,192 is 2.5 GiB (2.68 GB)
    assert main(["kv-bytes", str(config), "--max-model-len", "8192", "--json"]) == 0
    tp1 = json.loads(capsys.readouterr().out)
    assert tp1["per_request_bytes"] == 327_680 * 8192 == 2_684_354_560 == 2.5 * GIB
    # "70B parameter model in FP16 takes up 140 GB ... Weights per GPU = 35 GB" at TP4 on an A100 80GB
    plan = {"model": {"catalogue": "llama-3.1-70b"}, "layout": {"tp": 4}, "gpu": {"name": "A100 80GB"},
            "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192}}
    est = run_plan_cli(tmp_path, plan, capsys)
    assert round(est["ranks"][0]["weights_bytes"] / 1e9) == 35
    # "(80 GB × 0.90) − 35 GB weights − 6 GB activations leaves roughly 31 GB" (the seed's rows)
    rows = {"total": "80 GB", "weights": "35 GB", "activation": "6 GB"}
    seeds_rows = run_plan_cli(tmp_path, {"model": {"kv_bytes_per_token": 81920}, "ranks": [rows],
                                         "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192}}, capsys)
    assert seeds_rows["ranks"][0]["kv_bytes"] == 31_000_000_000
    # "Under 0.85 ... allocated 131,072 blocks per GPU": 131,072 × 16 × 81,920 B = 160 GiB of KV per
    # rank on a 79.15 GiB card whose budget is 67.28 GiB. The plan says the evidence contradicts itself
    # and deploys no --kv-cache-memory-bytes from it.
    room = 131_072 * 16 * 81_920
    assert room == 160 * GIB
    doc = {"model": {"catalogue": "llama-3.1-70b"}, "layout": {"tp": 4}, "gpu": {"name": "A100 80GB"},
           "engine": {"gpu_memory_utilization": 0.85, "max_model_len": 8192},
           "policy": {"operating_reserve": "1 GiB"},
           "ranks": [{"total": "79.15 GiB", "kv_room": room} for _ in range(4)]}
    result = run_plan_cli(tmp_path, doc, capsys)
    assert result["blocks"] == 131_072
    above = [w for w in result["warnings"] if w["code"] == "kv_room_above_budget"]
    assert len(above) == 4
    said = "the KV room (160.00 GiB) is more than the rank's budget (67.28 GiB of 79.15 GiB total)"
    assert said in above[0]["message"]
    assert result["uniform_budget"]["in_flags"] is False
    assert not any(f.startswith("--kv-cache-memory-bytes") for f in result["flags"])
