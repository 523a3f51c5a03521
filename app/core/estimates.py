"""Estimated ledger rows for planning before the GPUs exist.

Every row here is an estimate and is marked so; a measured value always replaces it.

- weights: tensor by tensor as vLLM shards them (``app.core.weights``: column/row-parallel
  linears, KV-head replication, padded vocab-parallel embeddings, experts, quantization scales;
  exact from the checkpoint's safetensors index when given), for the rank's pipeline stage.
- non_torch: CUDA context growth, cuBLAS/attention workspaces and, when TP > 1, the
  communicator buffers. Before vLLM 0.10.2 the init snapshot was taken before NCCL init, so the
  NCCL buffers showed up in this row (VLLM-NOTES §1.1 step 2); measured PR #10511: TP1 1.79 GiB →
  TP2 3.58 GiB on V0, file 14 (v0.10.2, TP8): 0.21 GiB.
- activation: the peak of vLLM's profile run, a dummy forward pass of max_num_batched_tokens
  tokens plus a dummy sampler pass over max_num_seqs rows of logits
  (`profile_run`, vllm/v1/worker/gpu_model_runner.py). The per-token part has a piece that
  shards with TP (MLP / expert intermediates, attention projections) and a piece that does not
  (the residual stream, norms, the all-reduce buffers): never the TP1 peak divided by TP.
  Published measurements: 0.085–0.10 MiB per batched token on dense 7–8B models
  (measured-figures.md §2.1), and a peak that did not shrink from TP1 to TP2 on Llama-3-8B (§2.2).
- cuda_graphs: about 26 MiB per captured piecewise graph for small models (vLLM PRs #22897,
  #23184), more for many layers; vLLM captures up to 67 sizes by default (file 14:
  "PIECEWISE 67/67", 3.45 GiB for a 94-layer MoE at TP8). Zero with enforce_eager.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core import weights
from app.core.kvspec import pp_layer_split
from app.core.ledger import Cell, RankInput
from app.core.shape import ModelShape
from app.core.versions import VersionRules

MIB = 1024**2
GIB = 1024**3

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class EstimateContext:
    """What the estimates depend on besides the model."""

    tp: int
    pp: int
    max_num_batched_tokens: int
    max_num_seqs: int
    enforce_eager: bool
    rules: VersionRules


def embedding_bytes(shape: ModelShape) -> int:
    """Input embedding bytes (the LM head is the same size when untied)."""
    return (shape.vocab_size or 0) * shape.hidden_size * _DTYPE_BYTES.get(shape.dtype, 2)


def weights_per_stage(shape: ModelShape, tp: int, pp: int) -> tuple[int, ...]:
    """Estimated weight bytes on one rank of each pipeline stage (``app.core.weights``)."""
    if shape.weights is not None:
        return tuple(e.nbytes for e in weights.weights_per_stage(shape, tp, pp))
    embed = embedding_bytes(shape)
    head = embed if (not shape.tie_word_embeddings or pp > 1) else 0
    layer_bytes = max(0, shape.weight_bytes - embed - (0 if shape.tie_word_embeddings else embed))
    split = pp_layer_split(shape.num_layers, pp)
    out = []
    for stage, n_layers in enumerate(split):
        stage_bytes = layer_bytes * n_layers // max(1, shape.num_layers)
        if stage == 0:
            stage_bytes += embed
        if stage == pp - 1:
            stage_bytes += head
        out.append(stage_bytes // tp)
    return tuple(out)


def activation_slope(shape: ModelShape, tp: int) -> tuple[int, int]:
    """(sharded, unsharded) activation bytes per batched token at this TP degree.

    The profiled peak is dominated by transients that every rank holds at full hidden size
    (the residual stream and its norm/all-reduce copies, about 12 hidden-size vectors per
    token), plus the MLP or routed-expert intermediates, which shard with TP. Calibrated on
    the published figures: ≈ 0.1 MiB per batched token for dense 7–8B models at TP1, and a
    per-rank peak that barely moves from TP1 to TP2 (measured-figures.md §2.1, §2.2).
    """
    dtype_bytes = _DTYPE_BYTES.get(shape.dtype, 2)
    if shape.num_experts and shape.moe_intermediate_size and shape.num_experts_per_tok:
        inter = shape.moe_intermediate_size * shape.num_experts_per_tok
    else:
        inter = shape.intermediate_size or 4 * shape.hidden_size
    sharded = dtype_bytes * inter // 2 // tp
    unsharded = dtype_bytes * 12 * shape.hidden_size
    return sharded, unsharded


def moe_workspace_per_token(shape: ModelShape) -> int:
    """Fused-MoE intermediate caches per batched token (tokens × top-k rows, not sharded by EP)."""
    if not (shape.num_experts and shape.moe_intermediate_size and shape.num_experts_per_tok):
        return 0
    dtype_bytes = _DTYPE_BYTES.get(shape.dtype, 2)
    return dtype_bytes * shape.num_experts_per_tok * (2 * shape.moe_intermediate_size + shape.hidden_size)


def sampler_bytes(shape: ModelShape, ctx: EstimateContext) -> int:
    """The V1 dummy sampler pass: max_num_seqs rows of fp32 logits and about six same-sized copies
    (sort values and int64 indices, probabilities, cumulative sums, log-probabilities). V0's
    profile showed no such term (file 01: peak − weights is linear in batched tokens through 0)."""
    if ctx.rules.version < (0, 7, 0):
        return 0
    return ctx.max_num_seqs * (shape.vocab_size or 0) * 4 * 7


def activation_bytes(shape: ModelShape, ctx: EstimateContext) -> int:
    """Estimated profiled activation peak on one rank."""
    sharded, unsharded = activation_slope(shape, ctx.tp)
    per_token = sharded + unsharded + moe_workspace_per_token(shape)
    return ctx.max_num_batched_tokens * per_token + sampler_bytes(shape, ctx)


def non_torch_bytes(shape: ModelShape, ctx: EstimateContext) -> int:
    """Estimated non-torch memory increase on one rank (file 01, V0 TP1: 0.35 GiB; file 14,
    v0.10.2 TP8: 0.18 GiB; PR #10511, V0: +1.79 GiB of communicator buffers at TP2)."""
    base = (350 if ctx.rules.version < (0, 7, 0) else 200) * MIB
    if ctx.tp * ctx.pp > 1 and ctx.rules.nccl_in_non_torch:
        base += 1792 * MIB
    return base


def cuda_graph_bytes(shape: ModelShape, ctx: EstimateContext) -> int:
    """Estimated CUDA-graph pool on one rank (0 with enforce_eager).

    About 0.5 MiB per captured graph per decoder layer on the rank: measured 3.45 GiB for 67
    piecewise graphs × 94 layers (file 14), 1.92 GiB for 35 full + 67 piecewise graphs × 48
    layers (file 18), 2.37 GiB for 67 × 48 (file 15), 0.65 GiB for 67 × 28 (file 23).
    vLLM captures 67 batch sizes up to 512 by default, plus 35 full decode graphs from v0.11.
    """
    if ctx.enforce_eager:
        return 0
    n_graphs = 67 + (35 if ctx.rules.version >= (0, 11, 0) else 0)
    layers = max(pp_layer_split(shape.num_layers, ctx.pp))
    return n_graphs * layers * MIB // 2


def _weights_note(shape: ModelShape, ctx: EstimateContext, stage: int) -> str:
    if shape.weights is None:
        return "checkpoint bytes / TP for this stage"
    return weights.weights_per_rank(shape, ctx.tp, ctx.pp, stage).explain()


def estimate_ranks(
    shape: ModelShape, ctx: EstimateContext, total_bytes: int, free_at_start: int | None
) -> tuple[RankInput, ...]:
    """Estimated rows for every rank of one engine (tp × pp ranks)."""
    stages = weights_per_stage(shape, ctx.tp, ctx.pp)
    act = activation_bytes(shape, ctx)
    non_torch = non_torch_bytes(shape, ctx)
    graphs = cuda_graph_bytes(shape, ctx)
    total = Cell(total_bytes, "measured", "GPU memory size")
    free = Cell(free_at_start, "measured") if free_at_start is not None else None
    non_torch_cell = Cell(non_torch, "estimated", "context, workspaces, communicators")
    graphs_cell = Cell(graphs, "estimated", "captured graph sizes × per-graph pool")
    act_cell = Cell(act, "estimated", "profile-run peak for max_num_batched_tokens")
    ranks = []
    for stage, stage_bytes in enumerate(stages):
        # One set of cells per stage, shared by its TP ranks (the ledger computes them once).
        weights_cell = Cell(stage_bytes, "estimated", _weights_note(shape, ctx, stage))
        for tp_rank in range(ctx.tp):
            label = f"PP{stage}_TP{tp_rank}" if ctx.pp > 1 else f"TP{tp_rank}"
            ranks.append(
                RankInput(
                    label=label,
                    total=total,
                    free_at_start=free,
                    weights=weights_cell,
                    non_torch=non_torch_cell,
                    cuda_graphs=graphs_cell,
                    activation=act_cell,
                )
            )
    return tuple(ranks)
