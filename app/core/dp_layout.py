"""Data-parallel attention with expert parallelism for MoE (issue 15, item 5).

Theory of operation
-------------------
``--data-parallel-size D`` runs D engines (DP ranks); each has its own TP × PP workers, its own
block pool and its own scheduler. Attention and KV are replicated per DP rank and sharded only by
that engine's TP: a DP rank's KV per token is the TP-sharded one, never divided by D, and vLLM
gives each engine's workers the minimum block count over that engine's workers. Engines add up for
fleet concurrency, never for one request.

The MoE layers see another layout (``FusedMoEParallelConfig.make``, vllm/model_executor/layers/
fused_moe/config.py @28be48fa): ``flatten_tp_across_dp_and_pcp`` makes the experts' TP size
``tp × dp`` (TP rank ``dp_rank × tp + tp_rank``); with ``--enable-expert-parallel`` and
``tp × dp > 1`` that flattened group becomes the EP group — ``ep_size = tp × dp``, experts TP 1 —
and ``determine_expert_map`` (fused_moe/expert_map_manager.py) gives each EP rank ``E // ep_size``
experts, one more on the first ``E % ep_size`` ranks. So even without EP, DP shards the experts
over every GPU of the DP group; with EP each GPU holds whole experts. DP engine 0 holds EP ranks
``0 … tp − 1``, the ones with the extra experts: the plan's ranks are engine 0's, the tightest.
The estimated weights follow both rules (``dp_weights``), so a MoE engine's per-rank weights depend
on dp: the sizing search plans such a model once per replica count.

Flags: ``--data-parallel-size`` for ``vllm serve`` since PR #13923 (15dac210f, 2025-03-27, ≈v0.8.3);
``--enable-expert-parallel`` since PR #14305 (cc2f9b32c, 2025-03-06, v0.8.0). Older versions'
argparse refuses them ("unrecognized arguments").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.core import weights
from app.core.errors import InputError
from app.core.ledger import Cell, RankInput
from app.core.shape import ModelShape
from app.core.weights_tensor import Version

if TYPE_CHECKING:
    from app.core.plan import PlanResult

DP_SINCE = (0, 8, 3)  # PR #13923
EP_SINCE = (0, 8, 0)  # PR #14305


@dataclass(frozen=True)
class DPLayout:
    dp: int
    tp: int
    pp: int
    enable_expert_parallel: bool
    num_experts: int | None  # None: not a MoE model

    @property
    def use_ep(self) -> bool:
        """``FusedMoEParallelConfig.make``: EP only when ``dp × tp > 1`` and the flag is on."""
        return self.enable_expert_parallel and self.dp * self.tp > 1 and bool(self.num_experts)

    @property
    def ep_size(self) -> int:
        return self.dp * self.tp if self.use_ep else 1

    @property
    def moe_tp_size(self) -> int:
        """The experts' TP size: TP flattened across DP, or 1 under EP."""
        return 1 if self.use_ep else self.dp * self.tp

    def experts_on(self, ep_rank: int) -> int | None:
        """Experts one EP rank holds (``determine_expert_map``); all of them without EP."""
        if not self.num_experts:
            return None
        if not self.use_ep:
            return self.num_experts
        base, extra = divmod(self.num_experts, self.ep_size)
        return base + (1 if ep_rank % self.ep_size < extra else 0)

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp


def dp_layout_of(result: PlanResult) -> DPLayout:
    """The DP/EP layout of a computed plan."""
    shape, layout = result.plan.model.shape, result.plan.layout
    return DPLayout(layout.dp, layout.tp, layout.pp, layout.expert_parallel, shape.num_experts if shape else None)


def check_dp_layout(layout: DPLayout, version: tuple[int, int, int], label: str) -> None:
    """Refuse the parallel flags vLLM ``version`` does not have, naming the field and the PR."""
    if layout.dp > 1 and version < DP_SINCE:
        raise InputError("layout.dp", f"vLLM {label} has no --data-parallel-size for vllm serve (PR #13923, "
                         "≈v0.8.3; argparse refuses it): run separate servers, or plan at 0.8.3 or later")
    if layout.enable_expert_parallel and version < EP_SINCE:
        raise InputError("layout.expert_parallel", f"vLLM {label} has no --enable-expert-parallel (PR #14305, "
                         "v0.8.0; argparse refuses it)")


