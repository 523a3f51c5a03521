"""`estimates.estimate_ranks` works each stage's rows out once (the weights estimate once per stage,
its note once per distinct estimate) and makes the stage's TP ranks from them: the ranks equal the
per-rank construction it replaced (verbatim below: every rank built on its own, the weights estimated
twice per stage), for catalogue models across TP / PP layouts, versions and cards. RankInput's
hand-written __init__ (descriptor stores) keeps the dataclass's signature, defaults and frozenness."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core import estimates
from app.core.estimates import EstimateContext, estimate_ranks
from app.core.ledger import Cell, RankInput
from app.core.model_config import shape_from_config
from app.core.shape import ModelShape
from app.core.versions import rules_for
from app.ingest.catalogue import get_model

GIB = 2**30
MODELS = ("llama-3.1-405b", "llama-3.1-8b", "qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v2-lite", "gemma-3-27b-it",
          "qwen3-vl-30b-a3b-instruct-fp8", "jamba-1.5-mini")  # fmt: skip


def _per_rank(shape: ModelShape, ctx: EstimateContext, total_bytes: int, free: int | None) -> tuple[RankInput, ...]:
    """estimate_ranks at main 342c530 (names aside)."""
    stages = estimates.weights_per_stage(shape, ctx.tp, ctx.pp, ctx.mxfp4_backend, ctx)
    non_torch_cell, graphs_cell, act_mid, act_last = estimates._row_cells(shape, ctx)
    non_torch_cell = estimates.with_memory_in_use(non_torch_cell, ctx, total_bytes, free)  # rule added after 342c530
    total = Cell(total_bytes, "measured", "GPU memory size")
    free_cell = Cell(free, "measured") if free is not None else None
    ranks = []
    for stage, stage_bytes in enumerate(stages):
        note = ("checkpoint bytes / TP for this stage" if shape.weights is None
                else estimates._weights(shape, ctx.tp, ctx.pp, stage, ctx.mxfp4_backend, ctx).explain())  # fmt: skip
        weights_cell = Cell(stage_bytes, "estimated", note)
        act_cell = act_last if stage == len(stages) - 1 else act_mid
        for tp_rank in range(ctx.tp):
            label = f"PP{stage}_TP{tp_rank}" if ctx.pp > 1 else f"TP{tp_rank}"
            ranks.append(RankInput(label=label, total=total, free_at_start=free_cell, weights=weights_cell,
                                   non_torch=non_torch_cell, cuda_graphs=graphs_cell, activation=act_cell))  # fmt: skip
    return tuple(ranks)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(MODELS), st.sampled_from((1, 2, 4, 8, 16)), st.sampled_from((1, 2, 3, 4, 8, 64)),
    st.sampled_from(("0.6.3", "0.10.2", "0.21.0")), st.integers(1, 2048), st.sampled_from((None, 70 * GIB)),
    st.booleans(),
)  # fmt: skip
def test_stage_rows_once_equal_every_rank_built_alone(
    slug: str, tp: int, pp: int, version: str, seqs: int, free: int | None, eager: bool
) -> None:
    shape = shape_from_config(get_model(slug).config)
    if pp > shape.num_layers:
        pp = shape.num_layers
    ctx = EstimateContext(tp, pp, 8192, seqs, eager, rules_for(version))
    try:
        want = _per_rank(shape, ctx, 80 * GIB, free)
    except Exception as exc:  # a layout the model refuses is refused the same way
        with pytest.raises(type(exc)):
            estimate_ranks(shape, ctx, 80 * GIB, free)
        return
    got = estimate_ranks(shape, ctx, 80 * GIB, free)
    assert got == want and len(got) == tp * pp
    assert len({id(r.weights) for r in got}) <= pp  # one weights cell per stage, shared by its TP ranks


def test_rank_input_init_is_the_dataclass_signature() -> None:
    names = [f.name for f in dataclasses.fields(RankInput)]
    params = list(inspect.signature(RankInput.__init__).parameters)[1:]
    assert params == names  # a field added without its store in __init__ fails here
    cells = [Cell(i, "measured", str(i)) for i in range(len(names) - 1)]
    rank = RankInput("r", *cells)
    assert [getattr(rank, n) for n in names] == ["r", *cells]
    assert RankInput("r") == RankInput(label="r") and all(getattr(RankInput("r"), n) is None for n in names[1:])
    assert dataclasses.replace(rank, label="s") == RankInput("s", *cells) and hash(rank) == hash(RankInput("r", *cells))
    with pytest.raises(dataclasses.FrozenInstanceError):
        rank.label = "t"  # type: ignore[misc]
