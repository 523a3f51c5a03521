"""The event-driven engine gives exactly what a plain step-by-step loop gives.

``NaiveEngine`` is that loop: a reference for the event-driven engine.

Every request is touched every step; every block has an id; the free queue is a list; a
block's prefix key lives on the block.  Slow and obviously faithful to the rules written
atop ``app/core/sim/engine.py``; the tests check the engine gives the same numbers.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.sim.cost import CostModel
from app.core.sim.engine import Engine
from app.core.sim.metrics import Window
from app.core.sim.state import SchedulerConfig
from app.core.sim.workload import Lognormal, RequestSpec, Workload, make_requests

Key = tuple[int, int]


@dataclass(eq=False)
class NSeq:
    spec: RequestSpec
    arrival_s: float
    tokens: int
    computed: int = 0
    generated: int = 0
    table: list[int] = field(default_factory=list)
    n_keys: int = 0  # leading table entries that are cached prefix blocks it holds
    dup: bool = False
    first_s: float = -1.0
    admit_no: int = 0
    decoding: bool = False


class NaivePool:
    def __init__(self, total: int) -> None:
        self.free: list[int] = list(range(total))
        self.ref = [0] * total
        self.key_of: list[Key | None] = [None] * total
        self.block_of: dict[Key, int] = {}
        self.evictions = 0
        self.total = total

    def allocate(self, n: int) -> list[int]:
        assert n <= len(self.free)
        out = []
        for _ in range(n):
            b = self.free.pop(0)
            assert self.ref[b] == 0
            key = self.key_of[b]
            if key is not None:
                del self.block_of[key]
                self.key_of[b] = None
                self.evictions += 1
            self.ref[b] = 1
            out.append(b)
        return out

    def free_blocks(self, blocks: list[int]) -> None:
        for b in blocks:
            self.ref[b] -= 1
            assert self.ref[b] >= 0
            if self.ref[b] == 0:
                self.free.append(b)

    def touch(self, blocks: list[int]) -> None:
        for b in blocks:
            if self.ref[b] == 0:
                self.free.remove(b)
            self.ref[b] += 1


class NaiveEngine:
    def __init__(self, *, blocks: int, block_size: int, sched: SchedulerConfig, cost: CostModel,
                 requests: list[RequestSpec], concurrency: int, prefix_tokens: int) -> None:
        self.pool = NaivePool(blocks - 1)
        self.bs, self.sched, self.cost = block_size, sched, cost
        self.requests, self.n = requests, concurrency
        self.pf = prefix_tokens // block_size if sched.enable_prefix_caching else 0
        self.running: list[NSeq] = []
        self.waiting: list[NSeq] = []
        self.now = 0.0
        self.issued = self.completed = self.admissions = 0
        total = len(requests)
        steady = total > concurrency
        self.w0, self.w1 = ((total - concurrency) // 10, total - concurrency) if steady else (0, total)
        self.steady = steady
        self.win = Window(usable_blocks=blocks - 1)

    def run(self) -> dict[str, object]:
        for _ in range(min(self.n, len(self.requests))):
            self.arrive()
        if self.w0 == 0:
            self.win.open = True
        while self.completed < len(self.requests):
            self.step()
        return self.win.summary(self.n, self.steady)

    def arrive(self) -> None:
        if self.issued < len(self.requests):
            spec = self.requests[self.issued]
            self.waiting.append(NSeq(spec, self.now, spec.prompt_tokens))
            self.issued += 1

    def release(self, s: NSeq) -> None:
        self.pool.free_blocks(s.table[::-1])
        s.table, s.n_keys = [], 0

    def step(self) -> None:
        bs, pool, win = self.bs, self.pool, self.win
        ev0 = pool.evictions
        budget = self.sched.max_num_batched_tokens
        sched: list[tuple[NSeq, int]] = []
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            s = self.running[i]
            new = min(s.tokens - s.computed, budget)
            need = -(-(s.computed + new) // bs) - len(s.table)
            self_preempted = False
            while need > len(pool.free):
                victim = self.running.pop()
                if win.open:
                    win.preemptions += 1
                    win.recomputed_tokens += victim.computed
                self.release(victim)
                victim.computed, victim.decoding = 0, False
                victim.tokens = victim.spec.prompt_tokens + victim.generated
                self.waiting.insert(0, victim)
                preempted = True
                if victim is s:
                    self_preempted = True
                    break
            if self_preempted:
                break
            s.table += pool.allocate(need)
            sched.append((s, new))
            budget -= new
            i += 1
        if not preempted:
            self.admit(budget, sched)
        if win.open:
            win.evictions += pool.evictions - ev0
        self.execute(sched)

    def admit(self, budget: int, sched: list[tuple[NSeq, int]]) -> None:
        bs, pool = self.bs, self.pool
        while self.waiting and budget > 0 and len(self.running) < self.sched.max_num_seqs:
            s = self.waiting[0]
            hit: list[int] = []
            if s.spec.group >= 0:
                limit = min(self.pf, (s.tokens - 1) // bs)
                while len(hit) < limit and (s.spec.group, len(hit)) in pool.block_of:
                    hit.append(pool.block_of[(s.spec.group, len(hit))])
            evictable = sum(1 for b in hit if pool.ref[b] == 0)
            new = min(s.tokens - len(hit) * bs, budget)
            need = -(-new // bs)
            if need + evictable > len(pool.free):
                return
            pool.touch(hit)
            s.table = hit + pool.allocate(need)
            s.n_keys, s.computed, s.dup = len(hit), len(hit) * bs, False
            if self.win.open:
                self.win.hit_tokens += len(hit) * bs
                self.win.queried_tokens += s.tokens
            self.waiting.pop(0)
            self.admissions += 1
            s.admit_no = self.admissions
            self.running.append(s)
            sched.append((s, new))
            budget -= new

    def execute(self, sched: list[tuple[NSeq, int]]) -> None:
        prefill = sum(c for s, c in sched if not s.decoding)
        decodes = sum(1 for s, _ in sched if s.decoding)
        dt = self.cost.step_s(prefill, decodes, sum(s.computed + c for s, c in sched))
        self.now += dt
        out = 0
        finished = []
        for s, c in sched:
            s.computed += c
            self.register(s)
            if s.computed == s.tokens:
                out += 1
                s.generated += 1
                s.tokens += 1
                s.decoding = True
                if s.first_s < 0:
                    s.first_s = self.now
                if s.generated >= s.spec.output_tokens:
                    finished.append(s)
        used = self.pool.total - len(self.pool.free)
        if self.win.open:
            self.win.add_steps(1, dt, out, prefill, used, used, len(self.running),
                               len(self.running) + len(self.waiting))
        for s in sorted(finished, key=lambda r: r.admit_no):
            self.release(s)
            self.running.remove(s)
            self.completed += 1
            if self.win.open:
                self.win.add_request(s.arrival_s, s.first_s, self.now, s.spec.output_tokens)
                if self.completed == self.w1:
                    self.win.open = False
                    self.win.end_s = self.now
            if self.completed == self.w0 and self.completed < self.w1 and not self.win.open:
                self.win.open = True
                self.win.start_s = self.now
            self.arrive()

    def register(self, s: NSeq) -> None:
        if s.spec.group < 0 or s.dup:
            return
        limit = min(self.pf, s.computed // self.bs)
        while s.n_keys < limit:
            key = (s.spec.group, s.n_keys)
            if key in self.pool.block_of:
                s.dup = True
                return
            block = s.table[s.n_keys]
            self.pool.block_of[key] = block
            self.pool.key_of[block] = key
            s.n_keys += 1


def _both(seed: int, blocks: int, block_size: int, concurrency: int, requests: int, prefix: int,
          fraction: float, groups: int, max_seqs: int, max_tokens: int, caching: bool = True,
          ) -> tuple[dict[str, object], dict[str, object]]:
    workload = Workload(Lognormal(5.0, 0.9, 8, 600), Lognormal(3.5, 0.8, 1, 200), prefix, fraction, groups)
    need = -(-workload.longest_request_tokens() // block_size) + 1
    kwargs = {
        "blocks": max(blocks, need), "block_size": block_size,
        "sched": SchedulerConfig(max_seqs, max_tokens, caching), "cost": CostModel(),
        "requests": make_requests(workload, requests, random.Random(seed)),
        "concurrency": concurrency, "prefix_tokens": prefix,
    }
    return Engine(**kwargs).run(), NaiveEngine(**kwargs).run()  # type: ignore[arg-type]


def _assert_same(fast: dict[str, object], naive: dict[str, object]) -> None:
    assert fast.keys() == naive.keys()
    for key, value in fast.items():
        other = naive[key]
        if isinstance(value, float):
            assert isinstance(other, float)
            # Only step times are summed differently (closed form versus one by one).
            assert math.isclose(value, other, rel_tol=1e-9, abs_tol=1e-12), key
        else:
            assert value == other, key


CASES = [
    # seed, blocks, bs, N, R, prefix, fraction, groups, max_seqs, max_tokens
    (1, 60, 16, 8, 60, 64, 0.9, 1, 256, 2048),  # pool pressure, preemption, one prefix
    (2, 90, 4, 13, 60, 200, 0.9, 4, 256, 100),  # several prefixes, evictions, chunked prefill
    (3, 40, 1, 5, 40, 16, 0.5, 2, 4, 32),  # block size 1, max_num_seqs binds, tiny budget
    (4, 400, 16, 3, 60, 0, 0.0, 1, 256, 2048),  # no pressure, no sharing
    (5, 150, 2, 13, 20, 200, 0.9, 1, 2, 2048),  # R close to N, two sequences at most
    (6, 60, 16, 5, 5, 64, 0.9, 1, 256, 2048),  # R == N: no steady window
]


@pytest.mark.parametrize("case", CASES)
def test_engine_matches_naive_loop(case: tuple[int, int, int, int, int, int, float, int, int, int]) -> None:
    fast, naive = _both(*case)
    _assert_same(fast, naive)


def test_cases_exercise_preemption_and_eviction() -> None:
    fast1, _ = _both(*CASES[0])
    fast2, _ = _both(*CASES[1])
    assert fast1["preemptions"] and fast2["preemptions"] and fast2["evictions"]
    assert fast1["prefix_hit_rate"] and fast2["prefix_hit_rate"]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    blocks=st.sampled_from([40, 60, 90, 150, 400]),
    block_size=st.sampled_from([1, 2, 4, 16]),
    concurrency=st.integers(1, 13),
    requests=st.sampled_from([5, 20, 40]),
    prefix=st.sampled_from([0, 16, 64, 200]),
    fraction=st.sampled_from([0.0, 0.5, 0.9]),
    groups=st.integers(1, 4),
    max_seqs=st.sampled_from([2, 4, 256]),
    max_tokens=st.sampled_from([32, 100, 2048]),
    caching=st.booleans(),
)
def test_engine_matches_naive_loop_random(seed: int, blocks: int, block_size: int, concurrency: int,
                                          requests: int, prefix: int, fraction: float, groups: int,
                                          max_seqs: int, max_tokens: int, caching: bool) -> None:
    fast, naive = _both(seed, blocks, block_size, concurrency, requests, prefix, fraction, groups,
                        max_seqs, max_tokens, caching)
    _assert_same(fast, naive)


@pytest.mark.parametrize(("concurrency", "groups", "blocks"), [(16, 1, 1783), (48, 8, 1783), (24, 4, 900)])
def test_engine_matches_naive_loop_on_seed_002_mix(concurrency: int, groups: int, blocks: int) -> None:
    """Seed 002's lengths (the defaults) at full size, 250 requests, a saturated pool."""
    workload = Workload(shared_prefix_tokens=512, shared_fraction=0.7, prefix_groups=groups)
    kwargs = {
        "blocks": blocks, "block_size": 16, "sched": SchedulerConfig(), "cost": CostModel(),
        "requests": make_requests(workload, 250, random.Random(concurrency)),
        "concurrency": concurrency, "prefix_tokens": 512,
    }
    fast = Engine(**kwargs).run()  # type: ignore[arg-type]
    _assert_same(fast, NaiveEngine(**kwargs).run())  # type: ignore[arg-type]
    assert fast["preemptions"]
