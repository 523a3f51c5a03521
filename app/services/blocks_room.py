"""A rank's KV room from the block count a log states, for a run that prints no KV memory.

vLLM V0 logs "# GPU blocks: N" and V1 "GPU KV cache size: N tokens" (N = blocks × block_size for
one full-attention group): a run may state that and nothing else about memory (no "Available KV
cache memory", no profiling rows; public 03, 35, 46, 53). vLLM sized those blocks as

    num_blocks = available // page_size // num_layers      (V1 get_num_blocks,
                                                            vllm/v1/core/kv_cache_utils.py @28be48fa9)
    num_gpu_blocks = available // (block_size × Σ_layers per-token bytes)   (V0 determine_num_available_blocks)

so ``blocks × page_bytes_per_layer × layers`` is the KV memory the rank's pool holds: the
available memory vLLM had, to within one block (less than one page short), and exactly the pool
every worker allocates (each takes the engine's minimum count). It is a measured room derived by
an identity from a measured count, not an estimate. Only one full-attention KV-cache group without
context parallelism maps blocks to bytes one to one; a hybrid model, DCP or a pipeline of several
stages (each holds other layers) is left unmeasured, and the reason is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.errors import InputError
from app.core.kvrank import RankKV
from app.core.ledger import ROOM_FROM_BLOCKS
from app.services.rank_kv_memo import RankKVMemo

JSON = dict[str, Any]
PREFIX = ROOM_FROM_BLOCKS  # how the note of every KV room taken from a logged block count starts
IDENTITY = "kv_room = blocks × page_bytes × layers, within one block of what vLLM had"


@dataclass(frozen=True)
class BlocksRoom:
    """The KV room one rank's logged blocks stand for, and how it was worked out."""

    blocks: int
    block_size: int
    tokens: int  # blocks × block_size: the physical token positions of the pool
    page_bytes_per_layer: int
    layers: int
    kv_room_bytes: int  # blocks × page_bytes_per_layer × layers
    logged: str  # what the log printed: "4,700 blocks" or "158,656 tokens"
    tp: int  # the TP degree the page is sharded at (the bytes scale with it, the tokens do not)

    def note(self) -> str:
        return (f"{PREFIX}: {self.logged} logged → {IDENTITY} = {self.blocks:,} × {self.page_bytes_per_layer:,} B "
                f"× {self.layers} = {self.kv_room_bytes:,} B per rank at TP{self.tp}")

    def as_json(self) -> JSON:
        return {"blocks": self.blocks, "block_size": self.block_size, "tokens": self.tokens,
                "page_bytes_per_layer": self.page_bytes_per_layer, "layers": self.layers,
                "kv_room_bytes": self.kv_room_bytes, "tp": self.tp, "basis": self.note()}  # fmt: skip


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def logged_blocks(run: Mapping[str, Any], block_size: int) -> tuple[int, str] | None:
    """The engine's block count: `num_gpu_blocks`, else "GPU KV cache size" tokens ÷ block_size
    when they divide (one full-attention group; a figure that does not divide is not a count)."""
    engine: Mapping[str, Any] = run.get("engine") or {}
    blocks = _as_int(engine.get("num_gpu_blocks"))
    if blocks is not None:
        return blocks, f"{blocks:,} blocks"
    tokens = _as_int(engine.get("kv_tokens"))
    if tokens is None or tokens % block_size or not _concurrency_agrees(engine, tokens // block_size, block_size):
        return None
    return tokens // block_size, f"{tokens:,} tokens (÷ block_size {block_size})"


def _concurrency_agrees(engine: Mapping[str, Any], blocks: int, block_size: int) -> bool:
    """Whether `blocks` is the one count the logged figures allow: since 2026-04-28 (PR #41069) the token
    figure is int(max_concurrency × mml), which for an mml that is not whole blocks can divide by the
    block size for another count (16,000 tokens at mml 1,000: 1,000 blocks × 16 before, 1,008 blocks
    after); and the logged "Maximum concurrency" must fit under one of vLLM's formulas, tokens / mml
    (V1 ≤ 0.9.0) or blocks / cdiv(mml, block_size) (a8da78eac on). Without an mml: taken as is."""
    mml, conc = _as_int(engine.get("max_concurrency_tokens")), engine.get("max_concurrency")
    if mml is None:
        return True
    per_request = -(-mml // block_size)
    if mml % block_size:  # the newer figure of another count may divide too: then which one is unknown
        near = blocks * block_size * per_request // mml
        other = {b for b in range(max(1, near - 2), near + 3) if int(b / per_request * mml) == blocks * block_size}
        if other - {blocks}:
            return False
    if not isinstance(conc, (int, float)):
        return True
    return any(abs(value - conc) <= 0.0051 for value in (blocks * block_size / mml, blocks / per_request))


def room_from_blocks(rkv: RankKV, blocks: int, logged: str) -> BlocksRoom:
    """The room of one rank of geometry `rkv` holding `blocks`, or an InputError saying why blocks
    do not map to bytes for it."""
    if rkv.n_groups != 1 or rkv.dcp != 1 or rkv.page_bytes_per_layer <= 0:
        raise InputError("from_log", "the model has several KV-cache groups (hybrid layers) or context "
                         "parallelism, where a block count does not map to bytes one to one")
    if rkv.page_bytes_per_layer * rkv.group_size != rkv.page_bytes:
        raise InputError("from_log", "the model's layers have pages of different sizes, so a block count "
                         "does not map to bytes one to one")
    room = blocks * rkv.page_bytes
    return BlocksRoom(blocks, rkv.block_size, blocks * rkv.block_size, rkv.page_bytes_per_layer, rkv.group_size,
                      room, logged, rkv.tp)  # fmt: skip


def run_room(run: Mapping[str, Any], config: Mapping[str, object], tp: int, pp: int, kv_cache_dtype: str,
             block_size: int, full_kv: bool = False, memo: RankKVMemo | None = None) -> BlocksRoom:
    """The KV room of every rank of a one-stage run from its logged blocks (InputError: why none)."""
    found = logged_blocks(run, block_size)
    if found is None:
        raise InputError("from_log", "the log states no block count (# GPU blocks, or GPU KV cache size tokens "
                         f"that divide by the block size {block_size})")
    if pp > 1:
        raise InputError("from_log", f"with {pp} pipeline stages each rank holds other layers, so one logged "
                         "block count gives no single per-rank memory")
    rkv = (memo or RankKVMemo()).rank_kv(config, tp=tp, pp=1, kv_cache_dtype=kv_cache_dtype, block_size=block_size,
                                         full_kv=full_kv)
    return room_from_blocks(rkv, *found)


def ranks_from_blocks(run: Mapping[str, Any], room: BlocksRoom, workers: int) -> list[JSON]:
    """Plan-document ranks with the derived room: one per rank the run prints (with the total, free
    memory and weights it states), else one per worker of the layout."""
    entries: list[JSON] = []
    seen: set[str] = set()
    for rec in run.get("ranks") or []:
        if not isinstance(rec, Mapping):
            continue
        label = str(rec.get("rank") or f"pid={rec.get('pid')}")[:64]
        if label in seen:
            continue
        seen.add(label)
        entry: JSON = {"label": label}
        for key, src in (("total", "total_bytes"), ("free_at_start", "free_at_start_bytes"),
                         ("weights", "weights_bytes")):  # fmt: skip
            value = _as_int(rec.get(src))
            if value is not None:
                entry[key] = value
        entries.append({**entry, "kv_room": room.kv_room_bytes, "kv_room_blocks": room.blocks})
    if not entries:
        entries = [{"label": str(i), "kv_room": room.kv_room_bytes, "kv_room_blocks": room.blocks}
                   for i in range(workers)]  # fmt: skip
    return entries


def unchecked_note(with_totals: bool) -> str:
    """What a plan cannot check when its rooms come from blocks, and why (``with_totals``: every such
    rank has its total memory, from the log or the user)."""
    if with_totals:
        return (f"KV room from the logged block count ({PREFIX}); the rows vLLM subtracted (non-torch, activation, "
                "CUDA graphs) are not in the log, so they are not shown")
    return (f"KV room from the logged block count ({PREFIX}): the total memory is not known (the log states "
            "none), so requested (total × gpu_memory_utilization), headroom, the free-memory pre-flight (vLLM "
            "refuses to start when free memory is below requested) and whether the room fits the budget cannot be "
            "checked, and gpu_memory_utilization cannot move the room; give the rank's total memory (ranks[].total) "
            "to check them")
