"""The uniform manual KV budget (seed 001).

From each rank's measured post-warmup KV room r_i and an operating reserve:
safe_i = r_i − reserve; the uniform `--kv-cache-memory-bytes` is min(safe_i) rounded DOWN to
whole pages; stranded_i = safe_i − uniform. Ranks are never summed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from app.core.kvspec import RankKV


@dataclass(frozen=True, slots=True)
class RankBudget:
    label: str
    room_bytes: int
    safe_bytes: int
    stranded_bytes: int


@dataclass(frozen=True, slots=True)
class UniformBudget:
    kv_cache_memory_bytes: int
    blocks: int
    tokens: int
    stranded_bytes: int
    min_bytes: int
    median_bytes: int
    max_bytes: int
    min_over_median: float | None
    binding_rank: str
    ranks: tuple[RankBudget, ...]
    flag: str


def uniform_budget(rooms: tuple[tuple[str, int], ...], reserve_bytes: int, rkv: RankKV) -> UniformBudget | None:
    """The largest per-GPU KV size every rank can hold with its reserve, or None with no ranks."""
    if not rooms:
        return None
    safes = [(label, room, room - reserve_bytes) for label, room in rooms]
    binding_label, _, min_safe = min(safes, key=lambda s: s[2])
    page = rkv.page_bytes
    uniform = max(0, min_safe) // page * page if page > 0 else max(0, min_safe)
    blocks = rkv.blocks_for(uniform)
    ranks = tuple(
        [RankBudget(label, room, safe, safe - uniform if safe > uniform else 0) for label, room, safe in safes]
    )
    values = [s for _, _, s in safes]
    median = statistics.median(values)
    return UniformBudget(
        kv_cache_memory_bytes=uniform,
        blocks=blocks,
        tokens=rkv.tokens_for_blocks(blocks),
        stranded_bytes=sum(r.stranded_bytes for r in ranks),
        min_bytes=min(values),
        median_bytes=int(median),
        max_bytes=max(values),
        min_over_median=(min(values) / median) if median > 0 else None,
        binding_rank=binding_label,
        ranks=ranks,
        flag=f"--kv-cache-memory-bytes {uniform}",
    )
