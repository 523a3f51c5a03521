"""Invariants of the ledger, admission and uniform budget (hypothesis)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from app.core.kvspec import rank_kv_uniform
from app.core.ledger import Cell, LedgerRules, RankInput, work_out, work_out_rank
from app.core.plan import Engine, Layout, ModelInput, PlanInput, Policy, compute
from app.core.report_ranks import rank_json

GIB = 2**30

sizes = st.integers(min_value=0, max_value=20 * GIB)
per_token = st.sampled_from([4096, 32_768, 57_344, 81_920, 131_072, 196_608, 327_680])
utils = st.floats(min_value=0.3, max_value=0.99).map(lambda u: round(u, 3))


@st.composite
def rank_inputs(draw: st.DrawFn, label: str = "0") -> RankInput:
    total = draw(st.integers(min_value=16 * GIB, max_value=192 * GIB))

    def m(v: int) -> Cell:
        return Cell(v, "measured")

    return RankInput(
        label,
        total=m(total),
        free_at_start=m(total),
        weights=m(draw(sizes)),
        non_torch=m(draw(st.integers(0, 4 * GIB))),
        cuda_graphs=m(draw(st.integers(0, 4 * GIB))),
        activation=m(draw(st.integers(0, 8 * GIB))),
    )


def make_plan(ranks: tuple[RankInput, ...], bpt: int, util: float, block_size: int = 16) -> PlanInput:
    engine = Engine(util, "auto", block_size, 8192, 8192, 256)
    return PlanInput(
        ModelInput(kv_bytes_per_token=bpt),
        Layout(tp=len(ranks)),
        engine,
        Policy(growth_reserve=0.08, avg_live_tokens=4000),
        ranks,
        "0.27.1",
    )


@given(st.lists(rank_inputs(), min_size=1, max_size=6), per_token, utils)
def test_ledger_conserves_memory(ranks: list[RankInput], bpt: int, util: float) -> None:
    ranks_t = tuple(replace(r, label=str(i)) for i, r in enumerate(ranks))
    result = compute(make_plan(ranks_t, bpt, util))
    for lg in result.ledgers:
        assert lg.total and lg.requested and lg.headroom and lg.weights and lg.non_torch
        assert lg.cuda_graphs and lg.activation
        rows = lg.weights.bytes + lg.non_torch.bytes + lg.cuda_graphs.bytes + lg.activation.bytes
        assert rows + lg.kv.bytes + lg.headroom.bytes == lg.total.bytes
        assert lg.headroom.bytes >= 0


@given(rank_inputs(), per_token, utils, utils)
def test_more_utilization_never_fewer_tokens(rank: RankInput, bpt: int, u1: float, u2: float) -> None:
    lo, hi = sorted((u1, u2))
    t_lo = compute(make_plan((rank,), bpt, lo)).admission.tokens
    t_hi = compute(make_plan((rank,), bpt, hi)).admission.tokens
    assert t_hi >= t_lo


@given(st.lists(rank_inputs(), min_size=1, max_size=5), rank_inputs(), per_token, utils)
def test_adding_a_rank_never_raises_tokens(ranks: list[RankInput], extra: RankInput, bpt: int, util: float) -> None:
    base = tuple(replace(r, label=str(i)) for i, r in enumerate(ranks))
    grown = (*base, replace(extra, label="extra"))
    assert compute(make_plan(grown, bpt, util)).admission.tokens <= compute(make_plan(base, bpt, util)).admission.tokens


@given(st.lists(rank_inputs(), min_size=1, max_size=5), per_token, utils, st.sampled_from([1, 16, 32, 64, 128]))
def test_tokens_are_whole_blocks_and_fit(ranks: list[RankInput], bpt: int, util: float, bs: int) -> None:
    ranks_t = tuple(replace(r, label=str(i)) for i, r in enumerate(ranks))
    result = compute(make_plan(ranks_t, bpt, util, bs))
    adm = result.admission
    assert adm.tokens == adm.blocks * bs
    for ra in adm.ranks:
        assert ra.blocks * result.rkv.page_bytes <= max(0, ra.kv_bytes)
        assert ra.blocks >= adm.blocks
        assert ra.tokens % bs == 0
    binding = [ra for ra in adm.ranks if ra.binding]
    assert len(binding) == 1 and binding[0].blocks == min(ra.blocks for ra in adm.ranks)


@given(st.lists(st.integers(0, 40 * GIB), min_size=1, max_size=16), st.integers(0, 2 * GIB), per_token)
def test_uniform_budget_never_exceeds_a_safe_budget(rooms: list[int], reserve: int, bpt: int) -> None:
    from app.core.budget import uniform_budget

    rkv = rank_kv_uniform(bpt, 16)
    ub = uniform_budget(tuple((str(i), r) for i, r in enumerate(rooms)), reserve, rkv)
    assert ub is not None
    assert all(ub.kv_cache_memory_bytes <= max(0, r - reserve) for r in rooms)
    assert ub.kv_cache_memory_bytes % rkv.page_bytes == 0
    assert ub.stranded_bytes == sum(max(0, r - reserve - ub.kv_cache_memory_bytes) for r in rooms)
    assert ub.kv_cache_memory_bytes + rkv.page_bytes > max(0, min(rooms) - reserve)


@given(
    st.lists(rank_inputs(), min_size=1, max_size=3),
    st.lists(st.integers(0, 2), min_size=1, max_size=12),
    utils,
    st.sampled_from([None, 30 * GIB]),
)
def test_ranks_sharing_cells_get_the_ledger_each_would_get_alone(
    distinct: list[RankInput], picks: list[int], util: float, manual: int | None
) -> None:
    # work_out shares the computation of a rank built from the same cells as the one before; it must equal
    # working every rank out on its own (labels, problems and all).
    ranks = tuple(replace(distinct[p % len(distinct)], label=f"r{i}") for i, p in enumerate(picks))
    rules = LedgerRules(util, kv_cache_memory_bytes=manual)
    assert work_out(ranks, rules) == tuple(work_out_rank(r, rules) for r in ranks)


ROW_KEYS = {
    "total": "total_bytes", "free_at_start": "free_at_start_bytes", "requested": "requested_bytes",
    "headroom": "headroom_bytes", "weights": "weights_bytes", "non_torch": "non_torch_bytes",
    "cuda_graphs": "cuda_graph_bytes", "activation": "activation_bytes", "kv": "kv_bytes",
}


@given(st.lists(rank_inputs(), min_size=1, max_size=4), per_token, utils, st.booleans())
def test_rank_json_rows_are_the_ledger_rows(ranks: list[RankInput], bpt: int, util: float, drop_total: bool) -> None:
    # rank_json reads cells directly for speed; it must say what the ledger's rows() say.
    ranks_t = tuple(
        replace(r, label=str(i), total=None if drop_total and i == 0 else r.total) for i, r in enumerate(ranks)
    )
    result = compute(make_plan(ranks_t, bpt, util))
    for lg in result.ledgers:
        got = rank_json(lg, 1, 2, 3, 4, False)
        rows = lg.rows()
        assert list(got)[: 1 + len(ROW_KEYS)] == ["rank", *ROW_KEYS.values()]
        assert {key: got[key] for key in ROW_KEYS.values()} == {
            key: None if rows[name] is None else rows[name].bytes for name, key in ROW_KEYS.items()  # type: ignore[union-attr]
        }
        assert got["sources"] == {key: rows[name].source for name, key in ROW_KEYS.items() if rows[name] is not None}  # type: ignore[union-attr]
