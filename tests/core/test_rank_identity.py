"""Rank identity in the JSON result (item 11 of issue 17): integer ``index``, text ``label``."""

from __future__ import annotations

from pathlib import Path

from app.services.plans import run_plan

LOG = Path(__file__).parents[1] / "data" / "vllm-logs" / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log"
GIB = 2**30


def test_every_rank_has_its_position_and_label() -> None:
    rows = {"total": 80 * GIB, "weights": 18 * GIB, "non_torch": 4 * GIB, "activation": 3 * GIB, "cuda_graphs": GIB}
    doc = {
        "model": {"kv_bytes_per_token": 131072},
        "layout": {"tp": 3},
        "engine": {"max_model_len": 8192},
        "ranks": [rows, dict(rows, weights=20 * GIB), rows],
    }
    result = run_plan(doc, with_levers=False)
    assert [r["index"] for r in result["ranks"]] == [0, 1, 2]
    assert [r["label"] for r in result["ranks"]] == [r["rank"] for r in result["ranks"]]
    assert result["binding_rank"] == result["ranks"][1]["rank"]
    assert result["binding_index"] == 1
    assert all(isinstance(r["index"], int) for r in result["ranks"])


def test_log_ranks_keep_their_worker_labels_beside_the_index() -> None:
    result = run_plan({"from_log": {"text": LOG.read_text()}}, with_levers=False)
    ranks = result["ranks"]
    assert [r["index"] for r in ranks] == list(range(len(ranks)))
    assert all(r["label"] == r["rank"] for r in ranks)
    bound = ranks[result["binding_index"]]
    assert bound["rank"] == result["binding_rank"] and bound["binding"]
