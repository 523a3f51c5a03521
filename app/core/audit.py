"""Ledger audit: compare two ledgers of one deployment, and raise alerts on one ledger.

Theory of operation. A ledger is a snapshot of per-rank memory rows (bytes, integers, None
where unknown) plus the evidence that produced them (vLLM version, driver, layout, ...).
``diff_ledgers`` matches ranks by label, else by their TP/PP/DP place (vLLM renames its process
prefixes between releases), subtracts every row, derives the change in KV tokens,
lists the evidence keys that changed, and turns the pattern into plain words:

* a KV pool that shrank while ``cuda_graph_bytes``/``activation_bytes`` grew by about as much is
  a more complete profile of the same memory, not a leak;
* a rank whose free memory at start dropped has another process (or a leftover) on its GPU;
* vLLM crossing 0.21 changes the accounting: CUDA-graph memory is subtracted from the budget.

``alerts`` checks one ledger: free memory at start spread across ranks, each rank's
post-warmup reserve against the operating policy (seed 001: below policy, the deployment
should fail at boot), a rank far from the median, and free memory below the requested budget.

Pure: no I/O, no web/DB imports. Never adds ranks together to decide anything.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

EvidenceValue = str | int | float | None

ROW_FIELDS: tuple[str, ...] = (
    "total_bytes",
    "free_at_start_bytes",
    "requested_bytes",
    "weights_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "activation_bytes",
    "kv_bytes",
    "num_gpu_blocks",
    "kv_tokens",
    "cuda_graph_estimate_bytes",
)
#: Rows added after ledgers were first stored: a content hash leaves them out while unknown, so a
#: ledger stored before they existed keeps its hash.
LATER_ROW_FIELDS: frozenset[str] = frozenset({"cuda_graph_estimate_bytes"})
# Rows whose growth moves memory out of the KV pool when the profile becomes more complete.
PROFILE_ROWS: tuple[str, ...] = ("cuda_graph_bytes", "activation_bytes")
# Rows checked for a rank far from the median.
OUTLIER_ROWS: tuple[str, ...] = (
    "kv_bytes",
    "weights_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "activation_bytes",
)
GIB = 1024**3
MIB = 1024**2
CUDA_GRAPH_SUBTRACTED_SINCE = (0, 21)


@dataclass(frozen=True)
class LedgerRow:
    """One rank's measured rows. ``rank`` is the label ranks are matched by ("0", "dp1-tp3")."""

    rank: str
    total_bytes: int | None = None
    free_at_start_bytes: int | None = None
    requested_bytes: int | None = None
    weights_bytes: int | None = None
    non_torch_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    activation_bytes: int | None = None
    kv_bytes: int | None = None
    num_gpu_blocks: int | None = None
    kv_tokens: int | None = None
    # vLLM's 'Estimated CUDA graph memory' (v0.21+, or opted in before); cuda_graph_bytes is the actual.
    cuda_graph_estimate_bytes: int | None = None

    def value(self, row: str) -> int | None:
        if row not in ROW_FIELDS:
            raise KeyError(f"unknown ledger row {row!r}")
        result: int | None = getattr(self, row)
        return result


@dataclass(frozen=True)
class LedgerSnapshot:
    """A ledger as the audit sees it: ranks in order, and the evidence by key."""

    ranks: tuple[LedgerRow, ...]
    evidence: Mapping[str, EvidenceValue] = field(default_factory=dict)
    label: str = ""


@dataclass(frozen=True)
class RowDelta:
    row: str
    before: int | None
    after: int | None

    @property
    def delta(self) -> int | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


@dataclass(frozen=True)
class RankDiff:
    """Every row of one rank, before and after; ``status`` says if the rank is in both."""

    rank: str
    status: Literal["both", "added", "removed"]
    rows: tuple[RowDelta, ...]
    tokens: RowDelta

    def row(self, name: str) -> RowDelta:
        for delta in self.rows:
            if delta.row == name:
                return delta
        raise KeyError(f"unknown ledger row {name!r}")


@dataclass(frozen=True)
class EvidenceChange:
    key: str
    before: EvidenceValue
    after: EvidenceValue


