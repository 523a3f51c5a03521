"""Weights per rank, as vLLM loads them.

Theory of operation. ``weights_model`` reads a config.json once into a table of tensors
(``weights_build``: whole-model shapes and vLLM's sharding rule for each, with the checkpoint's
quantization scheme from ``weights_quant``). ``weights_per_rank`` prices one rank: the decoder
layers of its pipeline stage (``get_pp_indices``, vllm/distributed/utils.py), the embedding on the
first stage, the final norm and LM head on the last, the rotary caches everywhere, each tensor cut
as its vLLM class cuts it at this TP / DP / EP. Results are cached per distinct rank geometry.

What vLLM logs as "Model loading took X GiB" is ``DeviceMemoryProfiler.consumed_memory``
(vllm/utils/mem_utils.py): torch's allocated bytes after ``load_model`` minus before, so the
count includes buffers (rotary caches) and the copies ``process_weights_after_loading`` keeps.

Exact mode: given the checkpoint's ``model.safetensors.index.json``, its ``metadata.total_size``
replaces the tensor-by-tensor count of the checkpoint; each rank gets the bytes the tensor-by-tensor
count puts on it, scaled by total_size / (the same count over the whole checkpoint, MTP layers
included), plus the vLLM-side extras (vocab padding, rotary caches, MLA copies) unscaled.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from app.core.errors import InputError
from app.core.model_config import shape_from_config
from app.core.shape import ModelShape
from app.core.weights_build import build_weights_model
from app.core.weights_tensor import Geometry, Version, WeightsModel, rank_group_bytes

_WHY = {
    "embedding": "VocabParallelEmbedding: vocab padded to a multiple of 64, ÷ TP (first stage)",
    "lm_head": "ParallelLMHead: padded vocab ÷ TP (last stage; tied: the embedding itself, or its copy when PP > 1)",
    "attention": "QKVParallelLinear q/k/v (KV heads replicated when TP > KV heads), RowParallelLinear o_proj",
    "mlp": "MergedColumnParallelLinear gate_up ÷ TP (ungated phi/GPT-J/GPT-NeoX/StarCoder2: ColumnParallelLinear up), "
    "RowParallelLinear down ÷ TP",
    "experts": "FusedMoE w13/w2: intermediate ÷ (TP×DP), or whole experts ÷ (TP×DP) with expert parallelism",
    "shared_experts": "shared experts as a TP-sharded MLP",
    "router": "router gate (ReplicatedLinear): whole on every rank",
    "norms": "RMSNorm/LayerNorm weights: whole on every rank",
    "mixer": "Mamba / gated-DeltaNet projections, conv and A/D/dt: ÷ TP",
    "vision": "vision tower: column/row-parallel blocks ÷ TP, patch/position embeddings whole (first stage)",
    "rope": "rotary cos_sin_cache buffers (rows per rope type × rotary_dim, model dtype), whole on every rank",
    "buffers": "per-token buffers the model class allocates at init (Qwen3-VL deepstack: levels × batched tokens)",
}


@dataclass(frozen=True)
class GroupBytes:
    group: str
    nbytes: int
    explanation: str


@dataclass(frozen=True)
class WeightsEstimate:
    """Weight bytes on one rank and how they were counted."""

    nbytes: int
    groups: tuple[GroupBytes, ...]
    source: str
    notes: tuple[str, ...]

    def explain(self) -> str:
        parts = ", ".join(f"{g.group} {g.nbytes / 2**30:.2f} GiB" for g in self.groups if g.nbytes)
        return f"{self.source}: {parts}"


def weights_model(config: Mapping[str, object], safetensors_index: Mapping[str, object] | None = None) -> WeightsModel:
    """Read a config.json (and optionally its checkpoint's safetensors index) into a WeightsModel."""
    return build_weights_model(config, shape_from_config(config), safetensors_index)


@functools.lru_cache(maxsize=4096)
def _per_rank(m: WeightsModel, g: Geometry) -> WeightsEstimate:
    if not (0 <= g.pp_rank < g.pp):
        raise InputError("layout.pp", f"pipeline rank {g.pp_rank} is outside 0…{g.pp - 1}")
    by_group = rank_group_bytes(m, g)
    source = "tensor by tensor from config.json"
    notes = m.notes
    if m.index_total_bytes is not None:
        ratio = m.index_total_bytes / max(1, m.index_basis)
        source = "safetensors index total_size, split by the tensor-by-tensor sharding"
        notes += (f"index total_size / tensor-by-tensor checkpoint count = {ratio:.4f}",)
    groups = tuple(GroupBytes(k, v, _WHY.get(k, k)) for k, v in sorted(by_group.items(), key=lambda kv: -kv[1]))
    return WeightsEstimate(sum(by_group.values()), groups, source, notes)


def _model_of(model: WeightsModel | ModelShape | Mapping[str, object]) -> WeightsModel:
    if isinstance(model, WeightsModel):
        return model
    if isinstance(model, ModelShape):
        if model.weights is None:
            raise InputError("model", "estimated weights need the model's config.json (or a catalogue model)")
        return model.weights
    return weights_model(model)


def weights_per_rank(
    model: WeightsModel | ModelShape | Mapping[str, object],
    tp: int = 1,
    pp: int = 1,
    pp_rank: int = 0,
    *,
    dp: int = 1,
    enable_expert_parallel: bool = False,
    ep_rank: int = 0,
    mxfp4_backend: str = "triton",
    vllm_version: Version | None = None,
    max_num_batched_tokens: int = 0,
) -> WeightsEstimate:
    """Weight bytes vLLM holds on one rank of ``model`` (a WeightsModel, a parsed ModelShape or a
    config.json mapping) at this layout, by the rules of ``vllm_version`` (None: the newest); cached
    per model and rank geometry. ``max_num_batched_tokens`` sizes the buffers some model classes
    allocate while they are built (0: not counted)."""
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp)):
        if value < 1:
            raise InputError(f"layout.{name}", f"must be at least 1, got {value}")
    if max_num_batched_tokens < 0:
        raise InputError("engine.max_num_batched_tokens", f"must not be negative, got {max_num_batched_tokens}")
    if mxfp4_backend not in ("triton", "marlin"):
        raise InputError(
            "engine.mxfp4_backend", f"{mxfp4_backend!r}: vLLM's MXFP4 MoE backends here are triton, marlin"
        )
    g = Geometry(tp, pp, pp_rank, dp, enable_expert_parallel, ep_rank, mxfp4_backend, vllm_version,
                 max_num_batched_tokens)  # fmt: skip
    return _per_rank(_model_of(model), g)


def weights_per_stage(
    model: WeightsModel | ModelShape | Mapping[str, object], tp: int, pp: int, dp: int = 1, ep: bool = False
) -> tuple[WeightsEstimate, ...]:
    """One estimate per pipeline stage (the TP ranks of a stage hold the same bytes; with expert
    parallelism the first ranks may hold one expert more — rank 0's count is the one given)."""
    m = _model_of(model)
    return tuple(weights_per_rank(m, tp, pp, r, dp=dp, enable_expert_parallel=ep) for r in range(pp))
