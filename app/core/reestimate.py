"""A plan's estimated rows worked out afresh at another TP, PP or card: the rows a plan opened at
that layout or card gets (`services.plan_rows.estimated_ranks` calls the same `estimate_ranks`), so
a lever that offers "TP 4 → 8" on an estimated plan promises the tokens the TP8 page then shows.
Used by the levers (`whatif.levers`) and the start levers (`start_levers`)."""

from __future__ import annotations

from dataclasses import replace

from app.core.dp_layout import DPLayout, with_dp_weights
from app.core.errors import InputError
from app.core.estimates import estimate_ranks
from app.core.gpus import find_preset
from app.core.plan import PlanInput, plan_estimate_context
from app.core.versions import card_scheduler_defaults, scheduler_seqs


def all_estimated(plan: PlanInput) -> bool:
    """Every rank's rows are estimates (a plan from a GPU size, not from a log or measured rows)."""
    return plan.estimated_ranks and all(
        r.weights is not None and r.weights.source == "estimated" and r.kv_room is None for r in plan.ranks
    )


def reestimated(
    plan: PlanInput, *, tp: int | None = None, pp: int | None = None, total: int | None = None,
    gpu_name: str | None = None,
) -> PlanInput:
    """The plan with its rows estimated afresh at another TP, PP or card (its total and its name: the
    name picks what depends on the card, e.g. the MXFP4 weight layout by compute capability)."""
    if gpu_name is not None:
        plan = on_card(plan, total, gpu_name)
    shape = plan.model.shape
    first = plan.ranks[0]
    if shape is None or first.total is None:
        raise InputError("layout", "re-estimating rows needs the model's shape and the GPU total")
    layout = replace(plan.layout, tp=tp or plan.layout.tp, pp=pp or plan.layout.pp)
    ctx = plan_estimate_context(plan, layout)
    free = first.free_at_start.bytes if first.free_at_start is not None and total is None else None
    # One engine: the replicas of an estimate are identical, so one gives every replica's result.
    # A MoE model in a DP group holds DP engine 0's expert share, as the plan page estimates it.
    dp = DPLayout(layout.dp, layout.tp, layout.pp, layout.expert_parallel, shape.num_experts)
    ranks = with_dp_weights(estimate_ranks(shape, ctx, total or first.total.bytes, free), shape, dp,
                            ctx.mxfp4_backend, ctx.rules.version, ctx.max_num_batched_tokens)
    return replace(plan, layout=layout, ranks=ranks, gpu_total_bytes=total or plan.gpu_total_bytes)


def on_card(plan: PlanInput, total: int | None, gpu_name: str) -> PlanInput:
    """The plan on another card: its name, the scheduler defaults vLLM picks for that card where
    the plan took the defaults (max_num_batched_tokens, max_num_seqs: they size the profile run), and
    the card's usual interconnect where the plan took the old card's (it sizes non-torch memory)."""
    e = plan.engine
    mnbt, seqs, _ = card_scheduler_defaults(plan.vllm_version, total or plan.gpu_total_bytes, gpu_name, e.max_model_len)
    mnbt = mnbt if e.max_num_batched_tokens_assumed else e.max_num_batched_tokens
    # A defaulted max_num_seqs is the card's, lowered to the batched tokens as vLLM does (the one rule;
    # an InputError where vLLM would not start, which `_first_start` skips).
    seqs = scheduler_seqs(plan.vllm_version, mnbt, None if e.max_num_seqs_assumed else e.max_num_seqs, seqs)
    engine = replace(e, max_num_batched_tokens=mnbt, max_num_seqs=seqs)
    layout, old, new = plan.layout, find_preset(plan.gpu_name) if plan.gpu_name else None, find_preset(gpu_name)
    implicit = layout.interconnect == (old.interconnect if old is not None else "unknown")
    if new is not None and implicit:  # the card's usual interconnect, as the plan page takes it for the card
        layout = replace(layout, interconnect=new.interconnect)
    return replace(plan, gpu_name=gpu_name, engine=engine, layout=layout)
