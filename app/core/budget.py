"""The uniform manual KV budget (seed 001).

From each rank's measured post-warmup KV room r_i and an operating reserve:
safe_i = r_i − reserve; the uniform `--kv-cache-memory-bytes` is min(safe_i) rounded DOWN to
whole pages; stranded_i = safe_i − uniform. Ranks are never summed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.core.kvspec import RankKV
from app.core.lazy_rows import LazyRows


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
    ranks: Sequence[RankBudget]
    flag: str


class RankBudgets(LazyRows[RankBudget]):
    """Every rank's room, safe and stranded bytes, each `RankBudget` made when asked for."""

    __slots__ = ("labels", "reserve", "rooms", "uniform")

    def __init__(self, labels: Sequence[str], rooms: Sequence[int], reserve: int, uniform: int) -> None:
        self.labels, self.rooms, self.reserve, self.uniform = labels, rooms, reserve, uniform

    def __len__(self) -> int:
        return len(self.rooms)

    def row(self, i: int) -> RankBudget:
        room = self.rooms[i]
        safe = room - self.reserve
        return RankBudget(self.labels[i], room, safe, safe - self.uniform if safe > self.uniform else 0)



def uniform_budget(rooms: tuple[tuple[str, int], ...], reserve_bytes: int, rkv: RankKV) -> UniformBudget | None:
    """The largest per-GPU KV size every rank can hold with its reserve, or None with no ranks."""
    budget = uniform_budget_columns([label for label, _ in rooms], [room for _, room in rooms], reserve_bytes, rkv)
    return None if budget is None else replace(budget, ranks=tuple(budget.ranks))


def uniform_budget_columns(
    labels: Sequence[str], rooms: Sequence[int], reserve_bytes: int, rkv: RankKV, ordered: Sequence[int] | None = None
) -> UniformBudget | None:
    """`uniform_budget` over columns (labels and KV rooms per rank); `ranks` made on demand.
    `ordered`: the rooms already sorted (a tick sorts its KV column once, `RankLedgers.kv_order`)."""
    if not rooms:
        return None
    ordered = sorted(rooms) if ordered is None else ordered
    low = ordered[0]
    binding_label = labels[rooms.index(low)]  # the first with the least safe bytes (safe = room − reserve)
    min_safe = low - reserve_bytes
    page = rkv.page_bytes
    uniform = max(0, min_safe) // page * page if page > 0 else max(0, min_safe)
    blocks = rkv.blocks_for(uniform)
    over = uniform + reserve_bytes  # safe > uniform ⇔ room > uniform + reserve
    median = _median_minus(ordered, reserve_bytes)
    above = bisect_right(ordered, over)  # the rooms above `over` are the sorted tail
    return UniformBudget(
        kv_cache_memory_bytes=uniform,
        blocks=blocks,
        tokens=rkv.tokens_for_blocks(blocks),
        stranded_bytes=sum(ordered[above:]) - over * (len(ordered) - above),  # Σ (room − over) over room > over
        min_bytes=min_safe,
        median_bytes=int(median),
        max_bytes=ordered[-1] - reserve_bytes,
        min_over_median=(min_safe / median) if median > 0 else None,
        binding_rank=binding_label,
        ranks=RankBudgets(labels, rooms, reserve_bytes, uniform),
        flag=f"--kv-cache-memory-bytes {uniform}",
    )


def _median_minus(ordered: Sequence[int], reserve: int) -> float | int:
    """``statistics.median([r − reserve for r in rooms])`` from the sorted rooms (the same value:
    subtracting a constant keeps the order, and the mean of the two middle values is taken the same way)."""
    n = len(ordered)
    if n % 2 == 1:
        return ordered[n // 2] - reserve
    return ((ordered[n // 2 - 1] - reserve) + (ordered[n // 2] - reserve)) / 2
