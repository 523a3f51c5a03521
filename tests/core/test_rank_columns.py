"""The column path of a plan (app.core.rank_columns and the column forms of admission, the uniform
budget and the JSON result) equals the per-rank computation it replaced (tests/core/plan_reference.py):
random sets of distinct and repeated ranks, small and past the grouped form's 1,024, under every
version rule the ledger branches on, with manual budgets, block overrides, measured KV rooms and
ranks that do not start. Also the ledger's conservation and the binding (min-blocks) rank's admission."""

from __future__ import annotations

import json
import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.kvspec import rank_kv_uniform
from app.core.ledger import Cell, RankInput, Source
from app.core.plan import Engine, Layout, ModelInput, PlanInput, Policy, compute, with_columns
from app.core.rank_columns import RankLedgers, rank_columns
from app.core.report import result_to_dict
from tests.core import plan_reference as reference

GIB, MIB = 2**30, 2**20
VERSIONS = ("0.8.5", "0.10.0", "0.13.0", "0.21.0", "0.27.1", "0.28.0")
SOURCES: tuple[Source, ...] = ("measured", "measured", "measured", "estimated", "derived")


def _cell(rng: random.Random, low: int, high: int, none: float = 0.0) -> Cell | None:
    if rng.random() < none:
        return None
    note = "" if rng.random() < 0.8 else "from the log"
    return Cell(rng.randint(low, high), rng.choice(SOURCES), note)


def _rank(rng: random.Random, label: str, mode: str) -> RankInput:
    total_gib = rng.choice((24, 40, 80, 141))
    total = Cell(total_gib * GIB + rng.randint(0, 64) * MIB, "measured")
    free: Cell | None = Cell(total.bytes - rng.randint(0, 4 * GIB), "measured")
    if rng.random() < 0.15:
        free = None
    elif rng.random() < 0.05:  # below any request: the rank does not start
        free = Cell(total.bytes // 3, "measured")
    heavy = rng.random() < 0.03  # rows past the budget: no KV memory
    room = None
    if mode == "rooms" or (mode == "mixed" and rng.random() < 0.5):
        room = _cell(rng, -GIB, 40 * GIB)
    return RankInput(
        label,
        total=None if mode == "mixed" and rng.random() < 0.2 else total,
        free_at_start=free,
        weights=_cell(rng, 0, (total_gib * GIB) if heavy else total_gib * GIB // 2),
        non_torch=_cell(rng, 0, 3 * GIB, 0.05),
        cuda_graphs=_cell(rng, 0, 3 * GIB, 0.2),
        activation=_cell(rng, 0, 6 * GIB, 0.05),
        kv_room=room,
        lora=_cell(rng, 0, GIB, 0.9),
    )


def _ranks(rng: random.Random, n: int, mode: str) -> tuple[RankInput, ...]:
    out: list[RankInput] = []
    for i in range(n):
        label = f"r{i}" if rng.random() < 0.97 or not out else rng.choice(out).label  # a repeated label at times
        if out and rng.random() < 0.3:  # the same cells as an earlier rank (objects or equal values)
            twin = rng.choice(out)
            out.append(replace(twin, label=label) if rng.random() < 0.5 else _equal_copy(twin, label))
        else:
            out.append(_rank(rng, label, mode))
    return tuple(out)


def _equal_copy(rank: RankInput, label: str) -> RankInput:
    fields = ("total", "free_at_start", "weights", "non_torch", "cuda_graphs", "activation", "kv_room", "lora")
    cells = {f: (None if (c := getattr(rank, f)) is None else Cell(c.bytes, c.source, c.note)) for f in fields}
    return RankInput(label, **cells)


def _plan(seed: int, n: int) -> PlanInput:
    rng = random.Random(seed)
    mode = rng.choice(("fast", "fast", "fast", "rooms", "mixed"))
    engine = Engine(
        round(rng.uniform(0.3, 0.99), rng.choice((2, 3))), "auto", rng.choice((16, 32)),
        rng.choice((4096, 8192, 32768)), 8192, 256,
        kv_cache_memory_bytes=rng.choice((None,) * 8 + (20 * GIB,)),
        num_gpu_blocks_override=rng.choice((None,) * 8 + (1000,)),
    )  # fmt: skip
    policy = Policy(
        growth_reserve=rng.choice((0.0, 0.08, 0.2)),
        operating_reserve_bytes=rng.choice((0, GIB // 2, 3 * GIB)),
        avg_live_tokens=rng.choice((None, 2000, 4000)),
    )
    model = ModelInput(kv_bytes_per_token=rng.choice((4096, 81_920, 131_072, 327_680)))
    return PlanInput(model, Layout(tp=1, dp=n), engine, policy, _ranks(rng, n, mode), rng.choice(VERSIONS))


def _reference_json(plan: PlanInput) -> dict[str, object]:
    ref = reference.compute(plan)
    out = result_to_dict(ref, [])
    out.update(reference.ranks_json(ref))
    if out["uniform_budget"] is not None:
        assert ref.budget is not None
        labels = {r["rank"] for r in out["ranks"]} if out["ranks_form"] == "grouped" else None
        out["uniform_budget"]["ranks"] = reference.budget_ranks(ref.budget, labels)
    return out


def _same_as_reference(plan: PlanInput) -> None:
    ref = reference.compute(plan)
    for prepared in (plan, with_columns(plan)):
        got = compute(prepared)
        assert isinstance(got.ledgers, RankLedgers)
        assert tuple(got.ledgers) == ref.ledgers
        assert tuple(got.admission.ranks) == ref.admission.ranks
        assert replace(got.admission, ranks=()) == replace(ref.admission, ranks=())
        if ref.budget is None:
            assert got.budget is None
        else:
            assert got.budget is not None and tuple(got.budget.ranks) == ref.budget.ranks
            assert replace(got.budget, ranks=()) == replace(ref.budget, ranks=())
        assert got.warnings == ref.warnings
        # The whole JSON result, byte for byte (key order included): every explain line too.
        assert json.dumps(result_to_dict(got, [])) == json.dumps(_reference_json(plan))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(1, 40))
def test_columns_equal_the_per_rank_computation(seed: int, n: int) -> None:
    _same_as_reference(_plan(seed, n))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(41, 1024))
def test_columns_equal_the_per_rank_computation_full_form_up_to_1024(seed: int, n: int) -> None:
    """The full form's rows (templates, columns, shared sources) at every size it is used for."""
    _same_as_reference(_plan(seed, n))


def test_full_form_rows_are_new_dicts_sharing_only_the_read_only_sources() -> None:
    """Two ticks on one prepared base: each row is its own dict (a caller may keep a result),
    only each rank's `sources` — knob-independent — is the one dict of its template."""
    plan = _plan(7, 300)
    ranks = tuple(replace(r, kv_room=None, total=r.total or Cell(80 * GIB, "measured")) for r in plan.ranks)
    base = with_columns(replace(plan, ranks=ranks, engine=replace(plan.engine, kv_cache_memory_bytes=None)))
    results = [compute(replace(base, engine=replace(base.engine, gpu_memory_utilization=u))) for u in (0.8, 0.9)]
    one, two = (result_to_dict(r, []) for r in results)
    assert one["ranks_form"] == "full" and len(one["ranks"]) == 300
    assert all(a is not b for a, b in zip(one["ranks"], two["ranks"], strict=True))
    slow = {i for r in results if isinstance(r.ledgers, RankLedgers) for i in r.ledgers.slow}
    fast = [i for i in range(300) if i not in slow]
    assert fast and all(one["ranks"][i]["sources"] is two["ranks"][i]["sources"] for i in fast)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(1025, 1400))
def test_columns_equal_the_per_rank_computation_grouped(seed: int, n: int) -> None:
    _same_as_reference(_plan(seed, n))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 30))
