"""Every rank's ledger in columns: what a slider tick does not change is worked out once.

Theory of operation. A plan of N measured ranks is N ledgers (app.core.ledger), and a
gpu_memory_utilization tick moves only ``requested = ceil(total × u)`` and with it KV:

    kv_i = requested_i − (weights + non_torch + activation [+ cuda_graphs] + lora + draft)_i

So `RankColumns` (made once per set of ranks; a prepared base keeps it, `PlanInput.columns`)
holds each rank's total, the sum of its rows inside the budget (with and without the CUDA-graph
row, a version rule), the KV cell's source and note, and which ranks are identical (the
grouped form's groups: equal input cells give equal ledgers whatever the knobs). A tick is then
two list comprehensions (`work_out_columns`), and `RankLedgers` hands out the very `RankLedger`
that `ledger.work_out_rank` gives, made only when asked for (a 16,384-rank tick reads a few).

A rank the tight loop does not cover — a measured KV room, no total, a manual
``--kv-cache-memory-bytes``, or one that found a start-up problem — is worked out by
`ledger.work_out_rank` itself, so its problems and their messages are the ledger's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, gt, lt, sub
from typing import Any

from app.core.lazy_rows import LazyRows
from app.core.ledger import (
    KV_NOTE,
    Cell,
    LedgerRules,
    RankInput,
    RankLedger,
    Source,
    source_of,
    work_out,
    work_out_rank,
)

#: A free-at-start stand-in for "not stated": larger than any request, so never below it.
UNSTATED = 1 << 200
_FIELDS = ("total", "free_at_start", "weights", "non_torch", "cuda_graphs", "activation", "kv_room", "lora",
           "speculative")  # fmt: skip


_cells_of = attrgetter(*_FIELDS)  # a rank's input cells, in `_FIELDS` order
_label_of, _total_of, _room_of = attrgetter("label"), attrgetter("total"), attrgetter("kv_room")


def _b(cell: Cell | None) -> int:
    return 0 if cell is None else cell.bytes


@dataclass(frozen=True, eq=False)
class RankColumns:
    """What the ranks give before any knob: per-rank constants and the groups of identical ranks."""

    ranks: tuple[RankInput, ...]
    labels: tuple[str, ...]
    fast: bool  # every rank has its total and no measured KV room: `work_out_columns`' loop applies
    totals: tuple[int, ...]
    inside: tuple[int, ...]  # rows inside the budget, CUDA graphs included (vLLM >= 0.21)
    inside_no_graphs: tuple[int, ...]
    frees: tuple[int, ...]  # UNSTATED where the rank states no free memory
    graphs: tuple[int, ...]
    kv_sources: tuple[Source, ...]
    kv_sources_no_graphs: tuple[Source, ...]
    kv_notes: tuple[str, ...]
    distinct_totals: frozenset[int]
    group_of: tuple[int, ...]  # each rank's group (groups numbered by first appearance)
    groups: tuple[tuple[int, ...], ...]  # each group's positions
    # Per-process memo of derived, knob-independent views (the full form's JSON templates).
    memo: dict[str, Any] = field(default_factory=dict, repr=False)


#: One rank's knob-independent values: total, rows inside the budget (with and without CUDA
#: graphs), free (UNSTATED when not stated), graphs, the KV source (with and without graphs), its note.
Values = tuple[int, int, int, int, int, Source, Source, str]


def rank_columns(ranks: tuple[RankInput, ...]) -> RankColumns:
    """The columns of `ranks` (O(ranks); a prepared base makes them once). Each distinct set of
    cell objects is worked out once (estimated ranks share their stage's cells, `ranks_from_doc`
    shares equal measured values). Ranks with equal input cells (bytes, source and note) have equal
    ledgers, admissions and budgets under any knob: they are the grouped form's groups
    (app.core.rank_groups)."""
    by_cells: dict[tuple[int, ...], int] = {}
    by_value: dict[tuple[Cell | None, ...], int] = {}
    values: list[Values] = []  # per group
    group_of: list[int] = []
    last: tuple[Cell | None, ...] = ()
    g = -1
    for r in ranks:
        cells = _cells_of(r)
        if cells == last:  # the previous rank's cells (a stage's TP ranks share the very objects): its group
            group_of.append(g)
            continue
        ident = tuple(map(id, cells))  # the cells are alive while `ranks` is: their ids stay theirs
        g = by_cells.get(ident, -1)
        if g < 0:
            g = by_cells[ident] = by_value.setdefault(cells, len(values))  # equal cells, whatever the objects
            if g == len(values):
                values.append(_values(r))  # equal cells (bytes, source, note) give equal values
        group_of.append(g)
        last = cells
    rows = list(map(values.__getitem__, group_of))
    members: list[list[int]] = [[] for _ in values]
    for i, g in enumerate(group_of):
        members[g].append(i)
    # one column per value (a C-level transpose; eight empty columns without ranks)
    totals, inside, inside_no_graphs, frees, graphs, kv_sources, kv_sources_no_graphs, kv_notes = (
        tuple(zip(*rows, strict=True)) if rows else ((),) * 8
    )
    return RankColumns(
        ranks=ranks,
        labels=tuple(map(_label_of, ranks)),
        # every total stated and no KV room (a Cell is always true: C-level passes)
        fast=all(map(_total_of, ranks)) and not any(map(_room_of, ranks)),
        totals=totals,
        distinct_totals=frozenset(totals),
        inside=inside,
        inside_no_graphs=inside_no_graphs,
        frees=frees,
        graphs=graphs,
        kv_sources=kv_sources,
        kv_sources_no_graphs=kv_sources_no_graphs,
        kv_notes=kv_notes,
        group_of=tuple(group_of),
        groups=tuple(tuple(m) for m in members),
    )


def _values(r: RankInput) -> Values:
    """One rank's knob-independent values (`Values`), from its cells."""
    no_graphs = _b(r.weights) + _b(r.non_torch) + _b(r.activation) + _b(r.lora) + _b(r.speculative)
    note = KV_NOTE
    if r.lora is not None or r.speculative is not None:
        note += "".join(f" − {n}" for n, c in (("lora", r.lora), ("draft", r.speculative)) if c is not None)
    free = UNSTATED if r.free_at_start is None else r.free_at_start.bytes
    return (_b(r.total), no_graphs + _b(r.cuda_graphs), no_graphs, free, _b(r.cuda_graphs),
            _kv_source(r, r.cuda_graphs), _kv_source(r, None), note)  # fmt: skip


