"""What-if transforms against independent arithmetic and published measurements."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.errors import InputError
from app.core.estimates import activation_slope
from app.core.ledger import Cell, RankInput
from app.core.model_config import shape_from_config
from app.core.plan import Engine, Layout, ModelInput, PlanInput, Policy, compute
from app.core.shape import online_fp8_shape
from app.core.whatif import (
    levers,
    set_engine,
    set_max_num_batched_tokens,
    set_quantization,
    set_tp,
    utilization_notes,
)
from app.services.plans import run_plan

GIB = 2**30
MIB = 2**20
CONFIGS = Path(__file__).parents[1] / "data" / "configs"


def config(name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((CONFIGS / name).read_text())
    return data


def measured_rank(label: str = "0", **rows: int) -> RankInput:
    return RankInput(label, **{k: Cell(v, "measured") for k, v in rows.items()})


def test_utilization_moves_kv_one_for_one() -> None:
    rank = measured_rank(total=80 * GIB, weights=18 * GIB, non_torch=4 * GIB, cuda_graphs=3 * GIB, activation=3 * GIB)
    plan = PlanInput(
        ModelInput(kv_bytes_per_token=131072),
        Layout(),
        Engine(0.9, "auto", 16, 8192, 8192, 256),
        Policy(),
        (rank,),
        "0.27.1",
    )
    whatif = set_engine(plan, gpu_memory_utilization=0.95)
    before, after = compute(plan).ledgers[0], compute(whatif.plan).ledgers[0]
    assert after.kv.bytes - before.kv.bytes == 4 * GIB  # 0.05 × 80 GiB
    assert after.weights == before.weights and after.activation == before.activation
    assert "ranks[*].kv" in whatif.changed and "engine.gpu_memory_utilization" in whatif.changed


def test_dense_activation_slope_matches_published_measurement() -> None:
    # vLLM PR #48322 (RTX 4090, Qwen3-8B, V1): max_num_batched_tokens 2048 → 8192 shrank the KV pool by
    # 3,744 tokens × 147,456 B, 87,700 B per extra batched token; the forward's slope within 5 %.
    from app.ingest.catalogue import get_model

    sharded, unsharded = activation_slope(shape_from_config(get_model("qwen3-8b").config), 1)
    assert abs((sharded + unsharded) / (3744 * 147456 / 6144) - 1) < 0.05


def test_tp_transform_does_not_divide_activation() -> None:
    # measured-figures.md §2.2 (vLLM PR #10511, Llama-3-8B): activation 1.26 GiB at TP1 and TP2,
    # weights 14.96 → 7.48 GiB, non-torch grew with the communicator buffers.
    shape = shape_from_config(config("llama31-8b.json"))
    act = round(1.26 * GIB)
    rank = measured_rank(total=80 * GIB, weights=round(14.96 * GIB), non_torch=round(1.79 * GIB), activation=act)
    plan = PlanInput(
        ModelInput(shape=shape), Layout(tp=1), Engine(0.9, "auto", 16, 8192, 8192, 256), Policy(), (rank,), "0.6.5"
    )
    tp2 = set_tp(plan, 2)
    assert len(tp2.plan.ranks) == 2
    new = tp2.plan.ranks[0]
    assert new.weights is not None and new.weights.bytes == round(14.96 * GIB) // 2
    assert new.activation is not None and new.activation.source == "estimated"
    assert new.activation.bytes > 0.85 * act  # not 1.26 / 2
    assert new.non_torch is not None and new.non_torch.bytes > round(1.79 * GIB)
    assert "ranks[*].weights" in tp2.estimated
    # KV per token halves with 8 KV heads at TP2
    assert compute(tp2.plan).rkv.kv_bytes_per_token == compute(plan).rkv.kv_bytes_per_token // 2


def test_chunk_lever_qwen25_7b_paper_case() -> None:
    # Elastic KV Cache (measured-figures.md §1): A100-40GB, Qwen2.5-7B, util 0.9, mml 32768,
    # chunk 32,768 → 8,192 moved KV capacity from about 314K to 375K tokens.
    per_token = 2 * 28 * 4 * 128 * 2
    kv_room = 314_000 * per_token
    doc = {
        "model": {"config": config("qwen25-7b.json")},
        "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 32768, "max_num_batched_tokens": 32768},
        "ranks": [{"kv_room": kv_room}],
        "whatif": {"max_num_batched_tokens": 8192},
    }
    tokens = run_plan(doc)["raw_tokens"]
    assert abs(tokens - 375_000) / 375_000 < 0.06


def test_chunk_fit_replaces_estimate() -> None:
    shape = shape_from_config(config("qwen25-7b.json"))
    points = ((2048, 1 * GIB), (32768, 4 * GIB))
    rank = measured_rank(total=40 * GIB, weights=14 * GIB, non_torch=GIB // 2, activation=4 * GIB)
    plan = PlanInput(
        ModelInput(shape=shape),
        Layout(),
        Engine(0.9, "auto", 16, 32768, 32768, 256),
        Policy(activation_points=points),
        (rank,),
        "0.27.1",
    )
    moved = set_max_num_batched_tokens(plan, 2048).plan
    assert moved.ranks[0].activation is not None
    assert moved.ranks[0].activation.bytes == 1 * GIB


def test_levers_rank_bytes_per_token_levers_first() -> None:
    shape = shape_from_config(config("llama31-8b.json"))
    rank = measured_rank(total=24 * GIB, weights=15 * GIB, non_torch=GIB // 2, activation=GIB, cuda_graphs=GIB // 4)
    plan = PlanInput(
        ModelInput(shape=shape), Layout(), Engine(0.9, "auto", 16, 8192, 8192, 256), Policy(), (rank,), "0.27.1"
    )
    result = levers(plan, (1, 2, 4, 8))
    knobs = [lv.knob for lv in result]
    assert knobs[0] in ("kv_cache_dtype", "tensor_parallel_size")
    fp8 = next(lv for lv in result if lv.knob == "kv_cache_dtype")
    assert fp8.tokens_after == 2 * fp8.tokens_before  # halving dtype bytes doubles capacity (seed 002)
    gains = [lv.tokens_gained for lv in result]
    assert gains == sorted(gains, reverse=True)


def test_levers_say_when_the_change_would_not_start_or_brings_a_warning() -> None:
    shape = shape_from_config(config("llama31-8b.json"))
    # vLLM 0.10.2: CUDA graphs are captured outside the budget. 0.9 → 0.93 leaves 5.6 GiB of
    # headroom on 80 GiB, less than the 6 GiB of graphs; and rank 1 has only 73 GiB free.
    rows = {"total": 80 * GIB, "weights": 16 * GIB, "non_torch": GIB, "activation": 2 * GIB, "cuda_graphs": 6 * GIB}
    ranks = (measured_rank("0", **rows), measured_rank("1", free_at_start=73 * GIB, **rows))
    plan = PlanInput(ModelInput(shape=shape), Layout(tp=2), Engine(0.9, "auto", 16, 8192, 8192, 256), Policy(),
                     ranks, "0.10.2")
    assert compute(plan).warnings == ()
    util = next(lv for lv in levers(plan) if lv.knob == "gpu_memory_utilization")
    assert util.tokens_gained > 0 and not util.will_start
    assert any("73.00 GiB free at start" in c for c in util.caveats)
    assert any(c.startswith("rank 0: CUDA graphs") and c.endswith("(and 1 more rank)") for c in util.caveats)
    others = [lv for lv in levers(plan) if lv.knob != "gpu_memory_utilization"]
    assert others and all(lv.will_start and not lv.caveats for lv in others)
    assert levers(plan)[-1].knob == "gpu_memory_utilization"  # a lever that does not start comes last


# --- a measured KV room moves with the knobs -------------------------------------------------------

GiB_sizes = st.integers(0, 8 * GIB)


@st.composite
def measured_plans(draw: st.DrawFn, version: str = "0.27.1") -> PlanInput:
    """A plan of measured ranks whose KV room is exactly what the ledger subtracts (a consistent log)."""
    shape = shape_from_config(config("llama31-8b.json"))
    util = draw(st.sampled_from([0.8, 0.85, 0.9, 0.92]))
    ranks = []
    for i in range(draw(st.sampled_from([1, 2, 4]))):
        rank = measured_rank(
            str(i), total=draw(st.sampled_from([24, 48, 80])) * GIB, weights=draw(st.integers(2 * GIB, 16 * GIB)),
            non_torch=draw(GiB_sizes) // 4, cuda_graphs=draw(GiB_sizes) // 2, activation=draw(GiB_sizes) // 2,
        )
        ranks.append(rank)
    engine = Engine(util, "auto", 16, 8192, draw(st.sampled_from([2048, 4096, 8192])), 256)
    plan = PlanInput(ModelInput(shape=shape), Layout(tp=len(ranks)), engine, Policy(), tuple(ranks), version)
    rooms = [lg.kv.bytes for lg in compute(plan).ledgers]
    with_rooms = tuple(replace(r, kv_room=Cell(kv, "measured")) for r, kv in zip(ranks, rooms, strict=True))
    return replace(plan, ranks=with_rooms)


def without_rooms(plan: PlanInput) -> PlanInput:
    return replace(plan, ranks=tuple(replace(r, kv_room=None) for r in plan.ranks))


def kvs(plan: PlanInput) -> list[int]:
    """Every rank's KV, signed: a room and the ledger's subtraction must agree below zero too."""
    return [lg.kv.bytes for lg in compute(plan).ledgers]


@given(measured_plans(), st.sampled_from([0.5, 0.7, 0.88, 0.9, 0.95, 0.98]))
def test_utilization_moves_a_measured_room_like_the_ledger(plan: PlanInput, util: float) -> None:
    # Independent computation: the same ranks without the room, worked out by the ledger.
    moved = set_engine(plan, gpu_memory_utilization=util).plan
    assert kvs(moved) == kvs(set_engine(without_rooms(plan), gpu_memory_utilization=util).plan)
    if util != plan.engine.gpu_memory_utilization:
        assert all(r.kv_room is not None and r.kv_room.source == "derived" for r in moved.ranks)


@given(measured_plans(), st.sampled_from([1024, 2048, 16384]))
def test_prefill_chunk_moves_a_measured_room_like_the_ledger(plan: PlanInput, tokens: int) -> None:
    moved = set_max_num_batched_tokens(plan, tokens).plan
    assert kvs(moved) == kvs(set_max_num_batched_tokens(without_rooms(plan), tokens).plan)


@given(measured_plans(), st.sampled_from([1, 2, 4, 8]))
def test_tp_moves_a_measured_room_like_the_ledger(plan: PlanInput, tp: int) -> None:
    moved = set_tp(plan, tp).plan
    assert kvs(moved) == kvs(set_tp(without_rooms(plan), tp).plan)


@given(measured_plans(version="0.10.2"), st.floats(0.5, 0.97).map(lambda u: round(u, 2)))
def test_more_utilization_never_fewer_tokens_on_a_measured_run(plan: PlanInput, util: float) -> None:
    base = compute(plan).admission.tokens
    after = compute(set_engine(plan, gpu_memory_utilization=util).plan).admission.tokens
    assert (after >= base) if util >= plan.engine.gpu_memory_utilization else (after <= base)


def test_room_without_total_memory_stays_and_says_why() -> None:
    rank = RankInput("TP0", kv_room=Cell(10 * GIB, "measured"))
    plan = PlanInput(ModelInput(kv_bytes_per_token=131072), Layout(), Engine(0.9, "auto", 16, 8192, 8192, 256),
                     Policy(), (rank,), "0.27.1")
    moved = set_engine(plan, gpu_memory_utilization=0.95).plan
    assert moved.ranks[0].kv_room == rank.kv_room
    # Said before any move (issue 17): the same note for the plan and the moved plan, and no lever
    # promises what utilization cannot deliver.
    (note,) = utilization_notes(plan)
    assert "has no effect on this plan's KV" in note and "TP0" in note
    assert utilization_notes(moved) == (note,)
    assert "gpu_memory_utilization" not in {lv.knob for lv in levers(plan)}
    with_total = replace(plan, ranks=(replace(rank, total=Cell(80 * GIB, "measured")),))
    assert utilization_notes(with_total) == ()
    assert "gpu_memory_utilization" in {lv.knob for lv in levers(with_total)}


def test_real_log_utilization_what_if_moves_kv_by_delta_requested() -> None:
    # Log 14 (vLLM 0.10.2, 8 × L40S, Qwen3-235B-A22B-FP8 TP8): every rank measured at 0.9.
    log = (Path(__file__).parents[1] / "data" / "vllm-logs" / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log")
    doc: dict[str, object] = {"from_log": {"text": log.read_text()}}
    base = run_plan(doc, with_levers=False)
    moved = run_plan({**doc, "whatif": {"gpu_memory_utilization": 0.95}}, with_levers=False)
    for r0, r1 in zip(base["ranks"], moved["ranks"], strict=True):
        total = r0["total_bytes"]
        assert r1["kv_bytes"] - r0["kv_bytes"] == -(-total * 95 // 100) - -(-total * 90 // 100)
        assert r1["sources"]["kv_bytes"] == "derived"
    assert moved["tokens"] > base["tokens"]
    # And the engine setting given with the log is read as the same what-if.
    as_setting = run_plan({**doc, "engine": {"gpu_memory_utilization": 0.95}}, with_levers=False)
    assert as_setting["ranks"] == moved["ranks"]


# --- weights served at fp8 (--quantization fp8) -----------------------------------------------------


def test_online_fp8_weights_match_a_published_measurement() -> None:
    # tinygrad PR #12893: Llama-3-8B with linear weights at fp8, embeddings and LM head kept at
    # bf16 (vLLM's Fp8Config rule): "ram used: 16.06 GB" → "9.08 GB".
    shape = shape_from_config(config("llama31-8b.json"))
    assert abs(shape.weight_bytes / 16.06e9 - 1) < 0.005
    assert abs(online_fp8_shape(shape).weight_bytes / 9.08e9 - 1) < 0.005


def test_online_fp8_of_a_bf16_moe_is_about_its_fp8_checkpoint() -> None:
    # Qwen3-30B-A3B: the published FP8 checkpoint (128×128 block scales) against online fp8 of the bf16 one.
    online = online_fp8_shape(shape_from_config(config("qwen3-30b-a3b.json"))).weight_bytes
    checkpoint = shape_from_config(config("qwen3-30b-a3b-fp8.json")).weight_bytes
    assert abs(online / checkpoint - 1) < 0.02


def test_fp8_of_a_quantized_checkpoint_is_refused_and_of_an_fp8_one_changes_nothing() -> None:
    with pytest.raises(InputError) as err:
        online_fp8_shape(shape_from_config(config("gpt-oss-120b.json")))  # mxfp4 experts
    assert err.value.field == "engine.quantization" and "already quantized (mxfp4)" in err.value.message
    fp8 = shape_from_config(config("qwen3-30b-a3b-fp8.json"))
    assert online_fp8_shape(fp8) is fp8


@given(measured_plans())
def test_quantization_moves_a_measured_room_like_the_ledger(plan: PlanInput) -> None:
    moved = set_quantization(plan, "fp8").plan
    assert kvs(moved) == kvs(set_quantization(without_rooms(plan), "fp8").plan)
    assert all(
        a.weights is not None and b.weights is not None and a.weights.bytes < b.weights.bytes
        for a, b in zip(moved.ranks, plan.ranks, strict=True)
    )
    assert compute(moved).admission.tokens >= compute(plan).admission.tokens
    assert set_quantization(moved, "fp8").plan == moved  # already at fp8: nothing moves


@pytest.mark.parametrize("layout", [{"tp": 4}, {"tp": 2, "pp": 3}])
def test_fp8_as_a_setting_and_as_a_what_if_agree_on_estimated_rows(layout: dict[str, int]) -> None:
    doc: dict[str, object] = {"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"total": "80GiB"}, "layout": layout}
    setting = run_plan({**doc, "engine": {"quantization": "fp8"}}, with_levers=False)
    whatif = run_plan({**doc, "whatif": {"quantization": "fp8"}}, with_levers=False)
    plain = run_plan(doc)
    assert [r["weights_bytes"] for r in setting["ranks"]] == [r["weights_bytes"] for r in whatif["ranks"]]
    assert setting["tokens"] == whatif["tokens"] > plain["tokens"]
    assert "--quantization fp8" in setting["flags"] and "--quantization fp8" not in plain["flags"]
    lever = next(lv for lv in plain["levers"] if lv["knob"] == "quantization")
    assert lever["tokens_after"] == setting["tokens"]
    assert setting["model"]["quantization"] == "fp8" and setting["engine"]["quantization"] == "fp8"


def test_fp8_before_vllm_014_notes_the_full_precision_load() -> None:
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "24GiB"}, "engine": {"quantization": "fp8"}}
    assert any("full precision" in n for n in run_plan({**doc, "vllm_version": "0.10.2"})["notes"])
    assert not any("full precision" in n for n in run_plan(doc)["notes"])


def test_a_room_measured_alone_is_an_estimate_at_another_tp() -> None:
    shape = shape_from_config(config("llama31-8b.json"))
    plan = PlanInput(ModelInput(shape=shape), Layout(tp=1), Engine(0.9, "auto", 16, 8192, 8192, 256), Policy(),
                     (RankInput("0", kv_room=Cell(40 * GIB, "measured")),), "0.27.1")
    room = set_tp(plan, 2).plan.ranks[0].kv_room
    assert room is not None and room.bytes == 40 * GIB and room.source == "estimated"


@given(
    measured_plans(),
    st.sampled_from([None, 1, 2, 4]),
    st.sampled_from([None, 1024, 16384]),
    st.sampled_from([None, 0.3, 0.6, 0.97]),
    st.booleans(),
)
def test_stacked_what_ifs_move_a_measured_room_like_the_ledger(
    plan: PlanInput, tp: int | None, tokens: int | None, util: float | None, fp8: bool
) -> None:
    # The order planning._apply_whatif uses; a step may drive a room below zero and the next
    # bring it back, so no step may clamp.
    def apply(p: PlanInput) -> PlanInput:
        if tp is not None:
            p = set_tp(p, tp).plan
        if tokens is not None:
            p = set_max_num_batched_tokens(p, tokens).plan
        if util is not None:
            p = set_engine(p, gpu_memory_utilization=util).plan
        return set_quantization(p, "fp8").plan if fp8 else p

    assert kvs(apply(plan)) == kvs(apply(without_rooms(plan)))


def test_fp8_moves_a_room_measured_without_its_weights_row() -> None:
    shape = shape_from_config(config("llama31-8b.json"))
    plan = PlanInput(ModelInput(shape=shape), Layout(tp=1), Engine(0.9, "auto", 16, 8192, 8192, 256), Policy(),
                     (RankInput("0", kv_room=Cell(4 * GIB, "measured")),), "0.27.1")
    room = set_quantization(plan, "fp8").plan.ranks[0].kv_room
    freed = shape.weight_bytes - online_fp8_shape(shape).weight_bytes
    assert room is not None and room.bytes == 4 * GIB + freed and room.source == "estimated"


@given(measured_plans(), st.sampled_from([0.5, 0.8, 0.85, 0.9, 0.93, 0.97]))
def test_utilization_moves_each_room_as_the_per_rank_rule_did(plan: PlanInput, util: float) -> None:
    """The rooms a utilization change gives equal the rule they were written from: each room moved
    by Δrequested alone (`_moved_room(rank, rank, …)`), every rank rebuilt."""
    from app.core.ledger import requested_bytes
    from app.core.versions import rules_for
    from app.core.whatif import _moved_room

    u0, ceil = plan.engine.gpu_memory_utilization, rules_for(plan.vllm_version).requested_is_ceil
    expected = []
    for rank in plan.ranks:
        assert rank.total is not None
        moved = requested_bytes(rank.total.bytes, util, ceil) - requested_bytes(rank.total.bytes, u0, ceil)
        note = f"measured KV room {moved:+,} B: requested moves with gpu_memory_utilization {u0} → {util}"
        expected.append(_moved_room(rank, rank, moved, note, "derived"))
    got = set_engine(plan, gpu_memory_utilization=util).plan.ranks
    assert got == tuple(expected)


@given(measured_plans())
def test_a_run_whose_log_states_a_quantization_gets_no_fp8_weights_what_if(plan: PlanInput) -> None:
    """The measured weights of a run whose log prints `quantization=compressed-tensors` are the
    quantized checkpoint's: no fp8-weights lever, and the what-if refuses to re-estimate them."""
    stated = replace(plan, model=replace(plan.model, stated_quantization="compressed-tensors"))
    assert "quantization" in [lv.knob for lv in levers(plan)]  # the same plan without the log's word
    assert "quantization" not in [lv.knob for lv in levers(stated)]
    with pytest.raises(InputError) as err:
        set_quantization(stated, "fp8")
    assert err.value.field == "whatif.quantization" and "quantization=compressed-tensors" in err.value.message