def test_tick_on_prepared_columns_conserves_memory_and_binds_the_fewest_blocks(seed: int, n: int) -> None:
    plan = _plan(seed, n)
    ranks = tuple(replace(r, label=f"r{i}", kv_room=None) for i, r in enumerate(plan.ranks) if r.total is not None)
    engine = replace(plan.engine, kv_cache_memory_bytes=None, num_gpu_blocks_override=None)
    plan = replace(plan, ranks=ranks or (RankInput("r0", total=Cell(80 * GIB, "measured")),), engine=engine)
    base = with_columns(plan)
    for util in (0.5, 0.77, 0.9):
        tick = replace(base, engine=replace(base.engine, gpu_memory_utilization=util))
        result = compute(tick)
        assert result.plan.columns is base.columns  # the tick reused the base's columns
        rkv = result.rkv
        for lg in result.ledgers:
            if lg.total is None or lg.requested is None or lg.headroom is None:
                continue
            inside = [lg.weights, lg.non_torch, lg.activation, lg.lora]
            if result.rules.cuda_graphs_in_budget:
                inside.append(lg.cuda_graphs)
            assert lg.requested.bytes + lg.headroom.bytes == lg.total.bytes
            assert sum(c.bytes for c in inside if c is not None) + lg.kv.bytes == lg.requested.bytes
        adm = result.admission
        blocks = [rkv.blocks_for(lg.kv.bytes) for lg in result.ledgers]
        assert adm.blocks == min(blocks)
        binding = [r for r in adm.ranks if r.binding]  # one: every label differs
        assert len(binding) == 1 and binding[0].blocks == adm.blocks and binding[0].label == adm.binding_rank
        fewest = [r for r in adm.ranks if r.blocks == adm.blocks]
        assert binding[0] == min(fewest, key=lambda r: r.kv_bytes)  # the first with the least KV among them
        floor = max(0, min(r.kv_bytes for r in adm.ranks if r.blocks == adm.blocks))
        assert adm.stranded_bytes == sum(max(0, r.kv_bytes - floor) for r in adm.ranks)


