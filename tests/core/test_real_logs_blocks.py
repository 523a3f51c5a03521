"""Real vLLM start-up logs: the logged KV bytes must give the logged blocks, tokens and concurrency.

Each case quotes the log lines it checks (files in ``../shared/data/vllm-logs``, numbers as listed in
its ``index.json``). A GiB figure printed with two decimals stands for any byte count within ±0.005
GiB, so the check is that the logged block count lies between the blocks of the interval's two
ends; an exact byte count ("Current kv cache memory in use is N bytes", v0.10.2) must give the
block count exactly. Configs: ``tests/data/configs`` (see its README for which are verbatim).

Logs without a known model are not checked here: 07 (model not stated), 21 and 22 (no model, no
block count). File 23 names no model; its arithmetic is checked against the Qwen2.5-7B shape that
index.json says fits it (flagged as an assumption in the test id).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pytest

from app.core.kvspec import RankKV, rank_kv
from app.core.model_config import shape_from_config

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
GIB = 1024**3
HALF_CENT = Fraction(5, 1000)


def rank(config: str, tp: int, block_size: int = 16) -> RankKV:
    shape = shape_from_config(json.loads((CONFIGS / f"{config}.json").read_text()))
    return rank_kv(shape, tp=tp, block_size=block_size)


def blocks_range(rkv: RankKV, printed_gib: str) -> tuple[int, int]:
    """Blocks for the smallest and largest byte counts that print as ``printed_gib`` with %.2f."""
    value = Fraction(printed_gib)
    low = math.ceil((value - HALF_CENT) * GIB)
    high = math.floor((value + HALF_CENT) * GIB)
    return rkv.blocks_for(low), rkv.blocks_for(high)


@dataclass(frozen=True)
class Logged:
    file: str
    config: str
    tp: int
    available_gib: str  # "Available KV cache memory: X GiB" (V1) or V0 kv_cache_size=XGiB
    blocks: int  # the block count the log states or implies (tokens / block_size)
    tokens: int  # "GPU KV cache size: N tokens" (V0: blocks × block_size)
    max_model_len: int
    concurrency: str  # "Maximum concurrency for N tokens per request: X.XXx"
    v0: bool = False  # V0 prints blocks × block_size / max_model_len


CASES = [
    # 01 (v0.6.4, V0): "kv_cache_size=3.81GiB" / "GPU blocks: 1952" / "Maximum concurrency for 20000 … 1.56x"
    Logged("01-v064-llama31-8b-rtx3090-tp1", "llama31-8b", 1, "3.81", 1952, 1952 * 16, 20000, "1.56", v0=True),
    # 01, second run: "kv_cache_size=2.89GiB" / "# GPU blocks: 1478" / "… 29000 …: 0.82x" and
    # "… maximum number of tokens that can be stored in KV cache (23648)"
    Logged("01-v064-llama31-8b-rtx3090-tp1", "llama31-8b", 1, "2.89", 1478, 23648, 29000, "0.82", v0=True),
    # 13 (v0.10.2): "Available KV cache memory: 25.91 GiB" / "GPU KV cache size: 566,016 tokens" / "17.27x"
    Logged("13-v0102-qwen3-30b-a3b-fp8-2xl40s-tp2-ep", "qwen3-30b-a3b-fp8", 2, "25.91", 35376, 566016, 32768, "17.27"),
    # 16 (v0.10.2): "Available KV cache memory: 6.51 GiB" / "GPU KV cache size: 42,656 tokens" / "1.30x"
    Logged("16-v0102-qwen3-14b-lmcache-tp1", "qwen3-14b", 1, "6.51", 2666, 42656, 32768, "1.30"),
    # 18 (v0.11.0): "Available KV cache memory: 2.31 GiB" ×4 / "GPU KV cache size: 100,752 tokens" / "1.54x" /
    # "num_gpu_blocks is: 6297"
    Logged("18-v0110-qwen3-vl-30b-a3b-4x3090-tp4", "qwen3-vl-30b-a3b", 4, "2.31", 6297, 100752, 65536, "1.54"),
    # 15 (v0.10.2, hybrid): "Available KV cache memory: 44.59 GiB" / "GPU KV cache size: 973,760 tokens" /
    # "Maximum concurrency for 262,144 tokens per request: 14.77x"; blocks are not printed (7161…7163 fit)
    Logged("15-v0102-qwen3-next-80b-h200-tp2-hybrid", "qwen3-next-80b", 2, "44.59", 7162, 973760, 262144, "14.77"),
    # 23 (v0.24.0, model not stated — Qwen2.5-7B shape ASSUMED): "Available KV cache memory: 11.92 GiB" /
    # "GPU KV cache size: 223,152 tokens" (max_seq_len=8192)
    Logged("23-v0240-tp1-ASSUMED-qwen25-7b", "qwen25-7b", 1, "11.92", 13947, 223152, 8192, ""),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.file}@{c.available_gib}GiB")
def test_logged_gib_gives_the_logged_blocks(case: Logged) -> None:
    rkv = rank(case.config, case.tp)
    low, high = blocks_range(rkv, case.available_gib)
    assert low <= case.blocks <= high
    assert high - low <= 1 + (GIB // 100) // rkv.page_bytes  # the interval is narrow: no slack hidden here


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.file}@{c.available_gib}GiB")
def test_logged_tokens_and_concurrency(case: Logged) -> None:
    rkv = rank(case.config, case.tp)
    assert rkv.tokens_for_blocks(case.blocks) == case.tokens
    if case.v0:
        concurrency = case.blocks * rkv.block_size / case.max_model_len
    else:
        concurrency = rkv.max_concurrency(case.blocks, case.max_model_len, 8192)
    if case.file.startswith("23-"):
        # v0.24 (2026-04-28+) prints int(concurrency × max_model_len); equal here (8192 % 16 == 0).
        assert rkv.kv_cache_size_tokens(case.blocks, case.max_model_len, 8192) == case.tokens
    if case.concurrency:
        assert f"{concurrency:.2f}" == case.concurrency


def test_file_15_hybrid_qwen3_next_tp2() -> None:
    """'Setting attention block size to 544 tokens' / 'Padding mamba page size by 1.49%'."""
    rkv = rank("qwen3-next-80b", 2)
    assert rkv.block_size == 544
    assert rkv.mamba_page_padding_pct is not None and f"{rkv.mamba_page_padding_pct:.2f}" == "1.49"
    low, high = blocks_range(rkv, "44.59")
    assert {rkv.tokens_for_blocks(b) for b in range(low, high + 1)} == {973760}  # 7162 // 4 groups × 544
    printed = {b: f"{rkv.max_concurrency(b, 262144, 8192):.2f}" for b in range(low, high + 1)}
    assert printed == {7161: "14.76", 7162: "14.77", 7163: "14.77"}  # 485 blocks per request: 482 + 3 states
    assert rkv.per_request_blocks(262144, 8192) == 482 + 3
    naive = int(Fraction("44.59") * GIB) // rkv.kv_bytes_per_token
    assert naive > 3 * 973760  # bytes / (bytes per token) is wrong by integer factors for hybrids


# 14 (v0.10.2, Qwen3-235B-A22B-FP8, TP8, 4 KV heads → 1 per rank): per worker, in TP order, the exact
# "Current kv cache memory in use is N bytes" and the pre-min "GPU KV cache size: N tokens" lines;
# then "num_gpu_blocks is: 14834" (the minimum over workers).
FILE_14 = [
    ("TP0", 11465081548, "10.68", 238208, "7.27"),
    ("TP1", 11425235660, "10.64", 237392, "7.24"),
    ("TP2", 11423138508, "10.64", 237344, "7.24"),
    ("TP3", 11431527116, "10.65", 237520, "7.25"),
    ("TP4", 11467178700, "10.68", 238256, "7.27"),
    ("TP5", 11423138508, "10.64", 237344, "7.24"),
    ("TP6", 11425235660, "10.64", 237392, "7.24"),
    ("TP7", 11431527116, "10.65", 237520, "7.25"),
]


@pytest.mark.parametrize(("worker", "kv_bytes", "gib", "tokens", "concurrency"), FILE_14)
def test_file_14_exact_bytes_per_worker(worker: str, kv_bytes: int, gib: str, tokens: int, concurrency: str) -> None:
    rkv = rank("qwen3-235b-a22b-fp8", 8)
    assert rkv.kv_heads_per_rank == 1 and rkv.page_bytes == 94 * 16 * 1 * 128 * 2 * 2
    blocks = rkv.blocks_for(kv_bytes)
    assert rkv.tokens_for_blocks(blocks) == tokens
    assert f"{rkv.max_concurrency(blocks, 32768, 8192):.2f}" == concurrency
    low, high = blocks_range(rkv, gib)  # the "Available KV cache memory" line agrees
    assert low <= blocks <= high


def test_file_14_engine_takes_the_minimum() -> None:
    rkv = rank("qwen3-235b-a22b-fp8", 8)
    assert min(rkv.blocks_for(kv) for _, kv, *_ in FILE_14) == 14834
