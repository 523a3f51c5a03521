"""Estimated ledger rows for planning before the GPUs exist: a term-by-term model of vLLM.

Every row here is an estimate and is marked so; a measured value always replaces it. Each row
comes from its own module, which cites the vLLM code it counts:

- weights: tensor by tensor as vLLM shards them (``app.core.weights``: column/row-parallel
  linears, KV-head replication, padded vocab-parallel embeddings, experts, quantization scales;
  exact from the checkpoint's safetensors index when given), for the rank's pipeline stage.
- activation (app.core.profile_run, app.core.vision): the torch peak of `profile_run` — the
  dummy forward of max_num_batched_tokens tokens, the dummy sampler over min(max_num_seqs,
  tokens) rows of full-vocabulary logits on the last pipeline stage, the vision encoder's dummy
  batch; V0's sampler where V0 runs.
- non_torch (app.core.nontorch): lazily loaded modules and library workspaces, plus the
  communicator buffers while the init snapshot preceded NCCL set-up (V0, V1 < 0.11).
- cuda_graphs (app.core.cudagraphs): the capture sizes of the version, FULL/PIECEWISE counts,
  the largest graph's activations plus driver memory per captured size and layer; 0 with enforce_eager.

The few constants fitted to measurements live in app.core.calibration (scored leave-one-out by
bench/bench_estimates_loo.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core import weights
from app.core.calibration import DEFAULT, Calibration
from app.core.cudagraphs import AttentionFacts, CudagraphMode, GraphTerms, graph_terms, max_capture_size
from app.core.dequant_linear import AWQ_DEQUANT_MIN_TOKENS, dequant_peak_bytes, plain_kernel
from app.core.kvspec import pp_layer_split
from app.core.ledger import Cell, RankInput
from app.core.nontorch import (
    Interconnect,
    allreduce_fusion_workspace_bytes,
    counts_whole_device,
    non_torch_terms,
    nvls_possible,
)
from app.core.profile_run import ActivationTerms, ProfileInputs, activation_terms, forward_per_token
from app.core.repack_cache import first_stage_repack_cached
from app.core.shape import ModelShape
from app.core.versions import VersionRules
from app.core.vision import VisionGeometry

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
    expert_parallel: bool = False
    v1: bool | None = None  # None: the version's default engine (V1 from 0.8.0)
    interconnect: Interconnect = "unknown"
    cudagraph_mode: CudagraphMode = "auto"
    vision: VisionGeometry | None = None
    calibration: Calibration = field(default=DEFAULT)
    max_model_len: int | None = None
    mxfp4_backend: str = "triton"  # see mxfp4_backend_for
    capability: tuple[int, int] | None = None  # the card's compute capability (FA3 on 9.x: app.core.cudagraphs)
    flashinfer_sampler: bool = False  # V1's sampler on FlashInfer's path (app.core.profile_run.sampler_bytes_per_logit)
    quantization: str | None = None  # vLLM's --quantization as given ("awq"/"gptq" force the plain kernels)
    dp: int = 1  # data-parallel engines of the deployment (vLLM turns the all-reduce fusion off at DP > 1)

    @property
    def uses_v1(self) -> bool:
        """V1 is the default engine from v0.8.0 (`VLLM_USE_V1` oracle, PR #13726, 2025-03-15)."""
        return self.v1 if self.v1 is not None else self.rules.version >= (0, 8, 0)


def mxfp4_backend_for(capability: tuple[int, int] | None) -> str:
    """The MXFP4 MoE backend whose weight layout vLLM keeps (gpt-oss): below compute capability 9.0
    (Ampere, Ada) vLLM always takes Marlin's weight-only FP4 path — `get_mxfp4_backend`,
    vllm/model_executor/layers/quantization/mxfp4.py @15b8fef45 (v0.10.2): `capability[0] < 9` →
    MARLIN; `select_mxfp4_moe_backend`, fused_moe/oracle/mxfp4.py @8f121f787: triton_kernels need
    9.0 ≤ cc < 11.0. Hopper and Blackwell (and an unknown card): Triton, whose layout — and Marlin
    before v0.12, when vLLM bundled no triton_kernels — the release decides (weights_tensor.mxfp4_layout)."""
    return "marlin" if capability is not None and capability < (9, 0) else "triton"


def embedding_bytes(shape: ModelShape) -> int:
    """Input embedding bytes (the LM head is the same size when untied)."""
    return (shape.vocab_size or 0) * shape.hidden_size * _DTYPE_BYTES.get(shape.dtype, 2)


def weights_per_stage(
    shape: ModelShape, tp: int, pp: int, mxfp4_backend: str = "triton", ctx: EstimateContext | None = None
) -> tuple[int, ...]:
    """Estimated weight bytes on one rank of each pipeline stage (``app.core.weights``; with ``ctx``,
    by its vLLM version's rules and its batched-token budget)."""
    if shape.weights is not None:
        return tuple(_weights(shape, tp, pp, r, mxfp4_backend, ctx).nbytes for r in range(pp))
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
    """(sharded, unsharded) bytes of the dummy forward's peak per batched token at this TP degree
    (app.core.profile_run.forward_per_token): what a change of max_num_batched_tokens moves."""
    return forward_per_token(shape, tp)


def _profile_inputs(shape: ModelShape, ctx: EstimateContext, last_stage: bool) -> ProfileInputs:
    return ProfileInputs(
        tp=ctx.tp, max_num_batched_tokens=ctx.max_num_batched_tokens, max_num_seqs=ctx.max_num_seqs,
        version=ctx.rules.version, last_stage=last_stage, expert_parallel=ctx.expert_parallel,
        vision=ctx.vision if ctx.uses_v1 else None, v1=ctx.uses_v1, max_model_len=ctx.max_model_len,
        flashinfer_sampler=ctx.flashinfer_sampler,
        linear_kernel=plain_kernel(shape.quantization, ctx.quantization, ctx.rules.version),
    )  # fmt: skip


def activation_for_stage(shape: ModelShape, ctx: EstimateContext, last_stage: bool) -> ActivationTerms:
    """The profile-run peak on one rank of a pipeline stage (the sampler runs on the last only)."""
    return activation_terms(shape, _profile_inputs(shape, ctx, last_stage))


def activation_bytes(shape: ModelShape, ctx: EstimateContext) -> int:
    """Estimated profiled activation peak on one rank of the last pipeline stage."""
    return activation_for_stage(shape, ctx, True).peak


def non_torch_bytes(shape: ModelShape, ctx: EstimateContext) -> int:
    """Estimated non-torch increase on one rank (app.core.nontorch, app.core.repack_cache)."""
    return non_torch_cell(shape, ctx).bytes


def non_torch_cell(shape: ModelShape, ctx: EstimateContext) -> Cell:
    """The non-torch row: app.core.nontorch's terms, plus the blocks the Marlin repack of a GPTQ/AWQ
    checkpoint leaves cached where the version counts them (app.core.repack_cache)."""
    nvls = nvls_possible(ctx.tp, ctx.capability, ctx.interconnect)
    nt = non_torch_terms(ctx.rules.version, ctx.uses_v1, ctx.tp * ctx.pp, ctx.interconnect, ctx.calibration,
                         fusion_workspace_bytes(shape, ctx), nvls)  # fmt: skip
    cached = 0
    if shape.weights is not None and counts_whole_device(ctx.rules.version, ctx.uses_v1):
        cached = first_stage_repack_cached(shape.weights, ctx.tp, ctx.pp, ctx.rules.version)
    if not cached:
        return Cell(nt.total, "estimated", nt.note)
    note = (f"{nt.note}; + {cached / GIB:.2f} GiB of torch blocks the Marlin repack of the GPTQ/AWQ weights "
            "leaves cached (this version counts cached blocks as non-torch; app.core.repack_cache)")
    return Cell(nt.total + cached, "estimated", note)


def fusion_workspace_bytes(shape: ModelShape, ctx: EstimateContext) -> int:
    """The all-reduce fusion workspace on one rank (app.core.nontorch)."""
    if not ctx.uses_v1:
        return 0
    dtype_bytes = _DTYPE_BYTES.get(shape.dtype, 2)
    return allreduce_fusion_workspace_bytes(ctx.rules.version, ctx.capability, ctx.tp, ctx.pp, ctx.dp,
                                            shape.hidden_size, dtype_bytes, ctx.max_num_batched_tokens)  # fmt: skip


def cuda_graph_terms(shape: ModelShape, ctx: EstimateContext) -> GraphTerms:
    """The CUDA-graph pool on one rank of the deepest stage (app.core.cudagraphs)."""
    layers = max(pp_layer_split(shape.num_layers, ctx.pp))
    sharded, unsharded = forward_per_token(shape, ctx.tp, ctx.expert_parallel, ctx.uses_v1)
    return graph_terms(
        ctx.rules.version, ctx.uses_v1, ctx.cudagraph_mode, ctx.enforce_eager, ctx.max_num_seqs,
        ctx.max_num_batched_tokens, layers, sharded + unsharded, ctx.calibration,
        max_capture_size(shape.architecture, ctx.rules.version), attention_facts(shape, ctx.tp, ctx.capability),
        in_budget=ctx.rules.cuda_graphs_in_budget, moe=(shape.num_experts or 0) > 1,
        chunked_attention=bool(shape.attention_chunk_size), dequant=dequant_held(shape, ctx),
    )  # fmt: skip


def dequant_held(shape: ModelShape, ctx: EstimateContext) -> tuple[int, int]:
    """(bytes, least tokens) of the dequantized weight the plain AWQ/GPTQ kernels hold in a forward
    (app.core.dequant_linear), for the graph captures: (0, 0) on every other path."""
    kernel = plain_kernel(shape.quantization, ctx.quantization, ctx.rules.version)
    if kernel is None:
        return (0, 0)
    least = AWQ_DEQUANT_MIN_TOKENS if kernel == "awq" else 1
    return (dequant_peak_bytes(shape, kernel, ctx.tp, least, ctx.rules.version), least)


def attention_facts(shape: ModelShape, tp: int, capability: tuple[int, int] | None) -> AttentionFacts:
    """What picks the FULL graphs' attention backend (`get_num_attention_heads`: heads // TP)."""
    return AttentionFacts(capability, shape.dtype, shape.head_dim, max(1, shape.num_attention_heads // tp),
                          shape.model_type, shape.architecture, shape.mla_latent_dim is not None)  # fmt: skip


def cuda_graph_bytes(shape: ModelShape, ctx: EstimateContext) -> int:
    """Estimated CUDA-graph pool on one rank (0 with enforce_eager)."""
    return cuda_graph_terms(shape, ctx).total


def _act_note(terms: ActivationTerms, ctx: EstimateContext) -> str:
    parts = [
        f"profile run: forward of {ctx.max_num_batched_tokens:,} tokens {terms.forward / GIB:.2f} GiB",
        f"sampler over {min(ctx.max_num_seqs, ctx.max_num_batched_tokens):,} rows {terms.sampler / GIB:.2f} GiB"
        if terms.sampler
        else "no sampler (not the last pipeline stage)",
    ]
    if terms.encoder:
        parts.append(f"vision encoder {terms.encoder / GIB:.2f} GiB")
    if terms.dequant:
        kernel = ctx.quantization
        parts.append(f"+ {terms.dequant / GIB:.2f} GiB beside the forward, the largest linear's fp16 weight dequantized"
                     f" by the plain {kernel} kernel (--quantization {kernel}; app.core.dequant_linear)")
    return "; ".join(parts + list(terms.notes)) + "; peak = the largest step"


def _row_cells(shape: ModelShape, ctx: EstimateContext) -> tuple[Cell, Cell, Cell, Cell]:
    """(non_torch, cuda_graphs, activation of a middle stage, activation of the last stage)."""
    graphs = cuda_graph_terms(shape, ctx)
    last = activation_for_stage(shape, ctx, True)
    mid = activation_for_stage(shape, ctx, False) if ctx.pp > 1 else last
    return (
        non_torch_cell(shape, ctx),
        Cell(graphs.total, "estimated", graphs.note),
        Cell(mid.peak, "estimated", _act_note(mid, ctx)),
        Cell(last.peak, "estimated", _act_note(last, ctx)),
    )


def _weights(
    shape: ModelShape, tp: int, pp: int, stage: int, mxfp4_backend: str, ctx: EstimateContext | None
) -> weights.WeightsEstimate:
    version, tokens = (ctx.rules.version, ctx.max_num_batched_tokens) if ctx is not None else (None, 0)
    return weights.weights_per_rank(shape, tp, pp, stage, mxfp4_backend=mxfp4_backend, vllm_version=version,
                                    max_num_batched_tokens=tokens)  # fmt: skip


def estimate_ranks(
    shape: ModelShape, ctx: EstimateContext, total_bytes: int, free_at_start: int | None
) -> tuple[RankInput, ...]:
    """Estimated rows for every rank of one engine (tp × pp ranks): each stage's rows worked out
    once (the weights estimate once per stage, its note once per distinct estimate) and shared by
    the stage's TP ranks, whose inputs differ only in their labels."""
    non_torch_cell, graphs_cell, act_mid, act_last = _row_cells(shape, ctx)
    non_torch_cell = with_memory_in_use(non_torch_cell, ctx, total_bytes, free_at_start)
    total = Cell(total_bytes, "measured", "GPU memory size")
    free = Cell(free_at_start, "measured") if free_at_start is not None else None
    ranks: list[RankInput] = []
    weights_cells = _stage_weight_cells(shape, ctx)
    for stage, weights_cell in enumerate(weights_cells):
        act_cell = act_last if stage == len(weights_cells) - 1 else act_mid
        prefix = f"PP{stage}_TP" if ctx.pp > 1 else "TP"
        ranks += [RankInput(f"{prefix}{tp_rank}", total, free, weights_cell, non_torch_cell, graphs_cell, act_cell)
                  for tp_rank in range(ctx.tp)]  # fmt: skip
    return tuple(ranks)


def with_memory_in_use(non_torch: Cell, ctx: EstimateContext, total_bytes: int, free_at_start: int | None) -> Cell:
    """The non-torch row plus the memory already in use on the card before vLLM starts (other
    processes), where the version counts it: V0 before 0.6.5 and V1 before 0.9.1 take non-torch
    memory as `mem_get_info` total − free after the profile run minus torch's allocated bytes —
    every process on the device, not just this one (`Worker.determine_num_available_blocks`,
    vllm/worker/worker.py @63f1fde27, v0.6.4; `Worker.determine_available_memory`,
    vllm/v1/worker/gpu_worker.py @7423cf0a9, v0.8.5). Later versions take an init snapshot and
    refuse to start instead when free memory is below the request (app.core.ledger `_preflight`)."""
    if free_at_start is None or not counts_whole_device(ctx.rules.version, ctx.uses_v1):
        return non_torch
    in_use = max(0, total_bytes - free_at_start)
    if in_use == 0:
        return non_torch
    note = (f"{non_torch.note}; + {in_use / GIB:.2f} GiB in use on the card before vLLM started "
            "(total − free at start: other processes, which this version counts as non-torch)")
    return Cell(non_torch.bytes + in_use, non_torch.source, note)


def _stage_weight_cells(shape: ModelShape, ctx: EstimateContext) -> list[Cell]:
    """Each pipeline stage's weights cell: `weights_per_stage`'s bytes, noted with how they were counted."""
    if shape.weights is None:
        return [Cell(b, "estimated", "checkpoint bytes / TP for this stage")
                for b in weights_per_stage(shape, ctx.tp, ctx.pp, ctx.mxfp4_backend, ctx)]  # fmt: skip
    notes: dict[weights.WeightsEstimate, str] = {}  # middle stages of equal depth give equal estimates
    cells = []
    for stage in range(ctx.pp):
        est = _weights(shape, ctx.tp, ctx.pp, stage, ctx.mxfp4_backend, ctx)
        note = notes.get(est)
        if note is None:
            note = notes[est] = est.explain()
        cells.append(Cell(est.nbytes, "estimated", note))
    return cells
