"""A JSON list of per-rank rows made when read (issue 14: a slider tick on 1,024 distinct ranks).

A plan's result lists every rank (``ranks``, and the uniform budget's ``ranks``): 2,048 new dicts
a tick for 1,024 ranks, most of the tick's time and of its garbage, while the page a tick renders
reads a handful of them (the binding, median and largest-KV ranks, the first 64). `JsonRows`
holds the columns the rows come from and makes a row when it is read, the whole list (the same
dicts, by the column passes) when it is iterated; `plain_result` turns a result holding them into
plain JSON (lists) for a serializer. Equal, as a sequence, to the list of its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, overload

JSON = dict[str, Any]


class JsonRows(Sequence[JSON]):
    """``n`` JSON rows: row ``i`` is ``row(i)`` (made once, when first read), the list is
    ``every()`` (made once, when iterated, keeping the rows already read: a row read twice is the
    same dict). `first_binding`: the position of the first row whose ``binding`` is true (None: no
    row's); `not_starting`: the positions of the rows whose ``will_start`` is false, in order."""

    __slots__ = ("_every", "_list", "_made", "_n", "_row", "first_binding", "not_starting")

    def __init__(
        self, n: int, row: Callable[[int], JSON], every: Callable[[], list[JSON]] | None = None,
        first_binding: int | None = None, not_starting: Sequence[int] = (),
    ) -> None:  # fmt: skip
        self._n, self._row, self._every = n, row, every
        self._made: dict[int, JSON] = {}
        self._list: list[JSON] | None = None
        self.first_binding, self.not_starting = first_binding, tuple(not_starting)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> JSON: ...
    @overload
    def __getitem__(self, i: slice) -> list[JSON]: ...
    def __getitem__(self, i: int | slice) -> JSON | list[JSON]:
        if self._list is not None:
            return self._list[i]
        if isinstance(i, slice):
            return [self._one(j) for j in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError("rank index out of range")
        return self._one(i + self._n if i < 0 else i)

    def _one(self, i: int) -> JSON:
        found = self._made.get(i)
        if found is None:
            found = self._made[i] = self._row(i)
        return found

    def plain(self) -> list[JSON]:
        """Every row as a list (made once; the rows already read are kept)."""
        if self._list is None:
            rows = self._every() if self._every is not None else [self._row(i) for i in range(self._n)]
            for i, row in self._made.items():
                rows[i] = row
            self._list, self._made = rows, {}
        return self._list

    def __iter__(self) -> Iterator[JSON]:
        return iter(self.plain())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JsonRows):
            other = other.plain()
        return isinstance(other, (list, tuple)) and self.plain() == list(other)

    __hash__ = None  # type: ignore[assignment]  # a list's stand-in: unhashable like a list

    def __repr__(self) -> str:
        return f"JsonRows({self._n} rows)"


def first_binding(ranks: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first rank whose ``binding`` is true (None: none is), without making every row."""
    if isinstance(ranks, JsonRows):
        return None if ranks.first_binding is None else ranks[ranks.first_binding]
    return next((r for r in ranks if r.get("binding")), None)


def not_starting(ranks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The ranks whose ``will_start`` is false, in order, without making every row."""
    if isinstance(ranks, JsonRows):
        return [ranks[i] for i in ranks.not_starting]
    return [r for r in ranks if not r.get("will_start")]


def plain_result(result: Mapping[str, Any]) -> JSON:
    """`result` (a shallow copy) with its row lists as lists: ``ranks`` and ``uniform_budget.ranks``."""
    out = dict(result)
    ranks = out.get("ranks")
    if isinstance(ranks, JsonRows):
        out["ranks"] = ranks.plain()
    budget = out.get("uniform_budget")
    if isinstance(budget, Mapping) and isinstance(budget.get("ranks"), JsonRows):
        out["uniform_budget"] = {**budget, "ranks": budget["ranks"].plain()}
    return out