def _kv_source(r: RankInput, graphs: Cell | None) -> Source:
    """The derived KV cell's source, as `ledger.work_out_rank` gives it."""
    return source_of(r.total, r.weights, r.non_torch, r.activation, graphs, r.lora, r.speculative)


def columns_for(ranks: tuple[RankInput, ...], prepared: RankColumns | None) -> RankColumns:
    """`prepared` when it was made from these very ranks, else new columns."""
    return prepared if prepared is not None and prepared.ranks is ranks else rank_columns(ranks)


class RankLedgers(LazyRows[RankLedger]):
    """Every rank's ledger: the KV and requested bytes as lists, the `RankLedger`s made on demand.

    Equal (as a sequence) to ``ledger.work_out(ranks, rules)``; `slow` holds the ranks the
    ledger worked out itself (every one whose ledger found a problem is among them); `inside`
    is the column `work_out_columns` subtracted from the request (``kv = requested − inside``
    for every rank), None when the ledger worked every rank out itself."""

    __slots__ = ("_items", "_notes", "_order", "_sorted", "columns", "inside", "kv_bytes", "requested", "slow",
                 "sources")  # fmt: skip

    def __init__(self, columns: RankColumns, requested: Sequence[int | None], kv_bytes: list[int],
                 slow: dict[int, RankLedger], sources: tuple[Source, ...] = (),
                 inside: Sequence[int] | None = None) -> None:  # fmt: skip
        self.columns, self.requested, self.kv_bytes, self.slow = columns, requested, kv_bytes, slow
        self._items: list[RankLedger | None] = [None] * len(kv_bytes)
        for i, lg in slow.items():
            self._items[i] = lg
        self.sources, self._notes, self.inside = sources, columns.kv_notes, inside
        self._order: Sequence[int] | None = None
        self._sorted: Sequence[int] = ()

    def __len__(self) -> int:
        return len(self.kv_bytes)

    def row(self, i: int) -> RankLedger:
        found = self._items[i]
        if found is None:
            if i < 0:
                i += len(self)
            kv = Cell(self.kv_bytes[i], self.sources[i], self._notes[i])
            found = self._items[i] = RankLedger(self.columns.ranks[i], self.requested[i], kv, True)
        return found

    @property
    def will_start(self) -> bool:
        """Whether every rank starts (only a rank the ledger worked out itself can fail to)."""
        return all(lg.will_start for lg in self.slow.values())

    def with_problems(self) -> list[RankLedger]:
        """The ledgers with problems, in rank order."""
        return [self.slow[i] for i in sorted(self.slow) if self.slow[i].problems]

    def kv_order(self) -> tuple[Sequence[int], Sequence[int]]:
        """(positions stably by KV, the KV bytes in that order): ``sorted(range(n), key=kv)`` and
        ``sorted(kv)``, worked out once per tick. With one GPU total every rank asks the same
        ``requested``, so ``kv = requested − inside`` orders the ranks as ``inside`` does, reversed,
        whatever the knob: that order is made once per set of ranks (the columns' memo) and a tick
        only subtracts (``sorted(..., reverse=True)`` keeps equal values in position order)."""
        if self._order is None:
            n, inside, columns = len(self.kv_bytes), self.inside, self.columns
            if inside is not None and n and len(columns.distinct_totals) == 1:
                key = "kv-order" if inside is columns.inside else "kv-order-no-graphs"
                found: tuple[tuple[int, ...], tuple[int, ...]] | None = columns.memo.get(key)
                if found is None:
                    order = tuple(sorted(range(n), key=inside.__getitem__, reverse=True))
                    found = columns.memo[key] = (order, tuple(map(inside.__getitem__, order)))
                asked = self.requested[0]
                assert asked is not None  # the tight loop gives every rank its request
                self._order, self._sorted = found[0], list(map(sub, repeat(asked, n), found[1]))
            else:
                kv = self.kv_bytes
                self._order = sorted(range(n), key=kv.__getitem__)
                self._sorted = list(map(kv.__getitem__, self._order))
        return self._order, self._sorted


