"""Issue 17 item 20: what a free-memory gap does to this plan, never a warning the ledger beside
it contradicts. Real input: tests/data/nvidia-smi/table-r550-4gpu.txt (4 × 80 GB; GPU 0 has
12.25 GiB less free than the others)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.services import imports, plans
from app.web.plan.workflows import nvidia_smi_document

SMI = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi" / "table-r550-4gpu.txt"


def _plan(**engine: Any) -> dict[str, Any]:
    doc = nvidia_smi_document(SMI.read_text(encoding="utf-8"), "llama-3.1-70b")
    version = engine.pop("vllm_version", None)
    if version:
        doc["vllm_version"] = version
    doc["engine"] = {**doc.get("engine", {}), **engine}
    return plans.run_plan(doc, with_levers=False)


def _gap(out: dict[str, Any]) -> str:
    (message,) = [w["message"] for w in out["warnings"] if w["code"] == "free_memory_spread"]
    return str(message)


@pytest.mark.parametrize("util", [0.8, 0.84, 0.9, 0.92, 0.95])
def test_the_gap_message_agrees_with_the_ledger(util: float) -> None:
    out = _plan(gpu_memory_utilization=util)
    refused = [w["rank"] for w in out["warnings"] if w["code"] == "free_below_requested"]
    message = _gap(out)
    if refused:
        assert "will not start there" in message and all(r in message for r in refused)
        assert "does not change" not in message
    else:
        assert "does not change this plan" in message
        assert len({r["kv_bytes"] for r in out["ranks"]}) == 1  # the ledger: the gap moved no rank's KV


def test_the_utilization_it_suggests_starts() -> None:
    message = _gap(_plan(gpu_memory_utilization=0.92))
    match = re.search(r"lower the utilization to ([\d.]+) or less", message)
    assert match, message
    out = _plan(gpu_memory_utilization=float(match[1]))
    assert not any(w["code"] == "free_below_requested" for w in out["warnings"])
    assert "does not change this plan" in _gap(out)


def test_before_091_the_gap_comes_out_of_the_low_ranks_budget() -> None:
    message = _gap(_plan(gpu_memory_utilization=0.8, vllm_version="0.8.5"))
    assert "comes out of rank GPU0's KV budget" in message and "estimated rows here do not include it" in message


def test_a_manual_budget_names_the_tightest_rank() -> None:
    message = _gap(_plan(kv_cache_memory_bytes="10GiB"))
    assert "--kv-cache-memory-bytes" in message and "rank GPU0 is the one to check" in message


def test_the_import_finding_states_the_rule_not_a_wrong_consequence() -> None:
    parsed = imports.import_nvidia_smi(SMI.read_text(encoding="utf-8"))
    (finding,) = [f for f in parsed["findings"] if f["code"] == "free_memory_spread"]
    assert "sets every rank's KV budget" not in finding["message"]
    assert "below the requested budget" in finding["message"]