@dataclass(frozen=True)
class LedgerDiff:
    """``a`` → ``b``. ``min_kv_bytes``/``min_kv_tokens`` follow the binding (smallest) rank;
    ``concurrency`` is full-length requests the binding rank holds (tokens ÷ max_model_len),
    before and after, when ``max_model_len`` was given and tokens are known."""

    ranks: tuple[RankDiff, ...]
    evidence_changes: tuple[EvidenceChange, ...]
    min_kv_bytes: RowDelta
    min_kv_tokens: RowDelta
    readings: tuple[str, ...]
    concurrency: tuple[float | None, float | None] = (None, None)

    def rank(self, label: str) -> RankDiff:
        for diff in self.ranks:
            if diff.rank == label:
                return diff
        raise KeyError(f"no rank {label!r} in this diff")


@dataclass(frozen=True)
class Alert:
    code: str
    message: str
    rank: str | None = None


def format_bytes(n: int) -> str:
    """Human bytes for readings: GiB with two decimals from 1 GiB up, else MiB."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n >= GIB:
        return f"{sign}{n / GIB:.2f} GiB"
    return f"{sign}{n / MIB:.1f} MiB"


def parse_vllm_version(text: EvidenceValue) -> tuple[int, int] | None:
    """(major, minor) from "0.21.0", "v0.20.1rc2"; None for unknown or unversioned dev builds."""
    if not isinstance(text, str):
        return None
    match = re.match(r"\s*v?(\d+)\.(\d+)", text)
    if match is None:
        return None
    version = (int(match.group(1)), int(match.group(2)))
    if version == (0, 1) and "dev" in text:  # source builds report 0.1.devN+g<commit>
        return None
    return version


def rank_tokens(row: LedgerRow, block_size: int | None, bytes_per_token: int | None) -> int | None:
    """KV tokens on a rank: measured, else blocks × block size, else KV bytes ÷ bytes per token."""
    if row.kv_tokens is not None:
        return row.kv_tokens
    if row.num_gpu_blocks is not None and block_size:
        return row.num_gpu_blocks * block_size
    if row.kv_bytes is not None and bytes_per_token:
        return row.kv_bytes // bytes_per_token
    return None


def post_warmup_reserve_bytes(row: LedgerRow) -> int | None:
    """Memory left on the GPU once the server is warm, with the KV pool allocated:

    ``free_at_start − weights − non_torch − cuda_graphs − activation − kv``

    ``free_at_start`` (not ``total``) so memory held by other processes counts against the
    reserve; ``total`` is used only when free memory at start was not measured. None when any
    term is unknown.
    """
    base = row.free_at_start_bytes if row.free_at_start_bytes is not None else row.total_bytes
    terms = (
        row.weights_bytes,
        row.non_torch_bytes,
        row.cuda_graph_bytes,
        row.activation_bytes,
        row.kv_bytes,
    )
    if base is None or any(term is None for term in terms):
        return None
    return base - sum(term for term in terms if term is not None)


def _block_size(snapshot: LedgerSnapshot) -> int | None:
    value = snapshot.evidence.get("block_size")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _rank_diff(
    label: str,
    before: LedgerRow | None,
    after: LedgerRow | None,
    a: LedgerSnapshot,
    b: LedgerSnapshot,
    bytes_per_token: int | None,
) -> RankDiff:
    rows = tuple(
        RowDelta(
            name,
            before.value(name) if before is not None else None,
            after.value(name) if after is not None else None,
        )
        for name in ROW_FIELDS
    )
    tokens = RowDelta(
        "tokens",
        rank_tokens(before, _block_size(a), bytes_per_token) if before is not None else None,
        rank_tokens(after, _block_size(b), bytes_per_token) if after is not None else None,
    )
    status: Literal["both", "added", "removed"] = (
        "both" if before is not None and after is not None else "added" if before is None else "removed"
    )
    return RankDiff(label, status, rows, tokens)


def _min_known(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def diff_ledgers(
    a: LedgerSnapshot,
    b: LedgerSnapshot,
    *,
    bytes_per_token: int | None = None,
    max_model_len: int | None = None,
    free_drop_threshold_bytes: int = 256 * MIB,
) -> LedgerDiff:
    """Compare ledger ``a`` (before) with ``b`` (after), rank by rank (matched by `paired_ranks`).

    Tokens per rank come from measured ``kv_tokens``, else blocks × the evidence's
    ``block_size``, else KV bytes ÷ ``bytes_per_token`` when given."""
    ranks = tuple(
        _rank_diff(label, before, after, a, b, bytes_per_token) for label, before, after in paired_ranks(a, b)
    )
    keys = list(a.evidence) + [key for key in b.evidence if key not in a.evidence]
    changes = tuple(
        EvidenceChange(key, a.evidence.get(key), b.evidence.get(key))
        for key in keys
        if a.evidence.get(key) != b.evidence.get(key)
    )
    min_kv = RowDelta(
        "min_kv_bytes", _min_known([r.kv_bytes for r in a.ranks]), _min_known([r.kv_bytes for r in b.ranks])
    )
    min_tokens = RowDelta(
        "min_kv_tokens",
        _min_known([d.tokens.before for d in ranks]),
        _min_known([d.tokens.after for d in ranks]),
    )
    # A value recorded on one side only is new evidence, not a change to read anything into.
    known = [c for c in changes if c.before is not None and c.after is not None]
    readings = _evidence_readings(known) + _rank_readings(ranks, free_drop_threshold_bytes)
    concurrency = (
        _concurrency(min_tokens.before, max_model_len),
        _concurrency(min_tokens.after, max_model_len),
    )
    return LedgerDiff(ranks, changes, min_kv, min_tokens, tuple(readings), concurrency)


_INDEX = re.compile(r"(?:^|_)(DP|PP|TP)(\d+)(?=$|_)")
_GLOBAL_RANK = re.compile(r"(?:^|_)(?:rank=)?(\d+)$")


def _tp(snapshot: LedgerSnapshot) -> int | None:
    value = snapshot.evidence.get("tp")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def rank_position(label: str, only: bool, tp: int | None) -> tuple[int, int, int] | None:
    """Where a rank sits, (DP, PP, TP), from its label; None when the label does not say.

    vLLM renamed its process prefixes across releases (VLLM-NOTES §1.11): one GPU worker is
    `(VllmWorker rank=0 …)`, `(VllmWorker TP0 …)`, `(Worker_TP0 …)` or `(Worker_TP0_EP0 …)` by release,
    and a one-GPU engine is `EngineCore_DP0` before #36822 (≈v0.18) and `EngineCore` after. `rank=N`
    is the worker's rank in its engine, `pp_rank × tp + tp_rank` (`initialize_model_parallel` lays
    ranks out as (DP, PP, PCP, TP), TP fastest: vllm/distributed/parallel_state.py:1592 @28be48fa9,
    with PCP 1; a bare "N" is read the same way); the one rank of a one-rank ledger whose label
    states no index (`EngineCore`, `Worker`, `driver`) is (DP, 0, 0)."""
    found = {k: int(v) for k, v in _INDEX.findall(label)}
    dp = found.get("DP", 0)
    if "TP" in found or "PP" in found:
        return dp, found.get("PP", 0), found.get("TP", 0)
    whole = _GLOBAL_RANK.search(label) if not label.startswith(("pid=", "EngineCore")) else None
    if whole is not None:  # `rank=N` (or a bare index): PP 1 unless the ledger's TP says otherwise
        n = int(whole[1])
        return (dp, n // tp, n % tp) if tp else (dp, 0, n)
    return (dp, 0, 0) if only else None


def paired_labels(
    a: Sequence[str], b: Sequence[str], tp_a: int | None = None, tp_b: int | None = None
) -> list[tuple[str, str | None, str | None]]:
    """Rank labels of two ledgers (or plans) side by side, (shown label, label in a, label in b):
    the same label, else the same (DP, PP, TP) place (`rank_position`: a vLLM upgrade renames the
    processes, not the GPUs), shown as "old → new"; what matches neither way is one side's only."""
    common = set(a) & set(b)

    def positions(labels: Sequence[str], tp: int | None) -> dict[tuple[int, int, int], str]:
        seen: dict[tuple[int, int, int], list[str]] = {}
        for label in labels:
            if label not in common:
                pos = rank_position(label, len(labels) == 1, tp)
                if pos is not None:
                    seen.setdefault(pos, []).append(label)
        return {pos: found[0] for pos, found in seen.items() if len(found) == 1}

    mine, theirs = positions(a, tp_a), positions(b, tp_b)
    renamed = {label: theirs[pos] for pos, label in mine.items() if pos in theirs}
    taken = set(renamed.values())
    out: list[tuple[str, str | None, str | None]] = []
    for label in a:
        new = label if label in common else renamed.get(label)
        out.append((label if new in (None, label) else f"{label} → {new}", label, new))
    out += [(label, None, label) for label in b if label not in common and label not in taken]
    return out


