"""The per-rank memory ledger.

Theory of operation. Every rank (GPU worker) has its own ledger; ranks are never added up.

    requested = ceil(total × gpu_memory_utilization)          (vllm/v1/worker/utils.py:403)
    headroom  = total − requested                             (outside the budget, never KV)
    kv        = requested − weights − non_torch − activation − cuda_graphs

The CUDA-graph row is inside the budget from vLLM 0.21 on (the profiler's estimate is
subtracted, gpu_worker.py:358 @52a31ccec); before, graphs were captured after KV sizing out of
the headroom, so `kv` does not subtract them and the headroom left after graphs is reported.
A directly measured `kv_room` (vLLM's "Available KV cache memory") replaces the subtraction.
A manual `kv_cache_memory_bytes` replaces `kv` on every rank; the rank must then still fit its
non-KV rows plus the operating reserve in its free memory at start.

Every cell carries where it came from: measured (log, nvidia-smi, user entry), estimated
(a model of vLLM's behaviour), derived (computed from other cells) or default.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from app.core.units import decimal_ratio, fmt_bytes

Source = Literal["measured", "estimated", "derived", "default"]
ROW_NAMES = ("weights", "non_torch", "cuda_graphs", "activation")


@dataclass(frozen=True, slots=True)
class Cell:
    """One ledger value in bytes and where it came from."""

    bytes: int
    source: Source
    note: str = ""


@dataclass(frozen=True, slots=True, init=False)
class RankInput:
    """What is known about one rank before the ledger is worked out."""

    label: str
    total: Cell | None = None
    free_at_start: Cell | None = None
    weights: Cell | None = None
    non_torch: Cell | None = None
    cuda_graphs: Cell | None = None
    activation: Cell | None = None
    kv_room: Cell | None = None
    # Rows vLLM counts inside the budget when LoRA / speculative decoding are on (app.core.lora,
    # app.core.speculative); None when off or already inside a measured row.
    lora: Cell | None = None
    speculative: Cell | None = None

    def __init__(
        self, label: str, total: Cell | None = None, free_at_start: Cell | None = None, weights: Cell | None = None,
        non_torch: Cell | None = None, cuda_graphs: Cell | None = None, activation: Cell | None = None,
        kv_room: Cell | None = None, lora: Cell | None = None, speculative: Cell | None = None,
    ) -> None:  # fmt: skip
        # The generated __init__ of a frozen dataclass, but each slot set through its own descriptor
        # (`_RANK_SLOTS`) rather than object.__setattr__ by name: a rank is made per GPU worker
        # (1,024 for a 1,024-rank estimate), and this takes half the time.
        s = _RANK_SLOTS
        s[0](self, label)
        s[1](self, total)
        s[2](self, free_at_start)
        s[3](self, weights)
        s[4](self, non_torch)
        s[5](self, cuda_graphs)
        s[6](self, activation)
        s[7](self, kv_room)
        s[8](self, lora)
        s[9](self, speculative)


#: The setters of RankInput's slots, in field order (what its __init__ stores through).
_RANK_SLOTS = tuple(RankInput.__dict__[f.name].__set__ for f in fields(RankInput))


@dataclass(frozen=True, slots=True)
class RankLedger:
    """The worked-out ledger of one rank: its inputs, the budget it was given, and its KV."""

    inp: RankInput
    requested_bytes: int | None
    kv: Cell
    will_start: bool
    problems: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return self.inp.label

    @property
    def total(self) -> Cell | None:
        return self.inp.total

    @property
    def free_at_start(self) -> Cell | None:
        return self.inp.free_at_start

    @property
    def weights(self) -> Cell | None:
        return self.inp.weights

    @property
    def non_torch(self) -> Cell | None:
        return self.inp.non_torch

    @property
    def cuda_graphs(self) -> Cell | None:
        return self.inp.cuda_graphs

    @property
    def activation(self) -> Cell | None:
        return self.inp.activation

    @property
    def lora(self) -> Cell | None:
        return self.inp.lora

    @property
    def speculative(self) -> Cell | None:
        return self.inp.speculative

    @property
    def budget_source(self) -> Source | None:
        """Where the requested and headroom rows come from (the total's source); None without them."""
        if self.requested_bytes is None or self.inp.total is None:
            return None
        return _source_of(self.inp.total)

    @property
    def requested(self) -> Cell | None:
        source = self.budget_source
        if source is None or self.requested_bytes is None:
            return None
        return Cell(self.requested_bytes, source, "total × gpu_memory_utilization")

    @property
    def headroom(self) -> Cell | None:
        source = self.budget_source
        if source is None or self.requested_bytes is None or self.inp.total is None:
            return None
        return Cell(self.inp.total.bytes - self.requested_bytes, source, "total − requested (outside the budget)")

    def rows(self) -> dict[str, Cell | None]:
        return {
            "total": self.total,
            "free_at_start": self.free_at_start,
            "requested": self.requested,
            "headroom": self.headroom,
            "weights": self.weights,
            "non_torch": self.non_torch,
            "cuda_graphs": self.cuda_graphs,
            "activation": self.activation,
            **({"lora": self.lora} if self.lora is not None else {}),
            **({"speculative": self.speculative} if self.speculative is not None else {}),
            "kv": self.kv,
        }


@dataclass(frozen=True, slots=True)
class LedgerRules:
    """The engine settings and version rules a ledger is worked out under."""

    gpu_memory_utilization: float
    cuda_graphs_in_budget: bool = True
    free_memory_preflight: bool = True
    requested_is_ceil: bool = True
    kv_cache_memory_bytes: int | None = None
    operating_reserve_bytes: int = 0

    @property
    def utilization_ratio(self) -> tuple[int, int]:
        """gpu_memory_utilization as an exact decimal fraction (numerator, denominator)."""
        return decimal_ratio(self.gpu_memory_utilization)


def requested_bytes(total: int, utilization: float, ceil: bool = True) -> int:
    """total × utilization, computed on the decimal value the user wrote (no float noise)."""
    num, den = decimal_ratio(utilization)
    return _requested(total, num, den, ceil)


def _requested(total: int, num: int, den: int, ceil: bool) -> int:
    return -(-total * num // den) if ceil else total * num // den


def _source_of(*cells: Cell | None) -> Source:
    for c in cells:
        if c is not None and c.source != "measured":
            break
    else:
        return "measured"
    sources = {c.source for c in cells if c is not None}
    if sources <= {"measured"}:
        return "measured"
    return "estimated" if "estimated" in sources else "derived"


def _sum(cells: tuple[Cell | None, ...]) -> int:
    total = 0
    for c in cells:
        if c is not None:
            total += c.bytes
    return total


def work_out_rank(inp: RankInput, rules: LedgerRules, ratio: tuple[int, int] | None = None) -> RankLedger:
    """The ledger of one rank under the given rules."""
    requested: int | None = None
    total = inp.total
    if total is not None and rules.kv_cache_memory_bytes is None:
        num, den = ratio or rules.utilization_ratio
        requested = _requested(total.bytes, num, den, rules.requested_is_ceil)
    problems: list[tuple[str, str]] = []
    if rules.kv_cache_memory_bytes is not None:
        kv = Cell(rules.kv_cache_memory_bytes, "measured", "--kv-cache-memory-bytes (manual)")
        problems += _manual_fit(inp, rules)
    elif inp.kv_room is not None:
        kv = inp.kv_room
        problems += _room_above_budget(inp, requested)
    elif requested is not None and total is not None:
        graphs = inp.cuda_graphs if rules.cuda_graphs_in_budget else None
        inside = (inp.weights, inp.non_torch, inp.activation, graphs, inp.lora, inp.speculative)
        kv_bytes = requested - _sum(inside)
        note = _KV_NOTE
        if inp.lora is not None or inp.speculative is not None:
            note += "".join(f" − {n}" for n, c in (("lora", inp.lora), ("draft", inp.speculative)) if c is not None)
        kv = Cell(kv_bytes, _source_of(total, *inside), note)
    else:
        kv = Cell(0, "default", "no total memory or KV room given")
        problems.append(("no_memory", f"rank {inp.label}: neither total memory nor KV room is known"))
    problems += _preflight(inp, requested, kv, rules)
    will_start = not any(code in _FATAL for code, _ in problems) if problems else True
    return RankLedger(inp, requested, kv, will_start, tuple(problems))


#: How a KV room's note starts when the room is a logged block count × the page (app.services.blocks_room)
ROOM_FROM_BLOCKS = "measured-derived"
_KV_NOTE = "requested − weights − non_torch − graphs − activation"
KV_NOTE = _KV_NOTE  # the derived KV cell's note (app.core.rank_columns makes the same cells)
source_of = _source_of
_FATAL = frozenset({"free_below_requested", "no_kv_memory", "manual_does_not_fit", "no_memory"})


def _preflight(inp: RankInput, requested: int | None, kv: Cell, rules: LedgerRules) -> list[tuple[str, str]]:
    """vLLM's start-up refusals for one rank, as results with plain-words reasons."""
    out: list[tuple[str, str]] = []
    free = inp.free_at_start
    if requested is not None and rules.free_memory_preflight and free is not None and free.bytes < requested:
        out.append(
            (
                "free_below_requested",
                f"rank {inp.label} will not start: {fmt_bytes(free.bytes)} free at start, "
                f"{fmt_bytes(requested)} requested",
            )
        )
    if kv.bytes <= 0 and rules.kv_cache_memory_bytes is None:
        out.append(
            (
                "no_kv_memory",
                f"rank {inp.label} will not start: no memory left for KV cache blocks ({fmt_bytes(kv.bytes)})",
            )
        )
    graphs, total = inp.cuda_graphs, inp.total
    headroom = None if requested is None or total is None else total.bytes - requested
    if not rules.cuda_graphs_in_budget and graphs is not None and headroom is not None and graphs.bytes > headroom:
        out.append(
            (
                "graphs_exceed_headroom",
                f"rank {inp.label}: CUDA graphs ({fmt_bytes(graphs.bytes)}) are captured outside the "
                f"budget and do not fit the {fmt_bytes(headroom)} headroom",
            )
        )
    return out


def _room_above_budget(inp: RankInput, requested: int | None) -> list[tuple[str, str]]:
    """A measured KV room larger than the rank's budget cannot be: vLLM sizes KV inside
    total × gpu_memory_utilization (seed 003's "131,072 blocks per GPU" of 80 KiB tokens is 160 GiB
    on an 80 GB card). Said, not fatal: the evidence is wrong, not the start-up."""
    room, total = inp.kv_room, inp.total
    if room is None or requested is None or total is None or room.bytes <= requested:
        return []
    return [
        (
            "kv_room_above_budget",
            f"rank {inp.label}: the KV room ({fmt_bytes(room.bytes)}) is more than the rank's budget "
            f"({fmt_bytes(requested)} of {fmt_bytes(total.bytes)} total): the evidence contradicts itself; "
            "check the GPU total, the utilization and the blocks or bytes the room came from",
        )
    ]


def _manual_fit(inp: RankInput, rules: LedgerRules) -> list[tuple[str, str]]:
    """With a manual KV size: non-KV rows + KV + operating reserve must fit free memory at start,
    and KV + operating reserve the rank's measured KV room (seed 001: a uniform 16 GiB is unsafe
    on a rank with 12.9 GiB of room, whatever the average)."""
    kv_bytes = rules.kv_cache_memory_bytes or 0
    room = inp.free_at_start or inp.total
    measured = inp.kv_room
    if measured is not None and kv_bytes + rules.operating_reserve_bytes > measured.bytes:
        return [
            (
                "manual_does_not_fit",
                f"rank {inp.label} will not fit --kv-cache-memory-bytes {kv_bytes}: {fmt_bytes(kv_bytes)} + "
                f"{fmt_bytes(rules.operating_reserve_bytes)} reserve is more than its measured KV room "
                f"({fmt_bytes(measured.bytes)})",
            )
        ]
    if room is None:
        return []
    need = _sum((inp.weights, inp.non_torch, inp.cuda_graphs, inp.activation, inp.lora, inp.speculative)) + kv_bytes
    need += rules.operating_reserve_bytes
    if need <= room.bytes:
        return []
    what = "free at start" if inp.free_at_start is not None else "total"
    return [
        (
            "manual_does_not_fit",
            f"rank {inp.label} will not fit --kv-cache-memory-bytes {kv_bytes}: needs {fmt_bytes(need)} "
            f"(rows + KV + {fmt_bytes(rules.operating_reserve_bytes)} reserve), has {fmt_bytes(room.bytes)} {what}",
        )
    ]


def work_out(ranks: tuple[RankInput, ...], rules: LedgerRules) -> tuple[RankLedger, ...]:
    """Every rank's ledger. A rank built from the same cell objects as a rank before it (the TP
    ranks of an estimated stage, the engines of a large DP plan, measured ranks with equal values)
    shares that computation, unless it found a problem, whose message names the rank."""
    ratio = rules.utilization_ratio
    out: list[RankLedger] = []
    seen: dict[tuple[int, ...], RankLedger] = {}
    for r in ranks:
        key = (
            id(r.total), id(r.free_at_start), id(r.weights), id(r.non_torch), id(r.cuda_graphs),
            id(r.activation), id(r.kv_room), id(r.lora), id(r.speculative),
        )  # fmt: skip  (the cells are alive in `ranks` for the whole loop, so their ids are stable)
        prev = seen.get(key)
        if prev is not None:
            out.append(RankLedger(r, prev.requested_bytes, prev.kv, prev.will_start))
            continue
        ledger = work_out_rank(r, rules, ratio)
        if not ledger.problems:
            seen[key] = ledger
        out.append(ledger)
    return tuple(out)
