"""The plan's pure sub-results, reused across the plans one app computes: owned by the app.

Building a plan input parses the model's config (a catalogue model's shape, ~0.7 ms), estimates
its rank rows (~0.2 ms), quantizes the shape for online fp8 (~0.2 ms), and `plans.run_plan`
tries every TP degree up to 64 (~0.7 ms): each a pure function of frozen inputs, and the same
for every slider tick, sizing candidate or lever of one model. `PlanMemo` keeps those values.

Why this is allowed beside issue 11's rule (no module-level mutable caches of results):

- it is not module-level: the web app creates one (`PlanCache.memo`, built by the app factory
  with the rest of `app.state`), and a pure ASGI middleware (`app.web.edge.Edge`) makes it the
  current memo of each request it serves (a context variable, which reaches the worker thread
  of the request, as `app.services.clients.CLIENT` does). Outside a request (the CLI, a test
  calling a service) there is no current memo and every value is computed afresh, unless the
  caller opens one with `using(PlanMemo())` for its own work;
- every value is a pure function of its key: a catalogue model's key carries its config's
  sha256 (a changed catalogue is a new key, never a stale value), the others are keyed by the
  frozen core values they are computed from; `clear()` drops everything;
- it is bounded by entries and by the ranks its values hold (`PureCache`, least recently
  used out first).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from contextvars import ContextVar
from typing import TypeVar, cast

from app.services.prepared import PureCache

V = TypeVar("V")


class PlanMemo:
    """A bounded LRU of pure sub-results by (kind, key); see the module docstring."""

    def __init__(self, capacity: int = 512, max_weight: int = 131_072) -> None:
        self._cache: PureCache[object] = PureCache(capacity, max_weight)

    def get_or_make(self, key: Hashable, make: Callable[[], V], weigh: Callable[[V], int] | None = None) -> V:
        weigher = cast(Callable[[object], int], weigh or _one)  # a V-only weigher sees only V values
        return cast(V, self._cache.get_or_make(key, make, weigher))

    def clear(self) -> None:
        """Drop every value (e.g. after the catalogue changed under a running app)."""
        self._cache = PureCache(self._cache.capacity, self._cache.max_weight)

    def __len__(self) -> int:
        return len(self._cache)


def _one(_: object) -> int:
    return 1


#: The memo of the request (or command) being served; None: compute afresh.
CURRENT: ContextVar[PlanMemo | None] = ContextVar("kvledger_plan_memo", default=None)


def memoised(key: Hashable, make: Callable[[], V], weigh: Callable[[V], int] | None = None) -> V:
    """`make()`, reused from the current memo when there is one (`key` must determine it)."""
    memo = CURRENT.get()
    if memo is None:
        return make()
    return memo.get_or_make(key, make, weigh)


@contextlib.contextmanager
def using(memo: PlanMemo | None) -> Iterator[PlanMemo | None]:
    """Make `memo` the current memo inside the block (None: no memo)."""
    token = CURRENT.set(memo)
    try:
        yield memo
    finally:
        CURRENT.reset(token)
