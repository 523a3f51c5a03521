"""Memory already in use on the card before vLLM starts (other processes) in the estimated non-torch
row: counted by the versions whose non-torch figure is `mem_get_info` total − free minus torch's
allocated bytes (V0 before 0.6.5, V1 before 0.9.1: every process on the device), not by later ones,
which snapshot memory at init and refuse to start when free memory is below the request instead."""

from __future__ import annotations

import pytest

from app.core.estimates import EstimateContext, estimate_ranks
from app.core.ledger import LedgerRules, RankInput, RankLedger, work_out_rank
from app.core.model_config import shape_from_config
from app.core.versions import rules_for
from app.ingest.catalogue import get_model

GIB = 1024**3
TOTAL = int(47.74 * GIB)  # public/43's card (vllm-project/vllm#11230), Qwen2.5-72B GPTQ int4 on it
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}


def _rank(version: str, v1: bool, free: int | None, util: float = 0.95) -> tuple[RankInput, RankLedger]:
    shape = shape_from_config({**get_model("qwen2.5-72b").config, "quantization_config": GPTQ})
    ctx = EstimateContext(1, 1, 8192, 256, False, rules_for(version), v1=v1, max_model_len=8192)
    (rank,) = estimate_ranks(shape, ctx, TOTAL, free)
    return rank, work_out_rank(rank, LedgerRules(gpu_memory_utilization=util, free_memory_preflight=False))


@pytest.mark.parametrize(("version", "v1"), [("0.6.4", False), ("0.6.0", False), ("0.8.5", True), ("0.9.0", True)])
def test_whole_device_versions_count_other_processes(version: str, v1: bool) -> None:
    in_use = int(3.6 * GIB)
    alone, alone_ledger = _rank(version, v1, None)
    shared, shared_ledger = _rank(version, v1, TOTAL - in_use)
    assert shared.non_torch is not None and alone.non_torch is not None
    assert shared.non_torch.bytes == alone.non_torch.bytes + in_use
    assert "3.60 GiB in use on the card before vLLM started" in shared.non_torch.note
    # vLLM's own formula (worker.py @63f1fde27): kv = total × util − (torch peak + non-torch), where
    # non-torch = (total − free after the profile) − torch allocated: the other processes' bytes count whole.
    assert shared_ledger.kv.bytes == alone_ledger.kv.bytes - in_use


@pytest.mark.parametrize(("version", "v1"), [("0.6.5", False), ("0.7.3", False), ("0.9.1", True), ("0.19.0", True)])
def test_snapshot_versions_do_not(version: str, v1: bool) -> None:
    alone, _ = _rank(version, v1, None)
    shared, _ = _rank(version, v1, TOTAL - 3 * GIB)
    assert shared.non_torch == alone.non_torch


def test_all_free_adds_nothing() -> None:
    alone, _ = _rank("0.6.4", False, None)
    shared, _ = _rank("0.6.4", False, TOTAL)
    assert shared.non_torch == alone.non_torch


def test_plan_document_with_free_memory_says_it_counted() -> None:
    """Through the plan service: a v0.6.4 plan on a card with 3.5 GiB in use by others loses exactly
    that from its KV cache (the row's note is pinned by the tests above)."""
    from app.services.plans import run_plan

    def doc(free: str | None) -> dict[str, object]:
        gpu: dict[str, object] = {"total": "47GiB", **({"free_at_start": free} if free else {})}
        return {"model": {"catalogue": "qwen2.5-7b-instruct"}, "gpu": gpu, "vllm_version": "0.6.4",
                "engine": {"max_model_len": 8192, "gpu_memory_utilization": 0.9}}  # fmt: skip

    alone, shared = run_plan(doc(None), with_levers=False), run_plan(doc("43.5GiB"), with_levers=False)
    (a,), (b,) = alone["ranks"], shared["ranks"]
    assert b["non_torch_bytes"] - a["non_torch_bytes"] == int(3.5 * GIB)
    assert a["kv_bytes"] - b["kv_bytes"] == int(3.5 * GIB)
    assert b["sources"]["non_torch_bytes"] == "estimated"
