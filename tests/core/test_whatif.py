"""What-if transforms against independent arithmetic and published measurements."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.estimates import activation_slope
from app.core.ledger import Cell, RankInput
from app.core.plan import Engine, Layout, ModelInput, PlanInput, Policy, compute
from app.core.shape import shape_from_config
from app.core.whatif import levers, set_engine, set_max_num_batched_tokens, set_tp
from app.planning import run_plan

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


def test_dense_activation_slope_matches_published_range() -> None:
    # measured-figures.md §2.1: 0.085–0.10 MiB per batched token on dense 7–8B models (±10 %)
    for name in ("llama31-8b.json", "qwen25-7b.json"):
        sharded, unsharded = activation_slope(shape_from_config(config(name)), 1)
        assert 0.085 * 0.9 <= (sharded + unsharded) / MIB <= 0.10 * 1.1, name


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
