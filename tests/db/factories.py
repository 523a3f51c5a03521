"""Sample ledgers and plans for the storage tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from app.core.audit import LedgerRow
from app.db.repository import LedgerIn

GIB = 1024**3
MIB = 1024**2


def rank_rows(n: int = 8, kv_gib: int = 60, shift: int = 0) -> list[LedgerRow]:
    return [
        LedgerRow(
            rank=str(i),
            total_bytes=80 * GIB,
            free_at_start_bytes=79 * GIB - i * MIB,
            requested_bytes=72 * GIB,
            weights_bytes=8 * GIB + shift,
            non_torch_bytes=512 * MIB,
            cuda_graph_bytes=None if i == 7 else 300 * MIB,
            activation_bytes=2 * GIB,
            kv_bytes=kv_gib * GIB - i * MIB,
            num_gpu_blocks=100_000 + i,
            kv_tokens=None,
        )
        for i in range(n)
    ]


EVIDENCE: dict[str, Any] = {
    "vllm_version": "0.21.0",
    "vllm_commit": "96a85c575",
    "model_id": "Qwen/Qwen3-32B",
    "model_revision": "abc123",
    "config_sha256": "0" * 64,
    "quantization": "fp8",
    "kv_cache_dtype": "auto",
    "block_size": 16,
    "tp": 8,
    "pp": 1,
    "dp": 1,
    "ep": None,
    "gpu_type": "NVIDIA H100 80GB HBM3",
    "driver_version": "570.86.15",
    "cuda_version": "12.8",
    "torch_version": "2.9.0",
    "graph_mode": "FULL_AND_PIECEWISE",
    "max_num_batched_tokens": 8192,
    "gpu_memory_utilization": 0.9,
    "kv_cache_memory_bytes": None,
    "max_concurrency": None,
    "max_concurrency_tokens": None,
}


def ledger_in(note: str = "boot", log: str | None = "INFO vllm started\n", **overrides: Any) -> LedgerIn:
    evidence = dict(EVIDENCE)
    evidence.update(overrides.pop("evidence", {}))
    return LedgerIn(
        ranks=overrides.pop("ranks", rank_rows()),
        evidence=evidence,
        captured_at=overrides.pop("captured_at", dt.date(2026, 11, 28)),
        note=note,
        source_log=log,
    )


PLAN_DOCUMENT: dict[str, Any] = {
    "model": "Qwen/Qwen3-32B",
    "layout": {"tp": 8, "pp": 1},
    "gpu_memory_utilization": 0.92,
    "max_model_len": 32768,
    "kv_cache_memory_bytes": 2**62,
    "note": "ünïcödé ✓ <script>alert(1)</script>",
    "ranks": [{"rank": "0", "free_at_start_bytes": 85_899_345_920}, {"rank": "1"}],
    "ratio": 0.1 + 0.2,
    "empty": {},
    "flags": [True, False, None],
}
PLAN_SUMMARY: dict[str, Any] = {
    "uniform_kv_bytes": 64_424_509_440,
    "binding_rank": "3",
    "tokens": 251_658,
    "stranded_bytes": [0, 1_073_741_824],
    "fits": True,
}
