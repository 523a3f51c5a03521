"""The tensor table of a model and the price of each tensor on one rank.

``Tensor`` is one weight of the whole model with the split vLLM applies to it (see
``weights_build`` for where each comes from); ``tensor_bytes`` cuts it for a rank ``Geometry``
(tensor, pipeline, data and expert parallelism) and prices it with its quantization ``Scheme``.
``stage_tensors`` picks a pipeline stage's tensors: its decoder layers (``get_pp_indices``,
vllm/distributed/utils.py, as ``kvspec.pp_layer_split``), the embedding on the first stage, the
final norm and LM head on the last, the rotary caches on every stage.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace

from app.core.errors import InputError
from app.core.weights_quant import QuantPlan, Scheme

VOCAB_PADDING = 64  # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE
VLLM_ONLY = frozenset({"rope"})  # groups not in the checkpoint


@dataclass(frozen=True)
class Tensor:
    """One weight (or a stack of ``count`` identical expert weights), whole-model shape."""

    name: str
    group: str
    rows: int
    cols: int
    split: str
    scheme: Scheme | None = None  # None: stored at the model dtype
    count: int = 1
    unit: int = 1  # head width ("kv" split) or merged matrices ("e13": 2 for gate+up)
    pad: int = 1  # round each rank's expert intermediate up to this (mxfp4 backends)
    kind: str = ""  # "linear" / "experts": what a quantization method may quantize; "" never
    dtype_bytes: int = 2


@dataclass(frozen=True)
class Tensors:
    """The model's tensors: per-layer tuples (deduplicated), the first- and last-stage extras."""

    layers: tuple[tuple[Tensor, ...], ...]  # distinct layer tuples
    layer_index: tuple[int, ...]  # layer i → index into ``layers``
    first: tuple[Tensor, ...]  # embed_tokens
    last: tuple[Tensor, ...]  # final norm, lm_head
    every: tuple[Tensor, ...]  # rope caches, vision tower (on the first stage: see weights.py)
    vision: tuple[Tensor, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Geometry:
    """Where a rank sits: tensor, pipeline, data and expert parallelism."""

    tp: int = 1
    pp: int = 1
    pp_rank: int = 0
    dp: int = 1
    enable_expert_parallel: bool = False
    ep_rank: int = 0
    mxfp4_backend: str = "triton"  # "triton" (Hopper/Blackwell) | "marlin" (pre-Hopper cards)


@dataclass(frozen=True, eq=False)
class WeightsModel:
    """A config's tensor table (compared by identity: build it once per parsed config)."""

    tensors: Tensors
    quant: QuantPlan
    num_layers: int
    tied: bool
    index_total_bytes: int | None = None
    mtp_layers: int = 0  # next-token-prediction layers in the checkpoint (not loaded by vLLM)
    mtp_embed_copies: int = 0  # vocab × hidden tensors each MTP layer stores (DeepSeek: embed + head)
    config: Mapping[str, object] | None = None  # the config.json it was read from (for re-quantizing)
    # The checkpoint's own tensor count that index_total_bytes corrects (kept when re-quantized)
    checkpoint_basis: int | None = None

    @functools.cached_property
    def index_basis(self) -> int:
        """What the index's total_size is compared with: the checkpoint as shipped."""
        return self.checkpoint_basis or self.checkpoint_bytes

    @functools.cached_property
    def checkpoint_bytes(self) -> int:
        """The tensor-by-tensor count of the whole checkpoint (unpadded, MTP layers included)."""
        return checkpoint_bytes(self)

    @property
    def notes(self) -> tuple[str, ...]:
        return self.tensors.notes + self.quant.notes


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


def pp_layer_split(num_layers: int, pp: int) -> tuple[int, ...]:
    """Layers per pipeline stage: vllm/distributed/utils.py ``get_pp_indices`` (even split, the
    remainder one layer each to the stages before the last, walking backwards)."""
    if not 1 <= pp <= num_layers:
        raise InputError("layout.pp", f"pp={pp} must be between 1 and the model's {num_layers} layers")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def requantized(m: WeightsModel, plan: QuantPlan) -> WeightsModel:
    """The same tensors under another quantization plan (e.g. vLLM's online ``--quantization fp8``)."""

    def redo(t: Tensor) -> Tensor:
        return replace(t, scheme=plan.scheme_for(t.name, t.kind == "experts") if t.kind else None)

    layers = tuple(tuple(redo(t) for t in layer) for layer in m.tensors.layers)
    ts = m.tensors
    tensors = replace(ts, layers=layers, first=tuple(map(redo, ts.first)), last=tuple(map(redo, ts.last)),
                      vision=tuple(map(redo, ts.vision)))  # fmt: skip
    return replace(m, tensors=tensors, quant=plan, checkpoint_basis=m.index_basis)


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
    if t.scheme is not None and t.scheme.name.startswith("mxfp4"):
        return _mxfp4_expert_bytes(t, g)
    r, c, n = _shape_on_rank(t, g)
    return n * (t.scheme.nbytes(r, c) if t.scheme is not None else r * c * t.dtype_bytes)


def _mxfp4_expert_bytes(t: Tensor, g: Geometry) -> int:
    """gpt-oss experts as the MXFP4 MoE backend holds them (quantization/mxfp4.py, v0.10.1 … @28be48fa9).

    Marlin (``_should_use_marlin`` / ``get_mxfp4_backend``: cards below sm90, or no triton_kernels):
    each rank's intermediate rounded up to 128 and the hidden size to 256 (``create_weights``).
    Triton (Hopper/Blackwell default): intermediate rounded up to 64; ``process_weights_after_loading``
    swizzles the scales into new tensors while the loaded ``w13/w2_weight_scale`` stay registered,
    so the scales are held twice. Measured: gpt-oss-120b TP1 H100, Marlin 65.97 GiB (v0.10.1),
    Triton 64.38 GiB (v0.14.1)."""
    scheme = t.scheme
    assert scheme is not None
    if g.mxfp4_backend == "checkpoint":  # as stored: no padding, one set of scales
        r, c, n = _shape_on_rank(replace(t, pad=1), g)
        return n * scheme.nbytes(r, c)
    marlin = g.mxfp4_backend == "marlin"
    t = replace(t, pad=128 if marlin else 64)
    r, c, n = _shape_on_rank(t, g)
    if marlin and t.split == "e13":
        c = _pad(c, 256)
    elif marlin and t.split == "e2":
        r = _pad(r, 256)
    scales = 0 if marlin else r * _ceil(c, scheme.group) * scheme.scale_bytes
    return n * (scheme.nbytes(r, c) + scales)


def stage_tensors(m: WeightsModel, g: Geometry) -> list[tuple[Tensor, int]]:
    """(tensor, multiplicity) pairs on the stage of ``g``."""
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


def checkpoint_bytes(m: WeightsModel) -> int:
    """Whole checkpoint, as stored: every tensor at TP1, vocab unpadded, MTP layers as the last layer."""
    one = Geometry(mxfp4_backend="checkpoint")
    total = 0
    for t, k in stage_tensors(m, one):
        if t.group in VLLM_ONLY or t.name.startswith("self_attn.W_UK_T"):
            continue
        b = tensor_bytes(t, one)
        if t.split == "vocab" and t.rows:
            b = b * t.rows // _pad(t.rows, VOCAB_PADDING)
        total += k * b
    if m.mtp_layers:
        # An MTP layer: one decoder layer like the last, its 2h → h projection (eh_proj / fc) and
        # norms, plus (DeepSeek-V3, GLM-4.5) its own embed_tokens and shared_head.head copies.
        last = m.tensors.layers[m.tensors.layer_index[-1]]
        layer = sum(tensor_bytes(t, one) for t in last if not t.name.startswith("self_attn.W_UK_T"))
        embed = m.tensors.first[0]
        h, b = embed.cols, embed.dtype_bytes
        total += m.mtp_layers * (layer + (2 * h * h + 3 * h + m.mtp_embed_copies * embed.rows * h) * b)
    return total


def rank_group_bytes(m: WeightsModel, g: Geometry) -> dict[str, int]:
    """Bytes per tensor group on a rank; with an index, the checkpoint groups scaled so that the
    whole checkpoint sums to its total_size (vLLM-only groups — rotary caches — unscaled)."""
    by_group: dict[str, int] = {}
    for t, k in stage_tensors(m, g):
        by_group[t.group] = by_group.get(t.group, 0) + k * tensor_bytes(t, g)
    if m.index_total_bytes is None:
        return by_group
    ratio = m.index_total_bytes / max(1, m.index_basis)
    return {k: v if k in VLLM_ONLY else round(v * ratio) for k, v in by_group.items()}
