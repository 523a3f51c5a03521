"""The paged KV block pool: free queue, prefix-cached blocks, reference counts.

Theory of operation
-------------------
vLLM V1 (``vllm/v1/core/block_pool.py``) keeps every free block in one LRU queue: blocks
are taken from its head, freed blocks are appended to its tail, and a freed block keeps
its prefix hash until it reaches the head and is handed out again (that is an
*eviction*).  A cached block that a new request hits is *touched*: its reference count
goes up and, if it was zero, the block leaves the free queue (it is pinned while any
running sequence references it).

In this simulator only the blocks of the shared prefix can ever be hit, so only those are
named (by a :data:`BlockKey`, the position in a prefix hash chain).  Every other block is
interchangeable, so the pool counts them instead of naming them: the free queue holds
*runs* of anonymous blocks and single named blocks, in LRU order.  That keeps a request's
allocation O(1) however many blocks it takes, which the fast engine relies on.

Named blocks that are touched leave the queue lazily: each cached block carries a stamp,
and a queue entry is live only while its stamp matches and the block is unreferenced.
A request only ever holds a whole chain ``(group, 0..n-1)``, so the API passes chains as
``(group, n)`` rather than lists of keys.

Invariant (checked by :meth:`BlockPool.check`): ``num_free + held_anon + pinned == total``
where ``pinned`` counts named blocks with a reference count above zero.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from app.core.sim.tier import KVTier

BlockKey = tuple[int, int]
"""A prefix block's identity: (prefix group, block index in the prefix).

Block *i* of a group holds the same tokens in every request of that group and follows
the same blocks 0..i-1, so the pair stands for vLLM's chained block hash."""


@dataclass(slots=True, eq=False)
class _Cached:
    group: int
    index: int
    ref: int
    stamp: int


@dataclass(slots=True, eq=False)
class _Group:
    """One prefix group's cached blocks, and the cached chain from block 0 kept current so
    that a lookup is O(1): ``chain`` blocks are cached from index 0, ``idle`` of them are
    unreferenced."""

    slots: list[_Cached | None]
    chain: int = 0
    idle: int = 0

    def recount(self) -> None:
        self.idle = sum(1 for c in self.slots[: self.chain] if c is not None and c.ref == 0)

    def extend(self) -> None:
        slots = self.slots
        while self.chain < len(slots):
            c = slots[self.chain]
            if c is None:
                return
            if c.ref == 0:
                self.idle += 1
            self.chain += 1


class PoolError(RuntimeError):
    """An allocator misuse: a bug in the caller, never a user error."""


