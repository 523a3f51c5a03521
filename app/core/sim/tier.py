"""An offload tier behind the block pool (issue 15 item 4): prefix blocks the pool evicts spill here
instead of being dropped, and a later request with that prefix loads them back (a hit that costs a
transfer, not a recompute).

vLLM's native offloading (``OffloadingConnector``, vllm/v1/kv_offload/) stores blocks to CPU as they
are computed and keeps an LRU of them (``cpu/policies/lru.py``); here a block enters the tier when the
GPU pool evicts it, the moment the difference matters (while it is still on the GPU, the GPU copy is
hit). Capacity is counted in GPU blocks; the oldest entry is dropped when the tier is full. A load is
timed as ``blocks × block_load_s`` added to the step that admits the request (each worker moves its
shard over its own link, so one worker's time is the step's): ``block_load_s = block_size × bytes per
token per rank / link bandwidth`` (app.core.kv_tiers.HOST_LINK_BYTES_PER_S states the assumed figures).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

BlockKey = tuple[int, int]


@dataclass(frozen=True, slots=True)
class TierConfig:
    blocks: int  # capacity in GPU blocks
    block_load_s: float = 0.0  # seconds to bring one block back to the GPU


class KVTier:
    """An LRU set of prefix blocks (group, index) with a capacity in blocks."""

    __slots__ = ("_lru", "capacity", "dropped", "spills")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lru: OrderedDict[BlockKey, None] = OrderedDict()
        self.spills = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, key: BlockKey) -> bool:
        return key in self._lru

    def put(self, key: BlockKey) -> None:
        """Store an evicted block (the most recent entry); drop the oldest beyond capacity."""
        if self.capacity <= 0:
            return
        if key in self._lru:
            self._lru.move_to_end(key)
            return
        self._lru[key] = None
        self.spills += 1
        if len(self._lru) > self.capacity:
            self._lru.popitem(last=False)
            self.dropped += 1

    def chain(self, group: int, start: int, limit: int) -> int:
        """How many blocks ``(group, start), (group, start + 1), …`` below ``limit`` the tier holds."""
        n = 0
        while start + n < limit and (group, start + n) in self._lru:
            n += 1
        return n

    def touch(self, group: int, start: int, n: int) -> None:
        """Mark blocks ``(group, start … start + n − 1)`` as just used (they are being loaded)."""
        for i in range(start, start + n):
            self._lru.move_to_end((group, i))