def paired_ranks(
    a: LedgerSnapshot, b: LedgerSnapshot
) -> list[tuple[str, LedgerRow | None, LedgerRow | None]]:
    """Ranks of ``a`` and ``b`` side by side (`paired_labels`)."""
    before = {row.rank: row for row in a.ranks}
    after = {row.rank: row for row in b.ranks}
    pairs = paired_labels([r.rank for r in a.ranks], [r.rank for r in b.ranks], _tp(a), _tp(b))
    return [(shown, before.get(x) if x else None, after.get(y) if y else None) for shown, x, y in pairs]


def _concurrency(tokens: int | None, max_model_len: int | None) -> float | None:
    if tokens is None or not max_model_len:
        return None
    return tokens / max_model_len


def _evidence_readings(changes: Sequence[EvidenceChange]) -> list[str]:
    readings: list[str] = []
    for change in changes:
        old, new = change.before, change.after
        if change.key == "vllm_version":
            old_v, new_v = parse_vllm_version(old), parse_vllm_version(new)
            text = f"vLLM {old} → {new}"
            if old_v is not None and new_v is not None:
                if old_v < CUDA_GRAPH_SUBTRACTED_SINCE <= new_v:
                    text += ": CUDA-graph memory now subtracted from the budget"
                elif new_v < CUDA_GRAPH_SUBTRACTED_SINCE <= old_v:
                    text += (
                        ": CUDA-graph memory no longer subtracted from the budget "
                        "(it comes out of the headroom after KV sizing)"
                    )
            readings.append(text)
        elif change.key in ("kv_cache_dtype", "block_size"):
            readings.append(f"{change.key} {old} → {new}: bytes per token changed, compare tokens, not bytes")
        elif change.key in ("tp", "pp", "dp", "ep"):
            readings.append(
                f"{change.key.upper()} {old} → {new}: the layout changed, so each rank holds a different "
                "shard; rows are not comparable rank for rank"
            )
        elif change.key == "gpu_memory_utilization":
            readings.append(f"gpu_memory_utilization {old} → {new}: the budget moved, and KV with it")
        elif change.key == "kv_cache_memory_bytes":
            readings.append(f"kv_cache_memory_bytes {old} → {new}: the KV pool was set by hand")
    return readings


