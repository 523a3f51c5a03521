"""A continuous-batching scheduler in the manner of vLLM V1, advanced by events.

Theory of operation
-------------------
Each engine step follows ``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``):

1. *Running* requests, in admission order, each take ``min(remaining tokens, budget)`` of
   the ``max_num_batched_tokens`` budget (a decode needs one token; a prompt is prefilled in
   chunks).  Their KV slots are allocated block by block as they grow.  When the pool cannot
   supply the blocks, the most recently admitted running request is preempted (blocks
   freed, its computed tokens discarded, put back at the front of the queue) until the
   allocation fits or the request preempted itself.
2. Only if nobody was preempted, *waiting* requests are admitted in FIFO order while budget,
   ``max_num_seqs`` and blocks allow; a request first reuses the longest cached chain of its
   prefix blocks (prefix hit) and prefills the rest; a head that does not fit blocks the queue.
3. The step costs ``CostModel.step_s``; every request whose computed tokens reach its length
   samples one token; requests that reach their output length finish, free their blocks
   (prefix blocks stay cached, unreferenced) and, in the closed loop, bring in the next one.

Speed comes from not touching decoding requests one by one.  A decoding request advances
one token per step, so it is stored *lazily* against a global decode clock ``G``: its
computed tokens are ``computed + (G − gbase)``.  It needs a new block when that count is a
multiple of the block size, i.e. in steps where ``G ≡ gbase − computed (mod block_size)``:
``phase_cnt`` counts decoders per phase, so a step's decode allocations cost O(1), and
finishes come off a heap keyed by the step in which each request samples its last token.

* ``_jump`` runs k pure-decode steps at once (no prefill in flight, admission impossible
  and staying so, no finish, enough free blocks, no eviction that could change a waiting
  request's prefix hit) in O(block_size), with the step times summed in closed form.
* ``_step`` runs one step with decoders aggregated and prefilling requests explicit; when
  the free blocks run short, ``_allocate_in_order`` walks the running list in admission
  order (O(running), decoders stay lazy) to find who preempts whom.
* ``_slow_step`` (a binding token budget: some request gets less than it asks) materialises
  every request and runs the step exactly as written above.

``NaiveEngine`` in ``tests/core/sim/test_sim_equivalence.py`` is a plain step-by-step
implementation of the same rules; the tests check that both give the same results.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

from app.core.sim.cost import CostModel
from app.core.sim.metrics import Window
from app.core.sim.pool import BlockPool
from app.core.sim.state import DECODE, DONE, PREFILL, WAITING, SchedulerConfig, Seq, SimCancelled
from app.core.sim.state import cdiv as _cdiv
from app.core.sim.tier import KVTier, TierConfig
from app.core.sim.workload import RequestSpec


class Engine:
    """One closed-loop level: ``concurrency`` requests in flight, ``requests`` issued in order."""

    def __init__(self, *, blocks: int, block_size: int, sched: SchedulerConfig, cost: CostModel,
                 requests: list[RequestSpec], concurrency: int, prefix_tokens: int,
                 tier: TierConfig | None = None) -> None:
        # vLLM's BlockPool reserves one block as the null block (block_pool.py).
        self.pool = BlockPool(blocks - 1)
        self.tier = KVTier(tier.blocks) if tier is not None and tier.blocks > 0 else None
        self.pool.tier = self.tier
        self.block_load_s = tier.block_load_s if tier is not None else 0.0
        self.load_s = 0.0  # transfer time of tier hits admitted this step
        self.bs = block_size
        self.sched = sched
        self.cost = cost
        self.requests = requests
        self.concurrency = concurrency
        self.prefix_blocks = prefix_tokens // block_size if sched.enable_prefix_caching else 0
        self.running: list[Seq] = []
        self.prefilling: list[Seq] = []
        self.waiting: deque[Seq] = deque()
        self.now = 0.0
        self.G = 0
        self.n_dec = 0
        self.s_off = 0  # sum over decoders of (computed - gbase)
        self.phase_cnt = [0] * block_size
        self.heap: list[tuple[int, int, int, Seq]] = []
        self.issued = self.completed = self.admissions = self.tags = 0
        total = len(requests)
        if total > concurrency:
            self.w0, self.w1, self.steady = (total - concurrency) // 10, total - concurrency, True
        else:
            self.w0, self.w1, self.steady = 0, total, False
        self.win = Window(usable_blocks=blocks - 1, tier=self.tier is not None)

    # -- the loop -----------------------------------------------------------------------
    def run(self, cancel: Callable[[], bool] | None = None,
            tick: Callable[[float], None] | None = None) -> dict[str, object]:
        """Run the level; every 512 rounds check ``cancel`` and report the fraction of
        requests completed to ``tick``."""
        for _ in range(min(self.concurrency, len(self.requests))):
            self._arrive()
        self._open_if(0)
        rounds = 0
        while self.completed < len(self.requests):
            rounds += 1
            if rounds % 512 == 0:
                if cancel is not None and cancel():
                    raise SimCancelled
                if tick is not None:
                    tick(self.completed / len(self.requests))
            self._jump()
            self._step()
        return self.win.summary(self.concurrency, self.steady)

    def _arrive(self) -> None:
        if self.issued < len(self.requests):
            self.waiting.append(Seq(self.requests[self.issued], self.now))
            self.issued += 1

    def _open_if(self, completed: int) -> None:
        if completed == self.w0 and not self.win.open and completed < self.w1:
            self.win.open = True
            self.win.start_s = self.now

    def _in_flight(self) -> int:
        return len(self.running) + len(self.waiting)

    # -- lazy decoders ------------------------------------------------------------------
    def _lazify(self, s: Seq) -> None:
        s.state = DECODE
        s.gbase = self.G
        self.phase_cnt[(self.G - s.computed) % self.bs] += 1
        self.n_dec += 1
        self.s_off += s.computed - self.G
        self.tags += 1
        s.tag = self.tags
        heapq.heappush(self.heap, (self.G + s.output - 1 - s.generated, s.admit_no, s.tag, s))

    def _unlazify(self, s: Seq) -> None:
        """Remove a decoder from the aggregates and make its fields explicit at clock G."""
        self.phase_cnt[(s.gbase - s.computed) % self.bs] -= 1
        self.n_dec -= 1
        self.s_off -= s.computed - s.gbase
        d = self.G - s.gbase
        s.computed += d
        s.generated += d
        s.tokens = s.computed + 1
        s.blocks = _cdiv(s.computed, self.bs)
        s.tag = 0

    def _next_finish(self) -> int:
        heap = self.heap
        while heap and (heap[0][3].tag != heap[0][2] or heap[0][3].state != DECODE):
            heapq.heappop(heap)
        return heap[0][0] if heap else -1

    # -- admission ----------------------------------------------------------------------
    def _hits(self, s: Seq) -> tuple[int, int, int]:
        """(GPU hit blocks, how many of them are unreferenced, offload-tier hit blocks after them)."""
        if s.group < 0 or not self.prefix_blocks:
            return 0, 0, 0
        limit = min(self.prefix_blocks, (s.tokens - 1) // self.bs)
        h, evictable = self.pool.lookup(s.group, limit)
        return h, evictable, (self.tier.chain(s.group, h, limit) if self.tier is not None else 0)

    def _admit(self, budget: int, sched: list[tuple[Seq, int]]) -> None:
        waiting, pool, bs, win = self.waiting, self.pool, self.bs, self.win
        while waiting and budget > 0 and len(self.running) < self.sched.max_num_seqs:
            s = waiting[0]
            h, evictable, t = self._hits(s)
            new = min(s.tokens - (h + t) * bs, budget)
            need = t + _cdiv(new, bs)  # tier hits take GPU blocks too (loaded, not computed)
            if need + evictable > pool.num_free:
                return
            pool.touch(s.group, h)
            if t and self.tier is not None:
                self.tier.touch(s.group, h, t)
                self.load_s += t * self.block_load_s
            ev = pool.allocate(need)
            s.nkeys, s.blocks, s.computed, s.dup = h, h + need, (h + t) * bs, False
            if win.open:
                win.hit_tokens += (h + t) * bs
                win.tier_hit_tokens += t * bs
                win.tier_load_s += t * self.block_load_s
                win.queried_tokens += s.tokens
                win.evictions += ev
            waiting.popleft()
            self.admissions += 1
            s.admit_no = self.admissions
            s.state = PREFILL
            self.running.append(s)
            self.prefilling.append(s)
            sched.append((s, new))
            budget -= new

    def _admission_blocked(self) -> tuple[bool, int]:
        """(no admission can happen this step, evictable hits of a memory-blocked head)."""
        if (not self.waiting or len(self.running) >= self.sched.max_num_seqs
                or self.sched.max_num_batched_tokens - self.n_dec <= 0):
            return True, 0
        s = self.waiting[0]
        h, evictable, t = self._hits(s)
        new = min(s.tokens - (h + t) * self.bs, self.sched.max_num_batched_tokens - self.n_dec)
        return t + _cdiv(new, self.bs) + evictable > self.pool.num_free, evictable

    # -- k pure-decode steps at once ----------------------------------------------------
    def _jump(self) -> None:
        n = self.n_dec
        if self.prefilling or n == 0 or n > self.sched.max_num_batched_tokens:
            return
        blocked, evictable = self._admission_blocked()
        if not blocked:
            return
        cap = self.pool.num_free
        if evictable:
            cap = min(cap, self.pool.anon_at_head())
        k = min(self._next_finish() - self.G, self._steps_within(cap))
        if k <= 0:
            return
        allocs, used_sum = self._alloc_profile(k)
        used0 = self.pool.total - self.pool.num_free
        dt = self.cost.decode_run_s(k, n, self.s_off + n * self.G)
        ev = self.pool.allocate(allocs)
        if self.win.open:
            self.win.evictions += ev
            self.win.add_steps(k, dt, n * k, 0, k * used0 + used_sum, used0 + allocs, n,
                               self._in_flight())
        self.G += k
        self.now += dt

    def _steps_within(self, cap: int) -> int:
        """Most pure-decode steps whose block allocations total at most ``cap``."""
        n, bs, cnt, g = self.n_dec, self.bs, self.phase_cnt, self.G % self.bs
        cycles, rem = divmod(cap, n)
        for o in range(bs):
            c = cnt[(g + o) % bs]
            if c > rem:
                return cycles * bs + o
            rem -= c
        return cycles * bs + bs  # unreachable: the phase counts sum to n > rem

    def _alloc_profile(self, k: int) -> tuple[int, int]:
        """(blocks allocated by k decode steps, sum over those steps of blocks allocated so
        far including the step itself)."""
        bs, cnt, g = self.bs, self.phase_cnt, self.G % self.bs
        allocs = acc = 0
        for o in range(min(bs, k)):
            c = cnt[(g + o) % bs]
            if c:
                q = (k - o + bs - 1) // bs  # steps o, o+bs, ... below k
                allocs += c * q
                acc += c * (q * (k - o) - bs * q * (q - 1) // 2)
        return allocs, acc

    # -- one step -----------------------------------------------------------------------
    def _step(self) -> None:
        bs, mnbt, pool = self.bs, self.sched.max_num_batched_tokens, self.pool
        demand, need = self.n_dec, self.phase_cnt[self.G % bs]
        for s in self.prefilling:
            demand += s.tokens - s.computed
            need += _cdiv(s.tokens, bs) - s.blocks
        if demand > mnbt:
            self._slow_step()
            return
        if need > pool.num_free:
            self._allocate_in_order()  # preempts: no admission this step
            sched = [(s, s.tokens - s.computed) for s in self.prefilling]
        else:
            if need:
                ev = pool.allocate(need)
                if self.win.open:
                    self.win.evictions += ev
            sched = []
            for s in self.prefilling:
                sched.append((s, s.tokens - s.computed))
                s.blocks = _cdiv(s.tokens, bs)
            self._admit(mnbt - demand, sched)
        n = self.n_dec
        kv_read = self.s_off + n * self.G + n + sum(s.computed + c for s, c in sched)
        finished: list[Seq] = []
        while self._next_finish() == self.G:
            finished.append(heapq.heappop(self.heap)[3])
        self._run_step(sched, n, kv_read, finished, lazy=True)

    def _allocate_in_order(self) -> None:
        """The running phase of a step the free blocks cannot cover (the token budget can):
        allocate in admission order, preempting the most recently admitted request whenever
        an allocation does not fit.  Decoders stay lazy unless they are preempted."""
        pool, bs, phase, running, win = self.pool, self.bs, self.G % self.bs, self.running, self.win
        i = 0
        while i < len(running):
            s = running[i]
            if s.state == DECODE:
                need = 1 if (s.gbase - s.computed) % bs == phase else 0
            else:
                need = _cdiv(s.tokens, bs) - s.blocks
            while need > pool.num_free:
                victim = running.pop()
                if victim.state == DECODE:
                    self._unlazify(victim)
                self._preempt(victim)
                if victim is s:
                    return
            if need:
                ev = pool.allocate(need)
                if win.open:
                    win.evictions += ev
                if s.state == PREFILL:
                    s.blocks += need
            i += 1

    def _slow_step(self) -> None:
        for s in self.running:
            if s.state == DECODE:
                self._unlazify(s)
        self.heap.clear()
        budget, sched, preempted = self.sched.max_num_batched_tokens, [], False
        i = 0
        while i < len(self.running) and budget > 0:
            s = self.running[i]
            new = min(s.tokens - s.computed, budget)
            need = _cdiv(s.computed + new, self.bs) - s.blocks
            while need > self.pool.num_free:
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is s:
                    break
            if s.state == WAITING:
                break
            ev = self.pool.allocate(need)
            if self.win.open:
                self.win.evictions += ev
            s.blocks += need
            sched.append((s, new))
            budget -= new
            i += 1
        if not preempted:
            self._admit(budget, sched)
        decoders = [s for s, _ in sched if s.state == DECODE]
        kv_read = sum(s.computed + c for s, c in sched)
        finished = [s for s in decoders if s.generated + 1 >= s.output]
        self._run_step(sched, len(decoders), kv_read, finished, lazy=False)
        for s in self.running:
            if s.state == DECODE:
                self._lazify(s)

    def _preempt(self, s: Seq) -> None:
        if s.state == PREFILL:
            self.prefilling.remove(s)
        self.pool.release(s.blocks - s.nkeys, s.group, s.nkeys)
        if self.win.open:
            self.win.preemptions += 1
            self.win.recomputed_tokens += s.computed
        s.computed = s.blocks = s.nkeys = 0
        s.tokens = s.prompt + s.generated
        s.state = WAITING
        self.waiting.appendleft(s)

    def _run_step(self, sched: list[tuple[Seq, int]], n_dec: int, kv_read: int,
                  finished: list[Seq], *, lazy: bool) -> None:
        """Time the step, advance every scheduled request, retire the finished ones."""
        prefill = sum(c for s, c in sched if s.state == PREFILL)
        dt = self.cost.step_s(prefill, n_dec, kv_read) + self.load_s
        self.load_s = 0.0
        out = n_dec
        self.now += dt
        self.G += 1
        done_prefill: list[Seq] = []
        for s, c in sched:
            if s.state != PREFILL:
                s.computed += 1
                s.generated += 1
                s.tokens += 1
                continue
            s.computed += c
            self._register(s)
            if s.computed == s.tokens:
                out += 1
                s.generated += 1
                s.tokens += 1
                if s.first_s < 0:
                    s.first_s = self.now
                done_prefill.append(s)
        used = self.pool.total - self.pool.num_free
        if self.win.open:
            self.win.add_steps(1, dt, out, prefill, used, used, len(self.running), self._in_flight())
        for s in done_prefill:
            self.prefilling.remove(s)
            if s.generated >= s.output:
                finished.append(s)
            elif lazy:
                self._lazify(s)
            else:
                s.state = DECODE
        if lazy:
            for s in finished:
                if s.state == DECODE:
                    self._unlazify(s)
        for s in sorted(finished, key=lambda r: r.admit_no):
            self._finish(s)

    def _register(self, s: Seq) -> None:
        """Cache the prefix blocks a request has just computed (first copy only)."""
        if s.group < 0 or s.dup:
            return
        limit = min(self.prefix_blocks, s.computed // self.bs)
        while s.nkeys < limit:
            if self.pool.is_cached((s.group, s.nkeys)):
                s.dup = True
                return
            self.pool.register(s.group, s.nkeys)
            s.nkeys += 1

    def _finish(self, s: Seq) -> None:
        self.pool.release(s.blocks - s.nkeys, s.group, s.nkeys)
        self.running.remove(s)
        s.state = DONE
        self.completed += 1
        if self.win.open:
            self.win.add_request(s.arrival_s, s.first_s, self.now, s.output)
            if self.completed == self.w1:
                self.win.open = False
                self.win.end_s = self.now
        self._open_if(self.completed)
        self._arrive()
