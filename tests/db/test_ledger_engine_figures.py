"""Issue 17 item 6: ledgers keep the engine figures a log states (vLLM's maximum concurrency and
its request length; the CUDA-graph estimate beside the actual), and a ledger stored before those
columns existed (migration 0007) keeps its content hash."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from app.core.audit import LATER_ROW_FIELDS, ROW_FIELDS
from app.db import records
from app.services.ledger_import import ledger_from_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"


def test_a_v084_log_keeps_tokens_and_concurrency() -> None:
    ledger, _ = ledger_from_log((LOGS / "public" / "03-v084-llama31-8b-l40s-tp1.log").read_text())
    (rank,) = ledger.ranks
    assert rank.kv_tokens == 158_656  # 'GPU KV cache size: 158,656 tokens', the engine's, on its one rank
    assert ledger.evidence["max_concurrency"] == 4.84
    assert ledger.evidence["max_concurrency_tokens"] == 32_768


def test_a_v024_log_keeps_the_cuda_graph_estimate_and_actual() -> None:
    ledger, _ = ledger_from_log((LOGS / "23-v0240-tp1-cg-pool-actual-vs-estimated.log").read_text())
    (rank,) = ledger.ranks
    gib = 2**30
    assert rank.cuda_graph_bytes == round(0.65 * gib) and rank.cuda_graph_estimate_bytes == round(0.63 * gib)


def test_a_ledger_hashed_before_the_new_fields_keeps_its_hash() -> None:
    old_evidence = {k: None for k in records.EVIDENCE_KEYS if k not in records.LATER_EVIDENCE_KEYS}
    base = {"slug": "s", "created_at": None, "captured_at": None, "note": "", "source_log_sha256": None,
            "source_log_bytes": None, "source_log_truncated": False}
    old_row = SimpleNamespace(**base, **old_evidence)
    new_row = SimpleNamespace(**base, **{k: None for k in records.EVIDENCE_KEYS})
    old_rank = {"rank": "0", "ordinal": 0, **{n: 1 for n in ROW_FIELDS if n not in LATER_ROW_FIELDS}}
    new_rank = {**old_rank, **{n: None for n in LATER_ROW_FIELDS}}
    assert records.ledger_hash(old_row, "d", [old_rank]) == records.ledger_hash(new_row, "d", [new_rank])
    stated = SimpleNamespace(**base, **{**{k: None for k in records.EVIDENCE_KEYS}, "max_concurrency": 4.84})
    assert records.ledger_hash(stated, "d", [new_rank]) != records.ledger_hash(new_row, "d", [new_rank])
