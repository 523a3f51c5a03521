"""A pure cache of validated, built plan inputs, so a slider tick only applies the what-if.

A what-if URL on a stored base document (`/plan?base=<id>&util=…`) describes the same document
on every tick except for its `whatif` section. Validating and building a base of 1,024 measured
ranks is most of a tick's work, so `plans.run_plan` keeps, per key, what the document gives
before the what-if (`plan_inputs.build_base_plan`), and each tick validates and applies only the
what-if.

Why this is allowed beside issue 11's rule (one defaults rule, no module-level result caches):

- it caches inputs, not results: the value of a key is a pure function of the key (the base
  document's id is the sha256 of its canonical JSON, and stored documents are immutable; the
  rest of the key is the query's non-what-if values), so an entry can never be stale;
- it is not module-level: the web app owns one per process (`PlanCache.prepared`), so tests
  and several workers never share it; each worker fills its own and they cannot disagree;
- it is bounded twice: at most `capacity` entries and at most `max_ranks` ranks over all of
  them (least recently used out first), so memory stays flat however many bases are opened.

A kept value of many ranks (`freeze_at`, 4,096 by default) is moved out of the garbage collector's
reach as `kvledger serve` does with what start-up made (`app.web.app.freeze_startup_objects`): one
collection, then `gc.freeze`. A prepared 16,384-rank base is a few hundred thousand long-lived
objects (its ranks, their cells, the validated document) that every full collection would otherwise
scan again, one every few ticks; after the freeze a full collection scans only what requests made.
The collection first leaves no garbage to be pinned; an evicted frozen value is still freed (by
reference counting: a prepared value holds no reference cycles).
"""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class PureCache(Generic[V]):
    """A thread-safe LRU of values that are pure functions of their keys, bounded by entries and
    by a total weight (ranks). A value heavier than the whole bound is computed but not kept."""

    def __init__(self, capacity: int = 64, max_weight: int = 131_072, freeze_at: int | None = 4096) -> None:
        self.capacity = capacity
        self.max_weight = max_weight
        self.freeze_at = freeze_at
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get_or_make(self, key: Hashable, make: Callable[[], V], weigh: Callable[[V], int]) -> V:
        """The value of `key`, made (outside the lock) and kept when it is not there yet."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found[0]
        value = make()
        weight = max(1, weigh(value))
        if weight > self.max_weight:
            return value
        with self._lock:
            kept = key not in self._items
            if kept:
                self._items[key] = (value, weight)
                self._weight += weight
            self._items.move_to_end(key)
            while len(self._items) > self.capacity or self._weight > self.max_weight:
                _, (_, dropped) = self._items.popitem(last=False)
                self._weight -= dropped
        if kept and self.freeze_at is not None and weight >= self.freeze_at:
            gc.collect()
            gc.freeze()
        return value

    def __len__(self) -> int:
        return len(self._items)

    @property
    def weight(self) -> int:
        return self._weight