def _rank_reading(diff: RankDiff, free_drop_threshold_bytes: int) -> list[tuple[str, str]]:
    """(kind, detail) pairs for one rank present in both ledgers."""
    found: list[tuple[str, str]] = []
    free = diff.row("free_at_start_bytes").delta
    if free is not None and free < 0 and -free >= free_drop_threshold_bytes:
        found.append(("free_drop", f"rank {diff.rank} lost {format_bytes(-free)}"))
    kv = diff.row("kv_bytes").delta
    if kv is None or kv >= 0:
        return found
    grown = {name: diff.row(name).delta or 0 for name in PROFILE_ROWS}
    grown = {name: delta for name, delta in grown.items() if delta > 0}
    if grown and 2 * sum(grown.values()) >= -kv:
        rows = " and ".join(f"{name} +{format_bytes(delta)}" for name, delta in grown.items())
        found.append(("profile", f"rank {diff.rank}: KV {format_bytes(kv)} while {rows}"))
    elif not found:
        found.append(("unexplained", f"rank {diff.rank}: KV {format_bytes(kv)}"))
    return found


def _rank_readings(ranks: Sequence[RankDiff], free_drop_threshold_bytes: int) -> list[str]:
    grouped: dict[str, list[str]] = {}
    missing = [d.rank for d in ranks if d.status != "both"]
    for diff in ranks:
        if diff.status == "both":
            for kind, detail in _rank_reading(diff, free_drop_threshold_bytes):
                grouped.setdefault(kind, []).append(detail)
    readings: list[str] = []
    if "profile" in grouped:
        readings.append(
            "KV pool smaller while CUDA-graph or activation memory grew by about as much: "
            "a more complete profile, not a leak (" + "; ".join(grouped["profile"]) + ")"
        )
    if "free_drop" in grouped:
        readings.append(
            "free memory at start dropped: another process on that GPU, or a leftover from an "
            "earlier run, holds memory (" + "; ".join(grouped["free_drop"]) + ")"
        )
    if "unexplained" in grouped:
        readings.append(
            "KV pool smaller with no row that explains it: re-measure before trusting this ledger ("
            + "; ".join(grouped["unexplained"])
            + ")"
        )
    if missing:
        readings.append("ranks present in only one ledger: " + ", ".join(missing))
    return readings


