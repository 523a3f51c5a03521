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
VLLM_ONLY = frozenset({"rope", "buffers"})  # groups not in the checkpoint
Version = tuple[int, int, int]
NEWEST: Version = (10**6, 0, 0)  # a Geometry without a version takes the newest rules
STILL: Version = (10**9, 0, 0)  # the open end of a Tensor's ``versions``: still held today


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
    versions: tuple[Version, Version] | None = None  # [since, until): the vLLM releases that hold it


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
    version: Version | None = None  # the vLLM release whose rules apply (None: the newest)
    max_num_batched_tokens: int = 0  # sizes the per-token buffers a model class allocates at init

    @property
    def rules(self) -> Version:
        return self.version or NEWEST


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


def pp_layer_split(num_layers: int, pp: int, version: Version | None = None) -> tuple[int, ...]:
    """Layers per pipeline stage: vllm/distributed/utils.py ``get_pp_indices``. From v0.8.0 (PR #13839,
    ``145944cb9``, 2025-02-26) an even split with the remainder one layer each to the stages before
    the last, walking backwards; before it (PR #6115 ``3de6e6a30``) the last stage takes the remainder."""
    if not 1 <= pp <= num_layers:
        raise InputError("layout.pp", f"pp={pp} must be between 1 and the model's {num_layers} layers")
    parts = [num_layers // pp] * pp
    if version is not None and version < (0, 8, 0):
        parts[-1] += num_layers % pp
        return tuple(parts)
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
    elif t.split == "tokens":  # one row per batched token (a buffer sized by the scheduler)
        r *= g.max_num_batched_tokens
    elif t.split in ("e13", "e2", "erep"):
        n = _local_experts(n, g)
        if t.split == "e13":
            r = t.unit * _pad(_ceil(r // t.unit, moe_tp), t.pad)
        elif t.split == "e2":
            c = _pad(_ceil(c, moe_tp), t.pad)
    return r, c, n


def shape_on_rank(t: Tensor, g: Geometry) -> tuple[int, int, int]:
    """(rows, cols, count) of tensor ``t`` on a rank at geometry ``g`` (rows: output features)."""
    return _shape_on_rank(t, g)


def tensor_bytes(t: Tensor, g: Geometry) -> int:
    """Bytes of tensor ``t`` on a rank at geometry ``g`` (0 in a release that does not hold it)."""
    if t.versions is not None and not t.versions[0] <= g.rules < t.versions[1]:
        return 0
    if t.scheme is not None and t.scheme.name.startswith("mxfp4"):
        return mxfp4_expert_bytes(t, g)
    r, c, n = _shape_on_rank(t, g)
    return n * (t.scheme.nbytes(r, c) if t.scheme is not None else r * c * t.dtype_bytes)


def mxfp4_layout(g: Geometry) -> str:
    """The MXFP4 MoE weight layout vLLM keeps on this rank's card at this release: "marlin",
    "triton-3.5" or "triton-3.6" (the triton_kernels release vLLM bundles).

    Marlin below compute capability 9.0 (``g.mxfp4_backend``, estimates.mxfp4_backend_for), and on
    Hopper before v0.12: ``Mxfp4MoEMethod._should_use_marlin`` (quantization/mxfp4.py @6d243efed,
    v0.10.1) falls back to Marlin when ``has_triton_kernels()`` is false, and vLLM wheels bundle
    triton_kernels only from cmake/external_projects/triton_kernels.cmake (PR #28788 ``9912b8ccb``,
    2025-11-18, tag v3.5.0: taken as v0.12.0, the first release cut after it — v0.11.1/v0.11.2 are
    not checked; tag v3.6.0 from PR #30525 ``f97ca6717``, 2026-02-08: v0.16.0). Checked against the
    wheels: v0.14.1 ships v3.5.0's layout, v0.19.0 v3.6.0's (vllm/third_party/triton_kernels)."""
    if g.mxfp4_backend == "marlin" or g.rules < (0, 12, 0):
        return "marlin"
    return "triton-3.5" if g.rules < (0, 16, 0) else "triton-3.6"


def _swizzled_values(r: int, c_bytes: int, layout: str) -> int:
    """Bytes of one expert's [r, c_bytes] uint8 weight after ``_swizzle_mxfp4`` (mxfp4_utils.py):
    ``HopperMXValueLayout.swizzle_data`` (triton_kernels tensor_details/layout_details/hopper_value.py)
    pads the rows to 16 and the packed bytes to 32 (its mma tile); v3.6.0 first pads both to 64."""
    if layout == "triton-3.6":
        r, c_bytes = _pad(r, 64), _pad(c_bytes, 64)
    return _pad(r, 16) * _pad(c_bytes, 32)


def _swizzled_scales(r: int, groups: int) -> int:
    """``HopperMXScaleLayout.swizzle_data`` (hopper_scale.py, v3.5.0 and v3.6.0): rows padded to
    2 · num_warps · 2 · 8 = 256 (num_warps 8), scale groups to 2; one uint8 each."""
    return _pad(r, 256) * _pad(groups, 2)


def mxfp4_expert_bytes(t: Tensor, g: Geometry) -> int:
    """gpt-oss experts as the MXFP4 MoE backend holds them (quantization/mxfp4.py, v0.10.1 … @4dd49b06f).

    Marlin (``mxfp4_layout``): each rank's intermediate rounded up to 128 and the hidden size to 256
    (``create_weights``; oracle/mxfp4.py ``mxfp4_round_up_hidden_size_and_intermediate_size``).
    Triton: intermediate rounded up to 64; ``process_weights_after_loading`` (``_setup_kernel`` →
    ``convert_to_mxfp4_moe_kernel_format``) swizzles the weights into padded tensors (the loaded ones
    deleted) and the scales into new ones while the loaded ``w13/w2_weight_scale`` stay registered
    (held twice), and replaces the bf16 biases by float32 copies. Measured: gpt-oss-120b TP1 H100,
    Marlin 65.97 GiB (v0.10.1), Triton 64.38 GiB (v0.14.1); gpt-oss-20b TP2 H100 7.01 GiB (v0.19.0)."""
    scheme = t.scheme
    assert scheme is not None
    layout = "checkpoint" if g.mxfp4_backend == "checkpoint" else mxfp4_layout(g)
    marlin = layout == "marlin"
    r, c, n = _shape_on_rank(replace(t, pad=1 if layout == "checkpoint" else 128 if marlin else 64), g)
    if marlin and t.split == "e13" and scheme.weight_bits != 16:
        c = _pad(c, 256)  # gate_up's input: the hidden size
    elif marlin and t.split in ("e2", "erep"):
        r = _pad(r, 256)  # down's output (and its bias): the hidden size
    if scheme.weight_bits == 16:  # the experts' biases
        return n * r * c * (4 if layout.startswith("triton") else 2)
    if layout in ("checkpoint", "marlin"):  # as stored / Marlin's repack: one set of scales
        return n * scheme.nbytes(r, c)
    groups = _ceil(c, scheme.group)
    held = _swizzled_values(r, c * scheme.weight_bits // 8, layout) + _swizzled_scales(r, groups)
    return n * (held + r * groups * scheme.scale_bytes)


def stage_tensors(m: WeightsModel, g: Geometry) -> list[tuple[Tensor, int]]:
    """(tensor, multiplicity) pairs on the stage of ``g``."""
    split = pp_layer_split(m.num_layers, g.pp, g.version)
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
        if t.group in VLLM_ONLY or t.name.startswith("self_attn.W_"):
            continue
        b = tensor_bytes(t, one)
        if t.split == "vocab" and t.rows:
            b = b * t.rows // _pad(t.rows, VOCAB_PADDING)
        total += k * b
    if m.mtp_layers:
        # An MTP layer: one decoder layer like the last, its 2h → h projection (eh_proj / fc) and
        # norms, plus (DeepSeek-V3, GLM-4.5) its own embed_tokens and shared_head.head copies.
        last = m.tensors.layers[m.tensors.layer_index[-1]]
        layer = sum(tensor_bytes(t, one) for t in last if not t.name.startswith("self_attn.W_"))
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