def work_out_columns(columns: RankColumns, rules: LedgerRules) -> RankLedgers:
    """Every rank's ledger under `rules`, equal to ``ledger.work_out(columns.ranks, rules)``."""
    ranks = columns.ranks
    if not columns.fast or rules.kv_cache_memory_bytes is not None:
        every = work_out(ranks, rules)
        return RankLedgers(columns, [lg.requested_bytes for lg in every], [lg.kv.bytes for lg in every],
                           dict(enumerate(every)))  # fmt: skip
    num, den = ratio = rules.utilization_ratio
    totals = columns.totals
    # ledger._requested: ceil(total × u) (or its floor before vLLM rounded up), on the decimal u
    ceil = rules.requested_is_ceil
    # once per distinct total (a cluster has a few GPU models), then one C-level pass per column
    asked = {t: -(-t * num // den) if ceil else t * num // den for t in columns.distinct_totals}
    requested = list(map(asked.__getitem__, totals))
    in_budget = rules.cuda_graphs_in_budget
    inside = columns.inside if in_budget else columns.inside_no_graphs
    kv = list(map(sub, requested, inside))
    slow = _problem_ranks(columns, rules, requested, kv)
    ledgers = {i: work_out_rank(ranks[i], rules, ratio) for i in slow}
    sources = columns.kv_sources if in_budget else columns.kv_sources_no_graphs
    return RankLedgers(columns, requested, kv, ledgers, sources, inside)


def _problem_ranks(columns: RankColumns, rules: LedgerRules, requested: list[int], kv: list[int]) -> list[int]:
    """The ranks `ledger._preflight` finds a problem on (free below requested, no KV, graphs
    outside the budget beyond the headroom), found with one comparison per rank."""
    bad: set[int] = set()
    if rules.free_memory_preflight and any(map(lt, columns.frees, requested)):
        bad.update(i for i, (f, r) in enumerate(zip(columns.frees, requested, strict=True)) if f < r)
    if kv and min(kv) <= 0:
        bad.update(i for i, k in enumerate(kv) if k <= 0)
    if not rules.cuda_graphs_in_budget and any(map(gt, columns.graphs, map(sub, columns.totals, requested))):
        rows = zip(columns.graphs, columns.totals, requested, strict=True)
        bad.update(i for i, (g, t, r) in enumerate(rows) if g > t - r and columns.ranks[i].cuda_graphs is not None)
    return sorted(bad)


def kv_column(ledgers: Sequence[RankLedger]) -> Sequence[int]:
    """Every rank's KV bytes, without making a ledger per rank when they are `RankLedgers`."""
    return ledgers.kv_bytes if isinstance(ledgers, RankLedgers) else [lg.kv.bytes for lg in ledgers]


def kv_order(ledgers: Sequence[RankLedger]) -> tuple[Sequence[int], Sequence[int]]:
    """(positions stably by KV, the KV bytes sorted), without a ledger per rank when they are `RankLedgers`."""
    if isinstance(ledgers, RankLedgers):
        return ledgers.kv_order()
    kv = kv_column(ledgers)
    order = sorted(range(len(kv)), key=kv.__getitem__)
    return order, [kv[i] for i in order]


def free_spread(ledgers: Sequence[RankLedger]) -> int | None:
    """max − min of the free memory at start over the ranks that state it (None for fewer than two);
    free memory does not move with a knob, so `RankLedgers` work it out once per set of ranks."""
    if not isinstance(ledgers, RankLedgers):
        frees = frees_of(ledgers)
        return max(frees) - min(frees) if len(frees) > 1 else None
    memo = ledgers.columns.memo
    if "free-spread" not in memo:
        frees = frees_of(ledgers)
        memo["free-spread"] = max(frees) - min(frees) if len(frees) > 1 else None
    found: int | None = memo["free-spread"]
    return found


def all_start(ledgers: Sequence[RankLedger]) -> bool:
    return ledgers.will_start if isinstance(ledgers, RankLedgers) else all(lg.will_start for lg in ledgers)


def with_problems(ledgers: Sequence[RankLedger]) -> list[RankLedger]:
    return ledgers.with_problems() if isinstance(ledgers, RankLedgers) else [lg for lg in ledgers if lg.problems]


def labels_of(ledgers: Sequence[RankLedger]) -> Sequence[str]:
    return ledgers.columns.labels if isinstance(ledgers, RankLedgers) else [lg.label for lg in ledgers]


def index_of(ledgers: Sequence[RankLedger], label: str | None) -> int | None:
    """The position of the first rank labelled `label` (None when none is)."""
    if label is None:
        return None
    if isinstance(ledgers, RankLedgers):
        return label_positions(ledgers.columns).get(label)
    labels = labels_of(ledgers)
    try:
        return labels.index(label)
    except ValueError:
        return None


def label_positions(columns: RankColumns) -> dict[str, int]:
    """Each label's first position, made once per set of ranks (a tick looks the binding rank up
    several times; a scan compares up to every label). As many entries as ranks: every label differs."""
    found: dict[str, int] | None = columns.memo.get("label-positions")
    if found is None:
        labels = columns.labels  # from the last rank back, so a repeated label keeps its first position
        backwards = zip(reversed(labels), range(len(labels) - 1, -1, -1), strict=True)
        found = columns.memo["label-positions"] = dict(backwards)
    return found


def known_rooms(ledgers: RankLedgers) -> tuple[Sequence[str], Sequence[int]]:
    """Labels and KV bytes of the ranks whose KV is known (not the "default" of a rank without memory)."""
    labels, kvs = ledgers.columns.labels, ledgers.kv_bytes
    unknown = {i for i, lg in ledgers.slow.items() if lg.kv.source == "default"}
    if not unknown:
        return labels, kvs
    keep = [i for i in range(len(kvs)) if i not in unknown]
    return [labels[i] for i in keep], [kvs[i] for i in keep]


def measured_rooms(ledgers: RankLedgers) -> tuple[Sequence[str], list[int]] | None:
    """Labels and measured KV rooms when every rank states one, else None. Under a manual
    ``--kv-cache-memory-bytes`` the ledger's KV is the manual value itself, so the uniform budget
    (seed 001: min(room − reserve)) is priced on these instead."""
    cells = [r.kv_room for r in ledgers.columns.ranks]
    if not cells or None in cells:
        return None
    return ledgers.columns.labels, [c.bytes for c in cells if c is not None]


def frees_of(ledgers: Sequence[RankLedger]) -> list[int]:
    """The free memory at start of the ranks that state it."""
    if isinstance(ledgers, RankLedgers):
        return [f for f in ledgers.columns.frees if f != UNSTATED]
    return [lg.free_at_start.bytes for lg in ledgers if lg.free_at_start is not None]


def inputs_of(ledgers: Sequence[RankLedger]) -> Sequence[RankInput]:
    """Every rank's inputs, without making a ledger per rank when they are `RankLedgers`."""
    return ledgers.columns.ranks if isinstance(ledgers, RankLedgers) else [lg.inp for lg in ledgers]