class BlockPool:
    """A pool of ``total`` KV blocks with prefix caching.

    Callers own the anonymous blocks they were given (as a count) and a chain of named
    blocks ``(group, 0..n-1)`` they hit or registered; they hand both back with
    :meth:`release`.
    """

    __slots__ = ("_groups", "_queue", "_stamp", "evictions", "held_anon", "num_free", "tier", "total")

    def __init__(self, total: int) -> None:
        if total < 0:
            raise PoolError("negative pool size")
        self.total = total
        self.num_free = total
        self.held_anon = 0
        self.evictions = 0
        # Per prefix group, the cached block at each index (None where not cached).
        self._groups: dict[int, _Group] = {}
        # Entries: a one-item list is a run of that many anonymous free blocks (shrunk in
        # place when the head run is split); a (block, stamp) pair is one named free block.
        self._queue: deque[list[int] | tuple[_Cached, int]] = deque()
        if total:
            self._queue.append([total])
        self._stamp = 0
        self.tier: KVTier | None = None  # where evicted prefix blocks spill (app.core.sim.tier)

    # -- queries ------------------------------------------------------------------------
    def _get(self, key: BlockKey) -> _Cached | None:
        group = self._groups.get(key[0])
        return group.slots[key[1]] if group is not None and key[1] < len(group.slots) else None

    def is_cached(self, key: BlockKey) -> bool:
        return self._get(key) is not None

    def ref_count(self, key: BlockKey) -> int:
        """Reference count of a cached block (KeyError if it is not cached)."""
        c = self._get(key)
        if c is None:
            raise KeyError(key)
        return c.ref

    def cached_keys(self) -> dict[BlockKey, int]:
        """Every cached block and its reference count."""
        return {(c.group, c.index): c.ref for g in self._groups.values() for c in g.slots if c is not None}

    def pinned(self) -> int:
        return sum(1 for ref in self.cached_keys().values() if ref > 0)

    def lookup(self, group: int, max_blocks: int) -> tuple[int, int]:
        """Longest cached chain ``(group, 0..h-1)`` with ``h <= max_blocks``.

        Returns ``(h, evictable)``: the hit length and how many of those blocks are
        unreferenced (taking them removes them from the free count)."""
        g = self._groups.get(group)
        if g is None:
            return 0, 0
        if max_blocks >= g.chain:
            return g.chain, g.idle
        return max_blocks, sum(1 for c in g.slots[:max_blocks] if c is not None and c.ref == 0)

    def anon_at_head(self) -> int:
        """Anonymous free blocks before the first live named block in the queue.

        Allocating at most this many blocks evicts nothing."""
        count = 0
        for entry in self._queue:
            if isinstance(entry, list):
                count += entry[0]
            elif self._live(entry):
                return count
        return count

    # -- mutations ----------------------------------------------------------------------
    def allocate(self, n: int) -> int:
        """Take ``n`` blocks from the head of the free queue; return how many were evictions.

        The blocks become anonymous blocks held by the caller."""
        if n > self.num_free:
            raise PoolError(f"allocate({n}) with {self.num_free} free")
        evicted = 0
        need = n
        queue = self._queue
        while need:
            entry = queue[0]
            if isinstance(entry, list):
                if entry[0] > need:
                    entry[0] -= need
                    need = 0
                else:
                    need -= entry[0]
                    queue.popleft()
            else:
                queue.popleft()
                if self._live(entry):
                    c = entry[0]
                    g = self._groups[c.group]
                    g.slots[c.index] = None
                    if self.tier is not None:
                        self.tier.put((c.group, c.index))
                    if c.index < g.chain:
                        g.chain = c.index
                        g.recount()
                    evicted += 1
                    need -= 1
        self.num_free -= n
        self.held_anon += n
        self.evictions += evicted
        return evicted

    def touch(self, group: int, n: int) -> None:
        """Add a reference to blocks ``(group, 0..n-1)`` (a prefix hit); pin unreferenced ones."""
        if n <= 0:
            return
        g = self._groups.get(group)
        if g is None or n > g.chain:
            raise PoolError(f"touch of an uncached block in {(group, n)}")
        for c in g.slots[:n]:
            assert c is not None
            if c.ref == 0:
                g.idle -= 1
                self.num_free -= 1
                self._stamp += 1
                c.stamp = self._stamp  # its queue entry goes stale
            c.ref += 1

    def register(self, group: int, index: int) -> None:
        """Turn one held anonymous block into the cached block ``(group, index)``, reference 1."""
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group([])
        slots = g.slots
        if index < len(slots) and slots[index] is not None:
            raise PoolError(f"block {(group, index)} is already cached")
        if self.held_anon <= 0:
            raise PoolError("register without a held block")
        if index >= len(slots):
            slots.extend([None] * (index + 1 - len(slots)))
        self.held_anon -= 1
        self._stamp += 1
        slots[index] = _Cached(group, index, 1, self._stamp)
        if index == g.chain:
            g.extend()

    def release(self, anon: int, group: int = -1, n: int = 0) -> None:
        """Give back ``anon`` anonymous blocks, then drop one reference on blocks
        ``(group, n-1)`` down to ``(group, 0)``.

        Blocks enter the tail of the free queue in that order (vLLM frees a request's
        blocks tail first, so its first prefix block is evicted last)."""
        if anon > self.held_anon or anon < 0:
            raise PoolError(f"release({anon}) with {self.held_anon} held")
        if anon:
            self.held_anon -= anon
            self.num_free += anon
            tail = self._queue[-1] if self._queue else None
            if isinstance(tail, list):
                tail[0] += anon
            else:
                self._queue.append([anon])
        if n <= 0:
            return
        g = self._groups.get(group)
        if g is None or n > g.chain:
            raise PoolError(f"release of uncached blocks {(group, n)}")
        for i in range(n - 1, -1, -1):
            c = g.slots[i]
            if c is None or c.ref <= 0:
                raise PoolError(f"release of unreferenced block {(group, i)}")
            c.ref -= 1
            if c.ref == 0:
                g.idle += 1
                self.num_free += 1
                self._stamp += 1
                c.stamp = self._stamp
                self._queue.append((c, c.stamp))

    # -- internals ----------------------------------------------------------------------
    def _live(self, entry: tuple[_Cached, int]) -> bool:
        c = entry[0]
        return c.ref == 0 and c.stamp == entry[1] and self._groups[c.group].slots[c.index] is c

    def free_order(self) -> list[BlockKey | None]:
        """The free queue head to tail, one item per block (None = anonymous). For tests."""
        out: list[BlockKey | None] = []
        for entry in self._queue:
            if isinstance(entry, list):
                out.extend([None] * entry[0])
            elif self._live(entry):
                out.append((entry[0].group, entry[0].index))
        return out

    def check(self) -> None:
        """Raise PoolError unless blocks are conserved and no reference count is negative."""
        cached = self.cached_keys()
        pinned = sum(1 for ref in cached.values() if ref > 0)
        queued = sum(e[0] if isinstance(e, list) else int(self._live(e)) for e in self._queue)
        if queued != self.num_free or self.num_free + self.held_anon + pinned != self.total:
            raise PoolError(
                f"pool inconsistent: free={self.num_free} queued={queued} "
                f"held={self.held_anon} pinned={pinned} total={self.total}"
            )
        if any(ref < 0 for ref in cached.values()):
            raise PoolError("negative reference count")
        for key, g in self._groups.items():
            chain, idle = g.chain, g.idle
            g.chain, g.idle = 0, 0
            g.extend()
            if (g.chain, g.idle) != (chain, idle):
                raise PoolError(f"group {key}: chain {chain}/{idle} idle, actual {g.chain}/{g.idle}")
