"""The per-rank part of a plan's JSON result: `ranks` (in full or grouped), `rank_groups`,
`rank_distribution` and the uniform budget's ranks (keys a contract, as in app.core.report).

A slider tick on a plan of many measured ranks reads them from the result's columns
(app.core.rank_columns, app.core.admission.RankAdmissions, app.core.budget.RankBudgets): in the
full form each rank's JSON is a copy of a template made once per set of ranks with the values a
tick moves written in; in the grouped form only the listed groups' representatives are made.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import repeat
from operator import sub
from typing import Any

from app.core.admission import RankAdmissions
from app.core.budget import RankBudgets, UniformBudget
from app.core.json_rows import JsonRows
from app.core.ledger import Cell, RankLedger
from app.core.plan import PlanResult
from app.core.rank_columns import (
    RankColumns,
    RankLedgers,
    index_of,
    inputs_of,
    kv_column,
    kv_order,
    label_positions,
)
from app.core.rank_groups import FULL_RANKS_MAX, MAX_GROUPS, group_indexes, group_json, histogram, shown_groups, spread
from app.core.vllm_flags import uniform_budget_flag

JSON = dict[str, Any]


def _val(cell: Cell | None) -> int | None:
    return None if cell is None else cell.bytes


def rank_json(
    lg: RankLedger, blocks: int, tokens: int, raw: int | None, stranded: int, binding: bool, index: int = 0
) -> JSON:
    """One rank's JSON: every ledger row in bytes (None when unknown) and where each came from.

    ``index`` is the rank's integer position in the plan's ``ranks`` list; ``label`` and ``rank``
    are its name (a log's worker label such as "TP3" or "PP1_TP0", else the position as text).

    Reads the ledger's cells directly (no intermediate Cell objects for requested and headroom):
    this runs for every rank of every plan.
    """
    inp = lg.inp
    total, requested, derived_source = inp.total, lg.requested_bytes, lg.budget_source
    out: JSON = {"rank": inp.label}
    sources: dict[str, str] = {}
    for key, cell in (("total_bytes", total), ("free_at_start_bytes", inp.free_at_start)):
        out[key] = None if cell is None else cell.bytes
        if cell is not None:
            sources[key] = cell.source
    if derived_source is None or total is None or requested is None:
        out["requested_bytes"] = out["headroom_bytes"] = None
    else:
        out["requested_bytes"], out["headroom_bytes"] = requested, total.bytes - requested
        sources["requested_bytes"] = sources["headroom_bytes"] = derived_source
    for key, cell in (
        ("weights_bytes", inp.weights), ("non_torch_bytes", inp.non_torch), ("cuda_graph_bytes", inp.cuda_graphs),
        ("activation_bytes", inp.activation), ("kv_bytes", lg.kv),
        ("lora_row_bytes", inp.lora), ("speculative_row_bytes", inp.speculative),
    ):
        out[key] = None if cell is None else cell.bytes
        if cell is not None:
            sources[key] = cell.source
    out.update(
        index=index,
        label=inp.label,
        blocks=blocks,
        tokens=tokens,
        raw_tokens=raw,
        stranded_bytes=stranded,
        will_start=lg.will_start,
        binding=binding,
        sources=sources,
    )
    return out


def _extras_json(result: PlanResult, index: int) -> JSON:
    """The rank's LoRA / draft estimates (issue 15's contract keys), None when the feature is off.

    ``lora_bytes``: the adapter slots vLLM preallocates on this rank (app.core.lora), whatever the
    ledger rows hold; ``lora_row_bytes`` is what the ``lora`` row subtracts (0 of the slots when the
    weights are measured: "Model loading took" includes them)."""
    extra = result.extras[index] if index < len(result.extras) else None
    return {
        "lora_bytes": extra.lora_bytes if extra else None,
        "lora_profile_bytes": extra.lora_profile_bytes if extra else None,
        "speculative_bytes": extra.speculative_bytes if extra else None,
    }


def budget_json(
    budget: UniformBudget | None, result: PlanResult, labels: set[str] | None = None, lazy: bool = False
) -> JSON | None:
    """The uniform budget; `labels`: list only these ranks (the grouped form's representatives);
    `lazy`: its ranks made when read (`JsonRows`)."""
    if budget is None:
        return None
    engine = result.plan.engine
    conc = result.rkv.max_concurrency(budget.blocks, engine.max_model_len, engine.max_num_batched_tokens)
    deployed, why = uniform_budget_flag(result)
    return {
        "in_flags": deployed is not None,
        "in_flags_reason": why,
        "kv_cache_memory_bytes": budget.kv_cache_memory_bytes,
        "blocks": budget.blocks,
        "tokens": budget.tokens,
        "stranded_bytes": budget.stranded_bytes,
        "min_bytes": budget.min_bytes,
        "median_bytes": budget.median_bytes,
        "max_bytes": budget.max_bytes,
        "min_over_median": budget.min_over_median,
        "binding_rank": budget.binding_rank,
        "concurrency_at_max_model_len": int(conc),
        "flag": budget.flag,
        "ranks": _budget_ranks(budget, labels, lazy),
    }


def _budget_ranks(budget: UniformBudget, labels: set[str] | None, lazy: bool = False) -> Sequence[JSON]:
    """Each rank's room, safe and stranded bytes (only the ranks labelled `labels` when given),
    from the budget's columns when it has them (no `RankBudget` per rank; `lazy`: `JsonRows`)."""
    ranks = budget.ranks
    if lazy and labels is None and isinstance(ranks, RankBudgets):
        return JsonRows(len(ranks), lambda i: _budget_rank(ranks, i), lambda: _budget_columns(ranks, None))
    return _budget_columns(ranks, labels) if isinstance(ranks, RankBudgets) else [
        {"rank": r.label, "room_bytes": r.room_bytes, "safe_bytes": r.safe_bytes, "stranded_bytes": r.stranded_bytes}
        for r in ranks if labels is None or r.label in labels
    ]  # fmt: skip


def _budget_columns(ranks: RankBudgets, labels: set[str] | None) -> list[JSON]:
    """`_budget_ranks` from the budget's columns."""
    reserve, uniform, names = ranks.reserve, ranks.uniform, ranks.labels
    rows = zip(names, ranks.rooms, strict=True)
    if labels is not None:
        rows = zip([n for n in names if n in labels], [ranks.rooms[i] for i, n in enumerate(names) if n in labels],
                   strict=True)  # fmt: skip
    over = uniform + reserve  # safe > uniform ⇔ room > uniform + reserve
    return [
        {"rank": label, "room_bytes": room, "safe_bytes": room - reserve,
         "stranded_bytes": room - over if room > over else 0}
        for label, room in rows
    ]  # fmt: skip


def _budget_rank(ranks: RankBudgets, i: int) -> JSON:
    """`_budget_ranks`' row of rank ``i``."""
    room, over = ranks.rooms[i], ranks.uniform + ranks.reserve
    return {"rank": ranks.labels[i], "room_bytes": room, "safe_bytes": room - ranks.reserve,
            "stranded_bytes": room - over if room > over else 0}  # fmt: skip


def _distribution(result: PlanResult, binding: int | None) -> JSON:
    ledgers = result.ledgers
    order, ordered = kv_order(ledgers)
    memo: dict[str, Any] = ledgers.columns.memo if isinstance(ledgers, RankLedgers) else {}
    if "spreads" not in memo:  # free and total memory do not move with a knob: once per set of ranks
        inputs = inputs_of(ledgers)
        memo["spreads"] = (spread([_val(r.free_at_start) for r in inputs]), spread([_val(r.total) for r in inputs]))
    frees, totals = memo["spreads"]
    return {
        "ranks": len(ledgers),
        "kv_bytes": spread(ordered, ordered),
        "kv_bytes_histogram": histogram(ordered, ordered=ordered),
        "free_at_start_bytes": frees,
        "total_bytes": totals,
        "binding_rank": result.admission.binding_rank,
        "binding_index": binding,
        # the full form's binding, median-KV and largest-KV ranks, as the page's charts pick them
        "representative_indexes": _representatives(order, binding) if len(ledgers) <= FULL_RANKS_MAX else None,
    }


def _representatives(order: Sequence[int], binding: int | None) -> list[int]:
    """Positions of the binding rank (else the least-KV one), the median-KV and the largest-KV rank,
    distinct and in that order (`order`: positions stably by KV)."""
    if not order:
        return []
    picks: list[int] = []
    for i in (order[0] if binding is None else binding, order[len(order) // 2], order[-1]):
        if i not in picks:
            picks.append(i)
    return picks


def ranks_json(result: PlanResult, lazy: bool = False) -> JSON:
    """`ranks` in full (up to FULL_RANKS_MAX ranks; `lazy`: rows made when read, `JsonRows`) or
    grouped (`app.core.rank_groups`), with `ranks_form`, `rank_groups`, `rank_groups_omitted`,
    `rank_distribution` and `binding_index`."""
    ledgers, adm = result.ledgers, result.admission
    binding = index_of(ledgers, adm.binding_rank)
    kvs = kv_column(ledgers)
    out: JSON = {"rank_distribution": _distribution(result, binding), "binding_index": binding}
    if len(ledgers) <= FULL_RANKS_MAX:
        out["ranks"] = _full_ranks(result, lazy)
        return {**out, "ranks_form": "full", "rank_groups": None, "rank_groups_omitted": 0}
    groups, total = _shown_groups(result, kvs, binding)
    ras = adm.ranks
    out["ranks"] = [
        rank_json(ledgers[i], ras[i].blocks, ras[i].tokens, ras[i].raw_tokens, ras[i].stranded_bytes, ras[i].binding, i)
        | _extras_json(result, i)
        for i, _ in groups
    ]
    out["rank_groups"] = [group_json(members, j) for j, (_, members) in enumerate(groups)]
    out["rank_groups_omitted"] = total - len(groups)
    return {**out, "ranks_form": "grouped"}


def _shown_groups(
    result: PlanResult, kvs: Sequence[int], binding: int | None
) -> tuple[list[tuple[int, Sequence[int]]], int]:
    """The listed groups as (representative, members) and how many groups there are."""
    ledgers, ras = result.ledgers, result.admission.ranks
    if not isinstance(ledgers, RankLedgers):
        keys = [
            (lg.inp.total, lg.inp.free_at_start, lg.inp.weights, lg.inp.non_torch, lg.inp.cuda_graphs,
             lg.inp.activation, lg.inp.kv_room, lg.inp.lora, lg.inp.speculative, lg.kv, lg.requested_bytes,
             lg.will_start, ra.blocks, ra.raw_tokens)
            for lg, ra in zip(ledgers, ras, strict=True)
        ]  # fmt: skip  (tokens and stranded bytes follow from blocks and KV)
        every = group_indexes(keys, binding)
        return list(shown_groups(every, lambda i: kvs[i])), len(every)
    # Equal input cells give equal ledgers, blocks and tokens (rank_columns.rank_columns): the groups
    # are the columns'; the binding rank represents its own group (rank_groups.group_indexes).
    groups, group_of = ledgers.columns.groups, ledgers.columns.group_of
    held, rep = (group_of[binding], binding) if binding is not None else (-1, 0)
    reps = [rep if g == held else members[0] for g, members in enumerate(groups)]
    keep: Sequence[int] = range(len(groups))
    if len(groups) > MAX_GROUPS:  # rank_groups.shown_groups: the least KV first (nsmallest is sorted()[:n])
        least = [kvs[r] for r in reps]
        keep = sorted(heapq.nsmallest(MAX_GROUPS, keep, key=least.__getitem__))
    return [(reps[g], groups[g]) for g in keep], len(groups)


def _full_ranks(result: PlanResult, lazy: bool = False) -> Sequence[JSON]:
    """Every rank's JSON: from per-rank templates when the result has columns (`lazy`: as
    `JsonRows`, each row made when read, where the templates exist already), else rank_json."""
    ledgers, ras = result.ledgers, result.admission.ranks
    if (isinstance(ledgers, RankLedgers) and isinstance(ras, RankAdmissions) and ledgers.sources and not result.extras
            and not ras.per_stage):  # uneven PP stages: each row from its stage's page (RankAdmissions.row)
        rows = _ColumnRows(result, ledgers, ras)
        if not lazy or _template_key(ledgers) not in ledgers.columns.memo:
            # Rows made when read hold their columns: only where these outlive the tick (a stored
            # base's, whose templates an earlier tick made), else a cached view would keep a what-if's
            # ranks and templates (a prefill-chunk tick makes new ones) where the list keeps its rows.
            return rows.every()
        return JsonRows(len(ledgers), rows.row, rows.every, rows.first_binding(), rows.not_starting())
    return [
        rank_json(lg, ra.blocks, ra.tokens, ra.raw_tokens, ra.stranded_bytes, ra.binding, i) | _extras_json(result, i)
        for i, (lg, ra) in enumerate(zip(ledgers, ras, strict=True))
    ]


class _ColumnRows:
    """`_full_ranks` from templates: a shallow copy of each rank's template (made once per set of
    ranks) with the values a knob moves written in, from columns; the ranks the ledger worked out
    itself (`ledgers.slow`) by `rank_json`. A rank's ``sources`` is the one dict its template holds,
    shared by every tick's result (read-only, like the stored base it comes from). A copy and eight
    stores cost half what one 24-key dict display does (bench/RESULTS-plans.md). `every` makes
    all rows by column passes, `row` one of them by the same formulas (`RankKV.tokens_for_blocks`
    and `raw_tokens` are `tokens_column` and `raw_tokens_column` of one value)."""

    __slots__ = ("check", "floor", "label", "ledgers", "ras", "rkv")

    def __init__(self, result: PlanResult, ledgers: RankLedgers, ras: RankAdmissions) -> None:
        # not the result: a cached view's rows keep only their columns (not its warnings, plan, ...)
        assert not result.extras  # the columns path: every rank's LoRA / draft extras are None
        self.rkv, self.ledgers, self.ras = result.rkv, ledgers, ras
        self.floor, self.label, self.check = ras.floor_kv, ras.binding_label, ras.kv_bytes

    def marked(self) -> list[int]:
        """The positions of the binding ranks (every rank labelled as the binding one)."""
        return _labelled(self.ledgers, self.label)

    def first_binding(self) -> int | None:
        marked = self.marked()
        return min(marked) if marked else None

    def not_starting(self) -> list[int]:
        """Only a rank the ledger worked out itself can fail to start (`RankLedgers.will_start`)."""
        return sorted(i for i, lg in self.ledgers.slow.items() if not lg.will_start)

    def every(self) -> list[JSON]:
        rkv, ledgers, ras, floor, check = self.rkv, self.ledgers, self.ras, self.floor, self.check
        # every rank at the floor or above (the floor is the least KV): one C-level pass
        stranded = (list(map(sub, check, repeat(floor))) if check and min(check) >= floor
                    else [c - floor if c > floor else 0 for c in check])  # fmt: skip
        out: list[JSON] = []
        append = out.append
        for template, asked, head, kv, blocks, tokens, raw, strand in zip(
            _templates(ledgers), ledgers.requested, map(sub, ledgers.columns.totals, ledgers.requested),
            ledgers.kv_bytes, ras.blocks, rkv.tokens_column(ras.blocks), rkv.raw_tokens_column(check), stranded,
            strict=True,
        ):  # fmt: skip
            row = template.copy()  # its "binding" is False: the binding ranks are marked below
            row["requested_bytes"] = asked
            row["headroom_bytes"] = head  # a rank outside `slow` has its total and its request
            row["kv_bytes"] = kv
            row["blocks"] = blocks
            row["tokens"] = tokens
            row["raw_tokens"] = raw
            row["stranded_bytes"] = strand
            append(row)
        for i in self.marked():
            out[i]["binding"] = True
        for i in ledgers.slow:  # a rank with a start-up problem: the ledger's own cells
            out[i] = self._slow_row(i)
        return out

    def row(self, i: int) -> JSON:
        """Rank ``i``'s row (0 <= i < len), as `every()[i]`."""
        ledgers, ras, c = self.ledgers, self.ras, self.check[i]
        if i in ledgers.slow:
            return self._slow_row(i)
        asked, blocks, rkv = ledgers.requested[i], ras.blocks[i], self.rkv
        assert asked is not None  # a rank outside `slow` has its total and its request
        row = _templates(ledgers)[i].copy()
        row["requested_bytes"] = asked
        row["headroom_bytes"] = ledgers.columns.totals[i] - asked
        row["kv_bytes"] = ledgers.kv_bytes[i]
        row["blocks"] = blocks
        row["tokens"] = rkv.tokens_for_blocks(blocks)
        row["raw_tokens"] = rkv.raw_tokens(c)
        row["stranded_bytes"] = c - self.floor if c > self.floor else 0
        if self.label is not None and ledgers.columns.labels[i] == self.label:
            row["binding"] = True
        return row

    def _slow_row(self, i: int) -> JSON:
        lg, c, blocks, rkv, floor = self.ledgers.slow[i], self.check[i], self.ras.blocks[i], self.rkv, self.floor
        return rank_json(lg, blocks, rkv.tokens_for_blocks(blocks), rkv.raw_tokens(c), c - floor if c > floor else 0,
                         self.ras.labels[i] == self.label, i) | _NO_EXTRAS  # fmt: skip


#: `_extras_json` of a result without extras (the columns path's).
_NO_EXTRAS: JSON = {"lora_bytes": None, "lora_profile_bytes": None, "speculative_bytes": None}


def _labelled(ledgers: RankLedgers, label: str | None) -> list[int]:
    """The positions of the ranks labelled `label` (one lookup when every label differs)."""
    if label is None:
        return []
    positions = label_positions(ledgers.columns)
    if len(positions) == len(ledgers):
        return [positions[label]] if label in positions else []
    return [i for i, name in enumerate(ledgers.columns.labels) if name == label]


def _template_key(ledgers: RankLedgers) -> str:
    return f"templates-{ledgers.sources is ledgers.columns.kv_sources}"


def _templates(ledgers: RankLedgers) -> list[JSON]:
    """Each rank's JSON with its knob-independent values (made once per set of ranks and KV
    sources): rank_json of the rank's ledger shape, without LoRA / draft extras."""
    columns: RankColumns = ledgers.columns
    key = _template_key(ledgers)
    found: list[JSON] | None = columns.memo.get(key)
    if found is None:
        none = {"lora_bytes": None, "lora_profile_bytes": None, "speculative_bytes": None}
        found = [
            rank_json(RankLedger(inp, 0, Cell(0, source, note), True), 0, 0, None, 0, False, i) | none
            for i, (inp, source, note) in enumerate(zip(columns.ranks, ledgers.sources, columns.kv_notes, strict=True))
        ]
        columns.memo[key] = found
    return found
