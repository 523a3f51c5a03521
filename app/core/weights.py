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
from app.core.weights_build import Tensor, Tensors, build_tensors
from app.core.weights_quant import QuantPlan, quant_plan

VOCAB_PADDING = 64  # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE

_WHY = {
    "embedding": "VocabParallelEmbedding: vocab padded to a multiple of 64, ÷ TP (first stage)",
    "lm_head": "ParallelLMHead: padded vocab ÷ TP (last stage; tied: the embedding itself, or its copy when PP > 1)",
    "attention": "QKVParallelLinear q/k/v (KV heads replicated when TP > KV heads), RowParallelLinear o_proj",
    "mlp": "MergedColumnParallelLinear gate_up ÷ TP, RowParallelLinear down ÷ TP",
    "experts": "FusedMoE w13/w2: intermediate ÷ (TP×DP), or whole experts ÷ (TP×DP) with expert parallelism",
    "shared_experts": "shared experts as a TP-sharded MLP",
    "router": "router gate (ReplicatedLinear): whole on every rank",
    "norms": "RMSNorm/LayerNorm weights: whole on every rank",
    "mixer": "Mamba / gated-DeltaNet projections, conv and A/D/dt: ÷ TP",
    "vision": "vision tower: column/row-parallel blocks ÷ TP, patch/position embeddings whole (first stage)",
    "rope": "rotary cos_sin_cache buffer (max_position × rotary_dim, model dtype), whole on every rank",
}
_VLLM_ONLY = frozenset({"rope"})  # not in the checkpoint: never scaled by the index's total_size


@dataclass(frozen=True)
class Geometry:
    """Where a rank sits: tensor, pipeline, data and expert parallelism."""

    tp: int = 1
    pp: int = 1
    pp_rank: int = 0
    dp: int = 1
    enable_expert_parallel: bool = False
    ep_rank: int = 0


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


@dataclass(frozen=True, eq=False)
class WeightsModel:
    """A config's tensor table (compared by identity: build it once per parsed config)."""

    tensors: Tensors
    quant: QuantPlan
    num_layers: int
    tied: bool
    index_total_bytes: int | None = None
    mtp_layers: int = 0

    @functools.cached_property
    def checkpoint_bytes(self) -> int:
        """The tensor-by-tensor count of the whole checkpoint (unpadded, MTP layers included)."""
        return _checkpoint_bytes(self)

    @property
    def notes(self) -> tuple[str, ...]:
        return self.tensors.notes + self.quant.notes


def weights_model(config: Mapping[str, object], safetensors_index: Mapping[str, object] | None = None) -> WeightsModel:
    """Read a config.json (and optionally its safetensors index) into a WeightsModel."""
    from app.core.hfconfig import HFConfig
    from app.core.mamba import DTYPE_BYTES
    from app.core.shape import shape_from_config

    shape = shape_from_config(config)
    quant = quant_plan(config, DTYPE_BYTES[shape.dtype])
    cfg = HFConfig(config)
    total = index_total_size(safetensors_index) if safetensors_index is not None else None
    mtp = cfg.int_or_none("num_nextn_predict_layers", "mtp_num_hidden_layers") or 0
    return WeightsModel(build_tensors(config, shape, quant), quant, shape.num_layers, shape.tie_word_embeddings,
                        total, mtp)  # fmt: skip


def index_total_size(index: Mapping[str, object]) -> int:
    """``metadata.total_size`` of a model.safetensors.index.json, validated."""
    meta = index.get("metadata") if isinstance(index, Mapping) else None
    total = meta.get("total_size") if isinstance(meta, Mapping) else None
    if isinstance(total, float) and total.is_integer():
        total = int(total)
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        raise InputError("model.safetensors_index.metadata.total_size", "a positive integer (bytes) is required")
    wm = index.get("weight_map")
    if wm is not None and not (isinstance(wm, Mapping) and all(isinstance(v, str) for v in wm.values())):
        raise InputError("model.safetensors_index.weight_map", "expected an object of tensor name → file name")
    return total


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _pad(n: int, to: int) -> int:
    return _ceil(n, to) * to


def _local_experts(n: int, g: Geometry) -> int:
    """fused_moe/layer.py ``determine_expert_map`` (linear placement): E // ep, remainder to the first ranks."""
    if not g.enable_expert_parallel:
        return n
    ep = g.tp * g.dp
    return n // ep + (1 if g.ep_rank % ep < n % ep else 0)


