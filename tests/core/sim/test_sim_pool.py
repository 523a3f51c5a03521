"""The block pool against a reference model that names every block."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from app.core.sim.pool import BlockKey, BlockPool, PoolError

TOTAL = 12
OWNERS = 4
GROUPS = 2
PREFIX = 3


class ModelPool:
    """Block ids, an LRU list of free ids, a key per block; plain and slow."""

    def __init__(self, total: int) -> None:
        self.free = list(range(total))
        self.ref = [0] * total
        self.key: list[BlockKey | None] = [None] * total
        self.evictions = 0

    def block_of(self, key: BlockKey) -> int | None:
        return next((b for b, k in enumerate(self.key) if k == key), None)

    def allocate(self, n: int) -> list[int]:
        out = []
        for _ in range(n):
            b = self.free.pop(0)
            assert self.ref[b] == 0, "a referenced block was in the free list"
            if self.key[b] is not None:
                self.key[b] = None
                self.evictions += 1
            self.ref[b] = 1
            out.append(b)
        return out

    def drop(self, blocks: list[int]) -> None:
        for b in blocks:
            self.ref[b] -= 1
            assert self.ref[b] >= 0
            if self.ref[b] == 0:
                self.free.append(b)


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pool = BlockPool(TOTAL)
        self.model = ModelPool(TOTAL)
        # Per owner: anonymous block ids and named block ids, like a request's block table.
        self.anon: list[list[int]] = [[] for _ in range(OWNERS)]
        self.named: list[list[int]] = [[] for _ in range(OWNERS)]
        self.group = [o % GROUPS for o in range(OWNERS)]

    def _held(self) -> set[int]:
        return {b for blocks in self.anon + self.named for b in blocks}

    @rule(owner=st.integers(0, OWNERS - 1), n=st.integers(1, 4))
    def allocate(self, owner: int, n: int) -> None:
        if n > self.pool.num_free:
            with pytest.raises(PoolError):
                self.pool.allocate(n)
            return
        held = self._held()
        got = self.model.allocate(n)
        assert not held & set(got), "a block was handed out twice"
        self.anon[owner] += got
        self.pool.allocate(n)

    @rule(owner=st.integers(0, OWNERS - 1), limit=st.integers(0, PREFIX))
    def hit(self, owner: int, limit: int) -> None:
        """A new request (owner holds nothing) reuses the cached chain of its group."""
        if self.anon[owner] or self.named[owner]:
            return
        g = self.group[owner]
        h, evictable = self.pool.lookup(g, limit)
        chain = []
        for i in range(limit):
            b = self.model.block_of((g, i))
            if b is None:
                break
            chain.append(b)
        assert h == len(chain)
        assert evictable == sum(1 for b in chain if self.model.ref[b] == 0)
        self.pool.touch(g, h)
        for b in chain:
            if self.model.ref[b] == 0:
                self.model.free.remove(b)
            self.model.ref[b] += 1
        self.named[owner] = chain

    @precondition(lambda self: any(self.anon))
    @rule(owner=st.integers(0, OWNERS - 1))
    def register(self, owner: int) -> None:
        """The owner computed its next prefix block: cache it unless it is cached."""
        idx = len(self.named[owner])
        key = (self.group[owner], idx)
        if not self.anon[owner] or idx >= PREFIX or self.pool.is_cached(key):
            return
        b = self.anon[owner].pop(0)
        self.model.key[b] = key
        self.named[owner].append(b)
        self.pool.register(*key)

    @rule(owner=st.integers(0, OWNERS - 1))
    def release(self, owner: int) -> None:
        anon, named = self.anon[owner], self.named[owner]
        self.model.drop(anon[::-1] + named[::-1])
        self.pool.release(len(anon), self.group[owner], len(named))
        self.anon[owner], self.named[owner] = [], []

    @invariant()
    def agree(self) -> None:
        pool, model = self.pool, self.model
        pool.check()
        assert pool.num_free == len(model.free)
        assert pool.evictions == model.evictions
        cached = {k: model.ref[b] for b, k in enumerate(model.key) if k is not None}
        assert pool.cached_keys() == cached
        assert all(ref >= 0 for ref in cached.values())
        assert pool.free_order() == [model.key[b] for b in model.free]
        # Blocks are conserved: free + held by owners == total, and nobody holds a free block.
        held = [b for blocks in self.anon + self.named for b in blocks]
        assert len(model.free) + len(set(held)) == TOTAL
        assert not set(model.free) & set(held)
        assert pool.held_anon == sum(len(a) for a in self.anon)

    @invariant()
    def pinned_blocks_are_kept(self) -> None:
        for blocks in self.named:
            for b in blocks:
                key = self.model.key[b]
                assert key is not None and self.pool.is_cached(key)
                assert self.pool.ref_count(key) >= 1


PoolMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestPool = PoolMachine.TestCase


def test_pool_refuses_misuse() -> None:
    pool = BlockPool(4)
    with pytest.raises(PoolError):
        pool.allocate(5)
    with pytest.raises(PoolError):
        pool.register(0, 0)  # nothing held
    pool.allocate(2)
    pool.register(0, 0)
    with pytest.raises(PoolError):
        pool.register(0, 0)
    with pytest.raises(PoolError):
        pool.touch(0, 2)  # (0, 1) is not cached
    pool.release(1, 0, 1)
    with pytest.raises(PoolError):
        pool.release(0, 0, 1)  # already unreferenced
    pool.check()


def test_freed_prefix_is_evicted_last_in_lru_order() -> None:
    pool = BlockPool(4)
    pool.allocate(4)
    pool.register(0, 0)
    pool.register(0, 1)
    pool.release(2, 0, 2)  # tail first, as vLLM frees a request's blocks
    assert pool.free_order() == [None, None, (0, 1), (0, 0)]
    assert pool.allocate(3) == 1  # two anonymous blocks, then (0, 1) is evicted
    assert pool.lookup(0, 2) == (1, 1)
    assert pool.anon_at_head() == 0
