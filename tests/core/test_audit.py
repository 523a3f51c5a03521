"""Ledger diff and alerts: exact numbers on worked examples, and properties."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from app.core.audit import (
    ROW_FIELDS,
    Alert,
    LedgerRow,
    LedgerSnapshot,
    alerts,
    diff_ledgers,
    parse_vllm_version,
    post_warmup_reserve_bytes,
)

GIB = 1024**3
MIB = 1024**2


def _row(rank: str, **rows: int | None) -> LedgerRow:
    base: dict[str, int | None] = {
        "total_bytes": 80 * GIB,
        "free_at_start_bytes": 79 * GIB,
        "requested_bytes": 72 * GIB,
        "weights_bytes": 16 * GIB,
        "non_torch_bytes": 1 * GIB,
        "cuda_graph_bytes": 0,
        "activation_bytes": 2 * GIB,
        "kv_bytes": 53 * GIB,
    }
    base.update(rows)
    return LedgerRow(rank, **base)


BEFORE = LedgerSnapshot(
    ranks=(_row("0", num_gpu_blocks=100_000), _row("1", num_gpu_blocks=100_000)),
    evidence={"vllm_version": "0.20.1", "block_size": 16, "driver_version": "570.86"},
)
AFTER = LedgerSnapshot(
    ranks=(
        _row(
            "0",
            cuda_graph_bytes=3 * GIB,
            activation_bytes=2 * GIB + 512 * MIB,
            kv_bytes=49 * GIB + 512 * MIB,
            num_gpu_blocks=93_000,
        ),
        _row(
            "1",
            free_at_start_bytes=75 * GIB,
            cuda_graph_bytes=3 * GIB,
            activation_bytes=2 * GIB + 512 * MIB,
            kv_bytes=49 * GIB + 512 * MIB,
            num_gpu_blocks=93_000,
        ),
    ),
    evidence={"vllm_version": "0.21.0", "block_size": 16, "driver_version": "580.65"},
)


def test_diff_gives_every_row_with_its_delta() -> None:
    diff = diff_ledgers(BEFORE, AFTER)
    rank0 = diff.rank("0")
    assert rank0.status == "both"
    assert [r.row for r in rank0.rows] == list(ROW_FIELDS)
    assert rank0.row("kv_bytes").delta == -(3 * GIB + 512 * MIB)
    assert rank0.row("cuda_graph_bytes").delta == 3 * GIB
    assert rank0.row("activation_bytes").delta == 512 * MIB
    assert rank0.row("weights_bytes").delta == 0
    assert rank0.row("kv_tokens").delta is None  # not measured
    assert (rank0.tokens.before, rank0.tokens.after, rank0.tokens.delta) == (1_600_000, 1_488_000, -112_000)
    assert diff.rank("1").row("free_at_start_bytes").delta == -4 * GIB
    assert diff.min_kv_bytes.delta == -(3 * GIB + 512 * MIB)
    assert diff.min_kv_tokens.delta == -112_000
    assert diff.concurrency == (None, None)
    assert diff_ledgers(BEFORE, AFTER, max_model_len=32_000).concurrency == (50.0, 46.5)
    assert [(c.key, c.before, c.after) for c in diff.evidence_changes] == [
        ("vllm_version", "0.20.1", "0.21.0"),
        ("driver_version", "570.86", "580.65"),
    ]


def test_diff_reads_the_change_in_plain_words() -> None:
    assert diff_ledgers(BEFORE, AFTER).readings == (
        "vLLM 0.20.1 → 0.21.0: CUDA-graph memory now subtracted from the budget",
        "KV pool smaller while CUDA-graph or activation memory grew by about as much: a more complete "
        "profile, not a leak (rank 0: KV -3.50 GiB while cuda_graph_bytes +3.00 GiB and activation_bytes "
        "+512.0 MiB; rank 1: KV -3.50 GiB while cuda_graph_bytes +3.00 GiB and activation_bytes +512.0 MiB)",
        "free memory at start dropped: another process on that GPU, or a leftover from an earlier run, "
        "holds memory (rank 1 lost 4.00 GiB)",
    )
    back = diff_ledgers(AFTER, BEFORE).readings
    assert back[0] == (
        "vLLM 0.21.0 → 0.20.1: CUDA-graph memory no longer subtracted from the budget "
        "(it comes out of the headroom after KV sizing)"
    )


def test_a_smaller_pool_with_nothing_grown_is_flagged_unexplained() -> None:
    after = LedgerSnapshot((_row("0", kv_bytes=50 * GIB), _row("1")), BEFORE.evidence)
    diff = diff_ledgers(BEFORE, after)
    assert diff.readings == (
        "KV pool smaller with no row that explains it: re-measure before trusting this ledger (rank 0: KV -3.00 GiB)",
    )


def test_tokens_from_bytes_per_token_and_unmatched_ranks() -> None:
    a = LedgerSnapshot((_row("0"), _row("1")))
    b = LedgerSnapshot((_row("0", kv_bytes=52 * GIB), _row("2")))
    diff = diff_ledgers(a, b, bytes_per_token=256 * 1024)
    assert diff.rank("0").tokens.delta == -4096
    assert (diff.rank("1").status, diff.rank("2").status) == ("removed", "added")
    assert diff.rank("1").row("kv_bytes").after is None
    assert diff.rank("2").tokens.before is None
    assert diff.readings[-1] == "ranks present in only one ledger: 1, 2"


def test_layout_and_dtype_changes_are_read() -> None:
    a = LedgerSnapshot((_row("0"),), {"tp": 4, "kv_cache_dtype": "auto"})
    b = LedgerSnapshot((_row("0"),), {"tp": 8, "kv_cache_dtype": "fp8"})
    assert diff_ledgers(a, b).readings == (
        "TP 4 → 8: the layout changed, so each rank holds a different shard; rows are not comparable rank for rank",
        "kv_cache_dtype auto → fp8: bytes per token changed, compare tokens, not bytes",
    )


def test_alerts_on_the_four_rank_example() -> None:
    snapshot = LedgerSnapshot(
        (
            _row("0", cuda_graph_bytes=3 * GIB, kv_bytes=55 * GIB),  # reserve 2 GiB
            _row("1", cuda_graph_bytes=3 * GIB, kv_bytes=56 * GIB + 512 * MIB),  # reserve 0.5 GiB
            _row("2", free_at_start_bytes=75 * GIB, cuda_graph_bytes=3 * GIB, kv_bytes=50 * GIB),
            _row("3", cuda_graph_bytes=3 * GIB, kv_bytes=55 * GIB),
        )
    )
    assert [post_warmup_reserve_bytes(r) for r in snapshot.ranks] == [
        2 * GIB,
        512 * MIB,
        3 * GIB,
        2 * GIB,
    ]
    assert alerts(snapshot, free_spread_threshold_bytes=GIB, reserve_policy_bytes=GIB, outlier_fraction=0.05) == [
        Alert(
            "free_at_start_spread",
            "free memory at start differs by 4.00 GiB across ranks (rank 2 lowest, rank 0 highest; "
            "threshold 1.00 GiB): something else holds memory on rank 2's GPU",
            "2",
        ),
        Alert(
            "reserve_below_policy",
            "rank 1: post-warmup reserve 512.0 MiB is below the policy 1.00 GiB: the deployment should "
            "fail at boot on this rank",
            "1",
        ),
        Alert("rank_outlier", "rank 2: kv_bytes 50.00 GiB is 9% below the median 55.00 GiB of 4 ranks", "2"),
    ]
    # Looser thresholds: nothing to say.
    assert alerts(snapshot, 5 * GIB, 256 * MIB, 0.10) == []


def test_alerts_preflight_and_unknown_rows() -> None:
    short = LedgerSnapshot((_row("0", free_at_start_bytes=70 * GIB, kv_bytes=None),))
    assert alerts(short, GIB, GIB, 0.1) == [
        Alert(
            "free_below_requested",
            "rank 0: free memory at start 70.00 GiB is below the requested budget 72.00 GiB: vLLM will "
            "not start on this rank",
            "0",
        )
    ]
    assert post_warmup_reserve_bytes(short.ranks[0]) is None
    # Without free memory at start, the reserve falls back to total memory.
    assert post_warmup_reserve_bytes(_row("0", free_at_start_bytes=None)) == 8 * GIB


def test_vllm_versions() -> None:
    assert parse_vllm_version("0.21.0") == (0, 21)
    assert parse_vllm_version("v0.20.1rc2") == (0, 20)
    assert parse_vllm_version("0.1.dev20073+g8e685d198") is None
    assert parse_vllm_version(None) is None


def test_audit_is_pure() -> None:
    source = Path(__file__).resolve().parents[2] / "app" / "core" / "audit.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
    }
    assert not imported & {"sqlalchemy", "fastapi", "jinja2", "plotly", "app"}


# ---------------------------------------------------------------- properties

_bytes = st.one_of(st.none(), st.integers(min_value=0, max_value=2**40))
_rows = st.builds(
    LedgerRow,
    rank=st.sampled_from(["0", "1", "2", "3", "dp1-tp0"]),
    **{name: _bytes for name in ROW_FIELDS},
)
_evidence = st.dictionaries(
    st.sampled_from(["vllm_version", "driver_version", "tp", "block_size", "kv_cache_dtype"]),
    st.one_of(st.none(), st.sampled_from(["0.20.1", "0.21.0", "fp8"]), st.integers(1, 64)),
)
_snapshots = st.builds(
    LedgerSnapshot,
    ranks=st.lists(_rows, max_size=6, unique_by=lambda r: r.rank).map(tuple),
    evidence=_evidence,
)


@given(_snapshots)
def test_diff_with_itself_is_all_zeros(snapshot: LedgerSnapshot) -> None:
    diff = diff_ledgers(snapshot, snapshot, bytes_per_token=1024)
    for rank in diff.ranks:
        assert rank.status == "both"
        for row in (*rank.rows, rank.tokens):
            assert row.delta == (None if row.before is None else 0)
    assert diff.evidence_changes == ()
    assert diff.readings == ()


@given(_snapshots, _snapshots)
def test_diff_is_antisymmetric(a: LedgerSnapshot, b: LedgerSnapshot) -> None:
    forward, backward = diff_ledgers(a, b), diff_ledgers(b, a)

    def pair(label: str) -> frozenset[str]:  # a rank renamed between the ledgers is "old → new" each way
        return frozenset(label.split(" → "))

    assert {pair(r.rank) for r in forward.ranks} == {pair(r.rank) for r in backward.ranks}
    for rank in forward.ranks:
        other = next(r for r in backward.ranks if pair(r.rank) == pair(rank.rank))
        for row, back in zip((*rank.rows, rank.tokens), (*other.rows, other.tokens), strict=True):
            assert row.delta == (None if back.delta is None else -back.delta)
    assert {(c.key, c.before, c.after) for c in forward.evidence_changes} == {
        (c.key, c.after, c.before) for c in backward.evidence_changes
    }
    assert forward.min_kv_bytes.delta == (None if backward.min_kv_bytes.delta is None else -backward.min_kv_bytes.delta)


def test_evidence_recorded_on_one_side_only_is_not_read_as_a_change() -> None:
    from app.core.audit import LedgerRow, LedgerSnapshot, diff_ledgers

    row = LedgerRow(rank="TP0", total_bytes=24 * 2**30, kv_bytes=2 * 2**30)
    a = LedgerSnapshot(ranks=(row,), evidence={"vllm_version": "0.10.2"})
    b = LedgerSnapshot(ranks=(row,), evidence={"vllm_version": "0.10.2", "gpu_memory_utilization": 0.92})
    diff = diff_ledgers(a, b)
    assert [c.key for c in diff.evidence_changes] == ["gpu_memory_utilization"]
    assert not any("gpu_memory_utilization" in r for r in diff.readings)


def test_ranks_renamed_by_a_vllm_upgrade_are_the_same_gpus() -> None:
    """v0.7–v0.10.0 print `(VllmWorker rank=N …)`, v0.10.2+ `(Worker_PP1_TP0 …)`: rank=N is pp × tp + tp."""
    from app.core.audit import LedgerRow, LedgerSnapshot, diff_ledgers

    old = LedgerSnapshot(tuple(LedgerRow(f"rank={n}", kv_bytes=10 * GIB + n) for n in range(4)), {"tp": 2})
    new = LedgerSnapshot(tuple(LedgerRow(f"PP{p}_TP{t}", kv_bytes=9 * GIB) for p in (0, 1) for t in (0, 1)), {"tp": 2})
    diff = diff_ledgers(old, new)
    assert [r.rank for r in diff.ranks] == ["rank=0 → PP0_TP0", "rank=1 → PP0_TP1", "rank=2 → PP1_TP0",
                                            "rank=3 → PP1_TP1"]
    assert [r.row("kv_bytes").delta for r in diff.ranks] == [-GIB - n for n in range(4)]
    # a label that states no index pairs only when it is its ledger's one rank
    two = LedgerSnapshot((LedgerRow("driver"), LedgerRow("pid=7")), {})
    assert [r.status for r in diff_ledgers(two, LedgerSnapshot((LedgerRow("EngineCore"),), {})).ranks] == [
        "removed", "removed", "added"]
