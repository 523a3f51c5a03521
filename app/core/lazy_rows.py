"""Per-rank rows made when read: the column-wise results of a tick (`rank_columns.RankLedgers`,
`admission.RankAdmissions`, `budget.RankBudgets`) keep their numbers as lists and build a row
object only for the ranks something asks about, while comparing, hashing and slicing like the
tuple of their rows."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import TypeVar, overload

T = TypeVar("T")


class LazyRows(Sequence[T]):
    """A sequence whose ``i``-th item is ``row(i)``; subclasses give `row` and `__len__`."""

    __slots__ = ()

    @abstractmethod
    def row(self, i: int) -> T:
        """The row of rank ``i`` (negative ``i`` counts from the end, as for a tuple)."""

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...
    def __getitem__(self, i: int | slice) -> T | Sequence[T]:
        if isinstance(i, slice):
            return tuple(self.row(j) for j in range(*i.indices(len(self))))
        return self.row(i)

    def __iter__(self) -> Iterator[T]:
        for i in range(len(self)):
            yield self.row(i)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} ranks)"