def layout_notes(layout: DPLayout, shape_known: bool = True) -> tuple[str, ...]:
    """What the layout means for the MoE layers, in words (one note per plan). `shape_known`: False
    for a model given as bytes per token (an imported log that names no catalogue model), whose
    experts are unknown — not absent (log 14's Qwen3-235B-A22B was told it had no MoE layers)."""
    if not layout.enable_expert_parallel and not (layout.dp > 1 and layout.num_experts):
        return ()
    if layout.enable_expert_parallel and not shape_known:
        return ("--enable-expert-parallel kept as stated: the model is given as bytes per token, so its MoE "
                "layers and how EP splits them are not known (the KV per token does not depend on them)",)
    if layout.enable_expert_parallel and not layout.num_experts:
        return ("--enable-expert-parallel on a model without MoE layers changes nothing (no experts to split)",)
    if layout.enable_expert_parallel and not layout.use_ep:
        return ("--enable-expert-parallel at dp × tp = 1 changes nothing: vLLM uses EP only when dp × tp > 1 "
                "(FusedMoEParallelConfig.make)",)
    if layout.use_ep:
        low, high = layout.experts_on(layout.ep_size - 1), layout.experts_on(0)
        held = f"{high}" if low == high else f"{low}–{high}"
        engine0 = (f"; the ranks shown are DP engine 0's (EP ranks 0–{layout.tp - 1}, the ones with the most "
                   "experts)" if layout.dp > 1 else "")
        return (f"expert parallel: EP size {layout.ep_size} = dp {layout.dp} × tp {layout.tp}; each GPU holds "
                f"{held} whole experts of {layout.num_experts}{engine0}",)
    return (f"MoE without expert parallel: vLLM shards the experts over tp × dp = {layout.moe_tp_size} GPUs "
            "(flatten_tp_across_dp_and_pcp, fused_moe/config.py @28be48fa9), attention and dense layers over "
            f"tp = {layout.tp}; the estimated weights do the same",)


def shards_experts_over_dp(layout: DPLayout) -> bool:
    """Whether DP changes the weights on a rank: a MoE model in a DP group (EP on or off)."""
    return bool(layout.num_experts) and (layout.use_ep or layout.dp > 1)


def dp_weights(
    shape: ModelShape, layout: DPLayout, mxfp4_backend: str = "triton", vllm_version: Version | None = None,
    max_num_batched_tokens: int = 0,
) -> tuple[tuple[int, ...], ...] | None:  # fmt: skip
    """Weight bytes on each (stage, TP rank) of DP engine 0 under vLLM's MoE layout, from the
    estimator's tensor table (``app.core.weights.weights_per_rank`` with ``dp`` and EP, EP rank =
    TP rank); None where DP and EP change nothing or without a tensor table.

    ``FusedMoEParallelConfig.make`` (fused_moe/config.py @28be48fa9): without EP the experts' w13/w2
    are split over tp × dp (``flatten_tp_across_dp_and_pcp``) while attention, dense MLPs, embeddings
    and the LM head stay split over tp; with EP each rank holds whole experts (``determine_expert_map``)."""
    if shape.weights is None or not shards_experts_over_dp(layout):
        return None
    return tuple(
        tuple(weights.weights_per_rank(shape, layout.tp, layout.pp, stage, dp=layout.dp,
                                       enable_expert_parallel=layout.use_ep, ep_rank=tp_rank,
                                       mxfp4_backend=mxfp4_backend, vllm_version=vllm_version,
                                       max_num_batched_tokens=max_num_batched_tokens).nbytes
              for tp_rank in range(layout.tp))
        for stage in range(layout.pp)
    )


def with_dp_weights(
    ranks: tuple[RankInput, ...], shape: ModelShape | None, layout: DPLayout, mxfp4_backend: str = "triton",
    vllm_version: tuple[int, int, int] | None = None, max_num_batched_tokens: int = 0,
) -> tuple[RankInput, ...]:  # fmt: skip
    """Estimated ranks with the weights of DP engine 0 under vLLM's MoE layout (experts over dp × tp:
    split matrices without EP, whole experts with EP). Ranks holding the same bytes share one cell,
    as `estimate_ranks` shares a stage's cells (the ledger and the sizing search count them once)."""
    if shape is None:
        return ranks
    table = dp_weights(shape, layout, mxfp4_backend, vllm_version, max_num_batched_tokens)
    if table is None:
        return ranks
    cells: dict[tuple[int, str], Cell] = {}
    out = []
    for i, rank in enumerate(ranks):
        stage, tp_rank = divmod(i % (layout.tp * layout.pp), layout.tp)
        if layout.use_ep:
            note = f"experts over {layout.ep_size} EP ranks (dp × tp), {layout.experts_on(tp_rank)} on this one"
        else:
            note = (f"expert matrices over tp × dp = {layout.moe_tp_size} GPUs (FusedMoEParallelConfig.make, "
                    f"flatten_tp_across_dp_and_pcp), the rest over tp = {layout.tp}")
        nbytes = table[stage][tp_rank]
        cell = cells.setdefault((nbytes, note), Cell(nbytes, "estimated", note))
        out.append(replace(rank, weights=cell))
    return tuple(out)
