"""Example plans shown on the home page, so the first page is not empty.

Each example is a what-if query string (a shareable plan URL). Two start from stored base
documents that a query string cannot hold (measured rank rows from the seeds); those documents
are registered under fixed ids in the base store when `Settings.demo_data` is on.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.web import querystring

_SEED000_RANK: dict[str, str] = {
    "total": "80 GiB",
    "free_at_start": "79.3 GiB",
    "weights": "18 GiB",
    "non_torch": "4 GiB",
    "cuda_graphs": "3 GiB",
    "activation": "3 GiB",
}

SEED000: dict[str, object] = {
    "title": "Seed 000: four measured ranks, one with a larger activation peak",
    "model": {"kv_bytes_per_token": 131072, "name": "seed-000 (128 KiB/token per rank)"},
    "layout": {"tp": 4},
    "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 12000, "block_size": 16},
    "policy": {"growth_reserve": 0.08, "avg_live_tokens": 12000},
    "ranks": [
        {**_SEED000_RANK, "label": "0"},
        {**_SEED000_RANK, "label": "1"},
        {**_SEED000_RANK, "label": "2", "activation": "5 GiB"},
        {**_SEED000_RANK, "label": "3"},
    ],
}

SEED001: dict[str, object] = {
    "title": "Seed 001: measured post-warmup KV room on four ranks",
    "model": {"kv_bytes_per_token": 262144, "name": "seed-001 (256 KiB/token per rank)"},
    "layout": {"tp": 4},
    "engine": {"max_model_len": 8192, "block_size": 16},
    "policy": {"operating_reserve": "0.9 GiB", "avg_live_tokens": 8192},
    "ranks": [
        {"label": "0", "kv_room": "18.8 GiB"},
        {"label": "1", "kv_room": "17.6 GiB"},
        {"label": "2", "kv_room": "12.9 GiB"},
        {"label": "3", "kv_room": "16.4 GiB"},
    ],
}

BASE_DOCUMENTS: dict[str, dict[str, object]] = {"seed000": SEED000, "seed001": SEED001}


@dataclass(frozen=True)
class Example:
    title: str
    description: str
    query: dict[str, str]

    @property
    def url(self) -> str:
        return querystring.page_url("/plan", self.query)


EXAMPLES: tuple[Example, ...] = (
    Example(
        "Llama-3.1-70B, TP4 on H100 80GB",
        "Estimated rows for four H100 ranks; move utilization and the prefill chunk.",
        {"model": "llama-3.1-70b", "gpu": "H100 80GB", "tp": "4"},
    ),
    Example(
        "Seed 000: a measured 4-rank ledger",
        "Three ranks with 44 GiB of KV and one with 42 GiB: the 42 GiB rank binds.",
        {"base": "seed000"},
    ),
    Example(
        "Seed 001: a uniform --kv-cache-memory-bytes",
        "Measured KV room per rank and a 0.9 GiB operating reserve: the uniform manual budget.",
        {"base": "seed001"},
    ),
    Example(
        "Llama-3.1-405B on 64 ranks (TP8 × PP8)",
        "An estimated 64-rank plan with uneven pipeline stages: one bar per rank.",
        {"model": "llama-3.1-405b", "gpu": "H100 80GB", "tp": "8", "pp": "8"},
    ),
    Example(
        "Qwen3-8B on 24 GiB, FP8 KV cache",
        "A single consumer GPU; compare the KV dtype lever.",
        {"model": "qwen3-8b", "gpu": "24GiB", "kv_dtype": "fp8", "tp": "1"},
    ),
)


def base_documents() -> dict[str, dict[str, object]]:
    """The fixed base documents the examples refer to."""
    return BASE_DOCUMENTS
