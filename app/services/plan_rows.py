"""A plan's rank rows: the measured ranks of a document (equal values share one cell), the rows a
measured rank leaves out estimated from the model, and whole estimated ranks for a GPU section."""

from __future__ import annotations

from dataclasses import replace

from app.core.dp_layout import DPLayout, with_dp_weights
from app.core.errors import InputError
from app.core.estimates import EstimateContext, estimate_ranks
from app.core.ledger import Cell, RankInput
from app.core.plan import Engine, Layout, ModelInput, check_rank_count, estimate_context
from app.core.shape import ModelShape
from app.schemas import PlanDocument, RankDoc
from app.services.blocks_room import PREFIX
from app.services.memo import memoised


def _measured(value: int | None, note: str = "") -> Cell | None:
    return None if value is None else Cell(value, "measured", note)


def ranks_from_doc(ranks: list[RankDoc]) -> tuple[RankInput, ...]:
    """The measured ranks; equal values share one Cell object, so identical ranks are built from
    the same cells and the ledger works each distinct rank out once (`ledger.work_out`)."""
    cells: dict[int | None, Cell | None] = {None: None}
    rooms: dict[tuple[int | None, int | None], Cell | None] = {(None, None): None}

    def cell(value: int | None) -> Cell | None:
        found = cells.get(value)
        if found is None and value is not None:
            found = cells[value] = Cell(value, "measured")
        return found

    out = []
    for i, rank in enumerate(ranks):
        key = (rank.kv_room, rank.kv_room_blocks)
        room = rooms.get(key)
        if room is None and rank.kv_room is not None:
            room = rooms[key] = Cell(rank.kv_room, "measured", "measured KV room" if rank.kv_room_blocks is None else
                                     f"{PREFIX}: {rank.kv_room_blocks:,} logged blocks × page_bytes × layers")
        out.append(RankInput(
            label=rank.label or str(i), total=cell(rank.total), free_at_start=cell(rank.free_at_start),
            weights=cell(rank.weights), non_torch=cell(rank.non_torch), cuda_graphs=cell(rank.cuda_graphs),
            activation=cell(rank.activation), kv_room=room,
        ))  # fmt: skip
    return tuple(out)


def fill_missing_rows(
    ranks: tuple[RankInput, ...], model: ModelInput, layout: Layout, engine: Engine, version: str, gpu_name: str | None
) -> tuple[tuple[RankInput, ...], bool]:
    """Estimate the rows a measured rank leaves out (e.g. nvidia-smi gives only total and free).

    Only when the model's shape is known and the rank has no measured KV room; every filled
    cell is marked estimated. Without a shape, a missing row counts as zero, as written.
    """
    if model.shape is None:
        return ranks, False
    ctx = estimate_context(layout, engine, version, vision=model.vision, gpu_name=gpu_name)
    out, filled = [], False
    template: tuple[RankInput, ...] = ()
    for i, rank in enumerate(ranks):
        rows = ("weights", "non_torch", "cuda_graphs", "activation")
        if rank.kv_room is not None or rank.total is None or all(getattr(rank, r) is not None for r in rows):
            out.append(rank)
            continue
        template = template or estimate_rows(model.shape, ctx, rank.total.bytes, None)
        guess = template[i % len(template)]
        out.append(replace(rank, **{r: getattr(rank, r) or getattr(guess, r) for r in rows}))
        filled = True
    return tuple(out), filled


def estimated_ranks(
    doc: PlanDocument, model: ModelInput, layout: Layout, engine: Engine, version: str, dp_layout: DPLayout
) -> tuple[RankInput, ...]:
    gpu = doc.gpu
    assert gpu is not None  # guaranteed by PlanDocument validation
    if model.shape is None:
        raise InputError("gpu", "estimated rows need the model's shape: give model.config or model.catalogue")
    ctx = estimate_context(layout, engine, version, vision=model.vision, gpu_name=gpu.name)
    ranks = with_dp_weights(estimate_rows(model.shape, ctx, gpu.total, gpu.free_at_start), model.shape, dp_layout,
                            ctx.mxfp4_backend, ctx.rules.version, ctx.max_num_batched_tokens)  # fmt: skip
    if gpu.count and gpu.count != len(ranks):
        # the count obeys the rule `ranks` entries do: whole replicas of tp × pp workers (a TP8 × PP2
        # plan with 8 GPUs dropped stage 1, the binding one, and showed more tokens than it has)
        try:
            check_rank_count(layout, gpu.count)
        except InputError:
            per = layout.tp * layout.pp
            whole = f"{per}" if layout.dp == 1 else f"{per} or {per * layout.dp}"
            raise InputError(
                "gpu.count",
                f"{gpu.count} GPUs do not make whole engines of tp={layout.tp} × pp={layout.pp} = {per} workers: "
                f"give {whole}{', or a multiple of ' + str(per) if layout.dp == 1 else ''}, or leave it blank",
            ) from None
        ranks = tuple(replace(ranks[i % len(ranks)], label=str(i)) for i in range(gpu.count))
    return ranks


def estimate_rows(
    shape: ModelShape, ctx: EstimateContext, total_bytes: int, free_at_start: int | None
) -> tuple[RankInput, ...]:
    """estimate_ranks is pure over frozen inputs: the plans of one app reuse the rows
    (`app.services.memo`, the app's memo; computed afresh outside a request)."""
    return memoised(("estimate_rows", shape, ctx, total_bytes, free_at_start),
                    lambda: estimate_ranks(shape, ctx, total_bytes, free_at_start), len)
