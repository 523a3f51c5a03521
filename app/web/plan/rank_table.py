"""The plan page's rank table: every rank up to MAX_BARS; past that the notable ranks; in the
grouped form (`app.core.rank_groups`) one row per group of identical ranks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.json_rows import not_starting
from app.web.formatting import gib, intcomma
from app.web.plan import charts

RANK_COLUMNS = (
    ("total_bytes", "total"), ("free_at_start_bytes", "free at start"), ("requested_bytes", "requested"),
    ("headroom_bytes", "headroom"), ("weights_bytes", "weights"), ("non_torch_bytes", "non-torch"),
    ("cuda_graph_bytes", "CUDA graphs"), ("activation_bytes", "activation"), ("kv_bytes", "KV"),
    ("stranded_bytes", "stranded"),
)
RANK_LABELS = tuple(label for _, label in RANK_COLUMNS)
#: Rows shown only when a plan has them (issue 15: LoRA slots, the speculative draft), before KV.
OPTIONAL_COLUMNS = (("lora_row_bytes", "LoRA"), ("speculative_row_bytes", "draft"))


def rank_columns(result: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The rank table's columns: the fixed rows, plus each optional row some rank carries."""
    ranks = result["ranks"][:64]
    extra = tuple(c for c in OPTIONAL_COLUMNS if any(r.get(c[0]) is not None for r in ranks))
    if not extra:
        return RANK_COLUMNS
    at = next(i for i, (key, _) in enumerate(RANK_COLUMNS) if key == "kv_bytes")
    return (*RANK_COLUMNS[:at], *extra, *RANK_COLUMNS[at:])


@dataclass(frozen=True, slots=True)
class RankRow:
    """One row of the rank table, as display text: (text, source) per ledger column."""

    rank: str
    binding: bool
    cells: list[tuple[str, str]]
    blocks: str
    tokens: str
    starts: str


def rank_table(
    result: Mapping[str, Any], representative: list[Mapping[str, Any]] | None = None,
    columns: tuple[tuple[str, str], ...] | None = None,
) -> tuple[list[RankRow], str]:
    """Display rows of the rank table (cells as text + source) and a note; `columns`: the
    result's `rank_columns` when the caller has them (scanned once per page).

    Every rank up to MAX_BARS, else the notable ones: binding, median, largest-KV (the plan's
    `charts.notable_ranks`, passed as `representative` when the caller has them), not starting.
    """
    ranks: Sequence[Mapping[str, Any]] = result["ranks"]  # rows made when read (`JsonRows`): no list() of them
    note = ""
    columns = rank_columns(result) if columns is None else columns
    if result.get("ranks_form") == "grouped":
        return _group_rows(result, columns), _group_note(result)
    if len(ranks) > charts.MAX_BARS:
        notable = list(representative if representative is not None else charts.representatives_of(result, ranks))
        notable += [r for r in not_starting(ranks) if all(r is not n for n in notable)][:20]
        note = (f"{len(notable)} of {len(ranks):,} ranks shown: the binding, median and largest-KV ranks and any "
                "that will not start. The JSON twin lists every rank.")
        ranks = notable
    rows = []
    text = _gib_texts()
    for r in ranks:
        sources = r.get("sources") or {}
        rows.append(RankRow(
            rank=str(r.get("rank")), binding=bool(r.get("binding")),
            cells=[(text(r.get(key)), sources.get(key, "")) for key, _ in columns],
            blocks=intcomma(r.get("blocks")), tokens=intcomma(r.get("tokens")),
            starts="yes" if r.get("will_start") else "NO",
        ))
    return rows, note


def _gib_texts() -> Callable[[object], str]:
    """`gib`, memoised for one table (a per-call dict): its ranks repeat the same totals, weights
    and budgets, often on every row."""
    texts: dict[object, str] = {}

    def text(value: object) -> str:
        found = texts.get(value) if type(value) is int else None
        if found is None:
            found = gib(value)
            if type(value) is int:
                texts[value] = found
        return found

    return text


def rank_count(result: Mapping[str, Any]) -> int:
    """Every rank of the plan (the grouped form lists one per group)."""
    layout = result.get("layout")
    count = layout.get("ranks") if isinstance(layout, Mapping) else None
    return count if isinstance(count, int) else len(result.get("ranks") or [])


def _group_rows(result: Mapping[str, Any], columns: tuple[tuple[str, str], ...]) -> list[RankRow]:
    """One row per listed group of identical ranks (its representative's cells), the binding
    group first, then up to MAX_BARS more by KV (smallest first: they bind under a change)."""
    ranks, groups = result["ranks"], result.get("rank_groups") or []
    order = sorted(range(len(ranks)), key=lambda i: (not ranks[i].get("binding"), ranks[i].get("kv_bytes") or 0))
    rows = []
    text = _gib_texts()
    for i in order[: charts.MAX_BARS]:
        r, group = ranks[i], groups[i] if i < len(groups) else {}
        sources = r.get("sources") or {}
        count = int(group.get("count") or 1)
        rows.append(RankRow(
            rank=f"{r.get('rank')} ({intcomma(count)} ranks: {group.get('ranks')})" if count > 1
            else str(r.get("rank")),
            binding=bool(r.get("binding")),
            cells=[(text(r.get(key)), sources.get(key, "")) for key, _ in columns],
            blocks=intcomma(r.get("blocks")), tokens=intcomma(r.get("tokens")),
            starts="yes" if r.get("will_start") else "NO",
        ))  # fmt: skip
    return rows


def _group_note(result: Mapping[str, Any]) -> str:
    groups = result.get("rank_groups") or []
    shown = min(len(groups), charts.MAX_BARS)
    omitted = int(result.get("rank_groups_omitted") or 0)
    note = (f"{rank_count(result):,} ranks in {len(groups) + omitted:,} groups of identical ranks; {shown:,} groups "
            "shown (the binding group, then the least KV first), each as its first rank with the positions it covers.")
    if omitted:
        note += f" {omitted:,} groups with more KV are left out of the JSON too; the histogram counts every rank."
    return note