def test_columns_group_equal_ranks_whatever_the_objects() -> None:
    a = RankInput("a", total=Cell(80 * GIB, "measured"), weights=Cell(GIB, "measured"))
    b = RankInput("b", total=Cell(80 * GIB, "measured"), weights=Cell(GIB, "measured"))
    c = replace(a, label="c", weights=Cell(GIB, "estimated"))
    cols = rank_columns((a, b, c, a))
    assert cols.groups == ((0, 1, 3), (2,))
    assert cols.group_of == (0, 0, 1, 0)
    assert rank_kv_uniform(4096, 16).page_bytes > 0


def _one_total_plan(seed: int, n: int) -> PlanInput:
    """n distinct measured ranks of one GPU model (as a cluster import gives): every rank has the same
    total, so a tick's KV order is the prepared one (`RankLedgers.kv_order`); some ranks tie."""
    rng = random.Random(seed)
    total = Cell(80 * GIB, "measured")
    ranks: list[RankInput] = []
    for i in range(n):
        tie = ranks and rng.random() < 0.1  # equal rows under another label: equal KV, order by position
        ranks.append(replace(rng.choice(ranks), label=f"n{i}") if tie else RankInput(
            f"n{i}", total=total, free_at_start=Cell(total.bytes - rng.randint(0, 3 * GIB), "measured"),
            weights=Cell(rng.randint(20 * GIB, 60 * GIB), "measured"),
            non_torch=Cell(rng.randint(0, 2 * GIB), "measured"),
            cuda_graphs=_cell(rng, 0, 2 * GIB, 0.2), activation=_cell(rng, 0, 8 * GIB, 0.05),
        ))  # fmt: skip
    engine = Engine(0.9, "auto", 16, rng.choice((4096, 32768)), 8192, 256)
    policy = Policy(growth_reserve=0.08, operating_reserve_bytes=rng.choice((0, GIB)), avg_live_tokens=4000)
    model = ModelInput(kv_bytes_per_token=rng.choice((81_920, 327_680)))
    return PlanInput(model, Layout(tp=1, dp=n), engine, policy, tuple(ranks), rng.choice(VERSIONS))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(1, 1100), st.lists(st.integers(30, 99), min_size=1, max_size=4))
def test_one_total_ticks_equal_the_per_rank_computation(seed: int, n: int, utils: list[int]) -> None:
    """Ticks on one prepared base of distinct ranks with one total (the KV order made once, then
    only subtracted): the whole result equals the per-rank computation's, and the rank-outlier
    warnings (tested only at the two ends of the sorted KV now) equal testing every rank."""
    base = with_columns(_one_total_plan(seed, n))
    for util in utils:
        plan = replace(base, engine=replace(base.engine, gpu_memory_utilization=util / 100))
        _same_as_reference(plan)
        got = compute(plan)
        outliers = [(w.code, w.message, w.rank) for w in got.warnings if w.code == "rank_outlier"]
        assert outliers == reference.spread_warnings(reference.compute(plan))
        assert isinstance(got.ledgers, RankLedgers)
        order, ordered = got.ledgers.kv_order()
        kvs = [lg.kv.bytes for lg in got.ledgers]
        assert list(order) == sorted(range(n), key=kvs.__getitem__) and list(ordered) == sorted(kvs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**40), 2**45), min_size=1, max_size=3000), st.integers(1, 60))
def test_histogram_and_spread_from_sorted_values_equal_the_unsorted_count(values: list[int], bins: int) -> None:
    from app.core.rank_groups import histogram, spread

    ordered = sorted(values)
    assert histogram(ordered, bins, ordered=ordered) == histogram(values, bins)
    assert spread(ordered, ordered) == spread(values)


def test_fast_columns_read_a_zero_cell_as_stated() -> None:
    """`RankColumns.fast` tests cells by truth: a Cell of 0 bytes is a stated value (no __bool__)."""
    zero = Cell(0, "measured")
    assert rank_columns((RankInput("a", total=Cell(80 * GIB, "measured"), kv_room=None),)).fast
    assert not rank_columns((RankInput("a", total=Cell(80 * GIB, "measured"), kv_room=zero),)).fast
    assert rank_columns((RankInput("a", total=zero),)).fast and not rank_columns((RankInput("a"),)).fast