def _shape_on_rank(t: Tensor, g: Geometry) -> tuple[int, int, int]:
    r, c, n, tp = t.rows, t.cols, t.count, g.tp
    moe_tp = 1 if g.enable_expert_parallel else tp * g.dp
    if t.split == "col":
        r = _ceil(r, tp)
    elif t.split == "row":
        c = _ceil(c, tp)
    elif t.split == "kv":
        heads = r // t.unit
        r = t.unit * (1 if tp >= heads else _ceil(heads, tp))
    elif t.split == "vocab":
        r = _ceil(_pad(r, VOCAB_PADDING), tp)
    elif t.split in ("e13", "e2", "erep"):
        n = _local_experts(n, g)
        if t.split == "e13":
            r = t.unit * _pad(_ceil(r // t.unit, moe_tp), t.pad)
        elif t.split == "e2":
            c = _pad(_ceil(c, moe_tp), t.pad)
    return r, c, n


def tensor_bytes(t: Tensor, g: Geometry) -> int:
    """Bytes of tensor ``t`` on a rank at geometry ``g``."""
    r, c, n = _shape_on_rank(t, g)
    return n * (t.scheme.nbytes(r, c) if t.scheme is not None else r * c * t.dtype_bytes)


def _stage_tensors(m: WeightsModel, g: Geometry) -> list[tuple[Tensor, int]]:
    """(tensor, multiplicity) pairs on the stage of ``g``."""
    from app.core.kvspec import pp_layer_split

    split = pp_layer_split(m.num_layers, g.pp)
    start = sum(split[: g.pp_rank])
    counts: dict[int, int] = {}
    for idx in m.tensors.layer_index[start : start + split[g.pp_rank]]:
        counts[idx] = counts.get(idx, 0) + 1
    out = [(t, k) for idx, k in counts.items() for t in m.tensors.layers[idx]]
    out += [(t, 1) for t in m.tensors.every]
    if g.pp_rank == 0:
        out += [(t, 1) for t in m.tensors.first + m.tensors.vision]
    if g.pp_rank == g.pp - 1:
        out += [(t, 1) for t in m.tensors.last if not (t.group == "lm_head" and m.tied and g.pp == 1)]
    return out


@functools.lru_cache(maxsize=4096)
def _per_rank(m: WeightsModel, g: Geometry) -> WeightsEstimate:
    if not (0 <= g.pp_rank < g.pp):
        raise InputError("layout.pp", f"pipeline rank {g.pp_rank} is outside 0…{g.pp - 1}")
    by_group: dict[str, int] = {}
    for t, k in _stage_tensors(m, g):
        by_group[t.group] = by_group.get(t.group, 0) + k * tensor_bytes(t, g)
    source = "tensor by tensor from config.json"
    notes = m.notes
    if m.index_total_bytes is not None:
        ratio = m.index_total_bytes / max(1, m.checkpoint_bytes)
        by_group = {k: v if k in _VLLM_ONLY else round(v * ratio) for k, v in by_group.items()}
        source = "safetensors index total_size, split by the tensor-by-tensor sharding"
        notes += (f"index total_size / tensor-by-tensor checkpoint count = {ratio:.4f}",)
    groups = tuple(GroupBytes(k, v, _WHY.get(k, k)) for k, v in sorted(by_group.items(), key=lambda kv: -kv[1]))
    return WeightsEstimate(sum(by_group.values()), groups, source, notes)


def _checkpoint_bytes(m: WeightsModel) -> int:
    """Whole checkpoint, as stored: every tensor at TP1, vocab unpadded, MTP layers as the last layer."""
    one = Geometry()
    total = 0
    for t, k in _stage_tensors(m, one):
        if t.group in _VLLM_ONLY or t.name.startswith("self_attn.W_UK_T"):
            continue
        b = tensor_bytes(t, one)
        if t.split == "vocab" and t.rows:
            b = b * t.rows // _pad(t.rows, VOCAB_PADDING)
        total += k * b
    if m.mtp_layers:
        last = m.tensors.layers[m.tensors.layer_index[-1]]
        layer = sum(tensor_bytes(t, one) for t in last if not t.name.startswith("self_attn.W_UK_T"))
        embed = m.tensors.first[0]
        per_mtp = layer + 2 * embed.rows * embed.cols * embed.dtype_bytes + 2 * embed.cols**2 * embed.dtype_bytes
        total += m.mtp_layers * per_mtp
    return total


def weights_per_rank(
    model: WeightsModel | Mapping[str, object],
    tp: int = 1,
    pp: int = 1,
    pp_rank: int = 0,
    *,
    dp: int = 1,
    enable_expert_parallel: bool = False,
    ep_rank: int = 0,
) -> WeightsEstimate:
    """Weight bytes vLLM holds on one rank (``model``: a WeightsModel or a config.json mapping)."""
    m = model if isinstance(model, WeightsModel) else weights_model(model)
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp)):
        if value < 1:
            raise InputError(f"layout.{name}", f"must be at least 1, got {value}")
    return _per_rank(m, Geometry(tp, pp, pp_rank, dp, enable_expert_parallel, ep_rank))


def weights_per_stage(model: WeightsModel, tp: int, pp: int, **kw: object) -> tuple[WeightsEstimate, ...]:
    """One estimate per pipeline stage (TP ranks of a stage hold the same bytes)."""
    return tuple(weights_per_rank(model, tp, pp, r, **kw) for r in range(pp))  # type: ignore[arg-type]