def alerts(
    snapshot: LedgerSnapshot,
    free_spread_threshold_bytes: int,
    reserve_policy_bytes: int,
    outlier_fraction: float,
) -> list[Alert]:
    """Everything wrong with one ledger, worst first within each check."""
    found = _free_spread_alerts(snapshot, free_spread_threshold_bytes)
    found += _reserve_alerts(snapshot, reserve_policy_bytes)
    found += _outlier_alerts(snapshot, outlier_fraction)
    return found


def _preflight_alerts(snapshot: LedgerSnapshot) -> list[Alert]:
    found: list[Alert] = []
    for row in snapshot.ranks:
        free, requested = row.free_at_start_bytes, row.requested_bytes
        if free is not None and requested is not None and free < requested:
            found.append(
                Alert(
                    "free_below_requested",
                    f"rank {row.rank}: free memory at start {format_bytes(free)} is below the "
                    f"requested budget {format_bytes(requested)}: vLLM will not start on this rank",
                    row.rank,
                )
            )
    return found


def _free_spread_alerts(snapshot: LedgerSnapshot, threshold_bytes: int) -> list[Alert]:
    known = [row for row in snapshot.ranks if row.free_at_start_bytes is not None]
    found = _preflight_alerts(snapshot)
    if len(known) < 2:
        return found
    low = min(known, key=lambda r: r.free_at_start_bytes or 0)
    high = max(known, key=lambda r: r.free_at_start_bytes or 0)
    spread = (high.free_at_start_bytes or 0) - (low.free_at_start_bytes or 0)
    if spread > threshold_bytes:
        found.append(
            Alert(
                "free_at_start_spread",
                f"free memory at start differs by {format_bytes(spread)} across ranks (rank {low.rank} "
                f"lowest, rank {high.rank} highest; threshold {format_bytes(threshold_bytes)}): "
                f"something else holds memory on rank {low.rank}'s GPU",
                low.rank,
            )
        )
    return found


def _reserve_alerts(snapshot: LedgerSnapshot, policy_bytes: int) -> list[Alert]:
    found: list[Alert] = []
    for row in snapshot.ranks:
        reserve = post_warmup_reserve_bytes(row)
        if reserve is not None and reserve < policy_bytes:
            found.append(
                Alert(
                    "reserve_below_policy",
                    f"rank {row.rank}: post-warmup reserve {format_bytes(reserve)} is below the policy "
                    f"{format_bytes(policy_bytes)}: the deployment should fail at boot on this rank",
                    row.rank,
                )
            )
    return found


def _outlier_alerts(snapshot: LedgerSnapshot, fraction: float) -> list[Alert]:
    found: list[Alert] = []
    for name in OUTLIER_ROWS:
        known = [(row.rank, row.value(name)) for row in snapshot.ranks if row.value(name) is not None]
        if len(known) < 3:
            continue
        median = statistics.median(v for _, v in known if v is not None)
        if median <= 0:
            continue
        for rank, value in known:
            assert value is not None
            gap = value - median
            if abs(gap) > fraction * median:
                side = "above" if gap > 0 else "below"
                found.append(
                    Alert(
                        "rank_outlier",
                        f"rank {rank}: {name} {format_bytes(value)} is {abs(gap) / median:.0%} {side} the "
                        f"median {format_bytes(int(median))} of {len(known)} ranks",
                        rank,
                    )
                )
    return found
