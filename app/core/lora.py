"""LoRA adapter slots: the GPU bytes vLLM preallocates when ``--enable-lora`` is on.

Theory of operation (vLLM read at 28be48fa9, 2026-05-24, unless noted). ``GPUModelRunner.load_model``
(vllm/v1/worker/gpu_model_runner.py) builds the ``LoRAModelManager`` inside the same
``DeviceMemoryProfiler`` as the weights, so the slots are part of what "Model loading took" reports.
``LoRAModelManager._create_lora_modules`` (vllm/lora/model_manager.py) wraps every ``LinearBase`` and
``FusedMoE`` module (``get_supported_lora_modules``, vllm/lora/utils.py) plus the model's
``embedding_modules`` (embed_tokens, and lm_head through ``LogitsProcessorWithLoRA``), restricted by
``target_modules``; each wrapper's ``create_lora_weights`` allocates, for ``max_loras`` slots at
``max_lora_rank`` ``r`` in the LoRA dtype (the model dtype for "auto"):

- column-parallel (``qkv_proj`` as three slices q/k/v, ``gate_up_proj`` as two): per slice A
  ``[L, 1, r, hidden]`` (the input is whole) and B ``[L, 1, out_slice / TP, r]``
  (vllm/lora/layers/base_linear.py, column_parallel_linear.py ``MergedColumnParallelLinearWithLoRA``);
- row-parallel (``o_proj``, ``down_proj``): A ``[L, 1, r, in / TP]``, B ``[L, 1, out, r]`` (the output
  is whole; row_parallel_linear.py);
- replicated (the MoE router ``gate``): A ``[L, 1, r, hidden]``, B ``[L, 1, experts, r]``;
- ``FusedMoEWithLoRA`` (fused_moe.py): w1/w3 A ``[L, E_local, r, hidden]`` and B
  ``[L, E_local, I / TP, r]``, w2 A ``[L, E_local, r, I / TP]`` and B ``[L, E_local, hidden, r]``;
- embedding (vocal_parallel_embedding.py): A ``[L, vocab, r]`` (whole vocabulary), B ``[L, 1, hidden, r]``;
- LM head (logits_processor.py): A ``[L, 1, r, hidden]``, B ``[L, 1, vocab, r]``.
Before PR #28545 (``9875be643``, 2025-11-21, taken as v0.12.0) LoRA also kept 256 extra vocabulary
rows (``lora_extra_vocab_size``): the embedding's A had ``vocab + 256`` rows plus a ``[L, 256, hidden]``
embeddings tensor, the LM head's B was padded to a multiple of 256 rows plus the same tensor.
The Punica wrapper adds four index tensors of ``max_num_batched_tokens`` int64 (punica_base.py).

The profile run (``maybe_setup_dummy_loras``, vllm/v1/worker/lora_model_runner_mixin.py) loads
``max_loras`` dummy adapters of rank ``min(r, 8)`` into the same slots (no new memory) and runs the
LoRA kernels, whose shrink step holds an fp32 buffer ``[slices, tokens, r]`` beside the layer's
output (``_mcp_apply``, column_parallel_linear.py): that raises the profiled peak.

Not counted (stated in the note): Mamba/linear-attention mixer projections, MLA's latent
projections, shared experts and vision-tower modules.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from app.core.errors import InputError
from app.core.kvspec import pp_layer_split
from app.core.layers import ATTENTION_KINDS
from app.core.shape import ModelShape
from app.core.versions import Version

#: vllm/config/lora.py ``MaxLoRARanks`` and its ``possible_max_ranks`` ancestors, by release.
_RANKS: tuple[tuple[Version, tuple[int, ...]], ...] = (
    ((0, 11, 1), (1, 8, 16, 32, 64, 128, 256, 320, 512)),  # 1b2c440cd, 2025-10-08, PR #26461
    ((0, 8, 0), (8, 16, 32, 64, 128, 256, 320, 512)),  # 0a995d543, 2025-03-04, PR #14119
    ((0, 5, 5), (8, 16, 32, 64, 128, 256)),  # 9118217f5, 2024-08-06, PR #7146
    ((0, 0, 0), (8, 16, 32, 64)),  # 9b945daaf, 2024-01-23, PR #1804
)
#: ``--lora-target-modules`` (``LoRAConfig.target_modules``) arrived in 3717a4dd4 (PR #34984, 2026-03-17).
#: The mirror has no release tags; main's own deprecations that evening still read "will be removed in
#: v0.19" (e78821b43, --calculate-kv-scales) and "in v0.20" only from 2026-03-20 (ed359c497), so main was
#: 0.18.dev: v0.18.0 is taken as the first release with it (the convention of app.core.versions).
TARGET_MODULES_SINCE: Version = (0, 18, 0)
EXTRA_VOCAB_UNTIL: Version = (0, 12, 0)  # PR #28545 removed lora_extra_vocab_size (9875be643)
_EXTRA_VOCAB = 256  # LoRAConfig.lora_extra_vocab_size default; also lora_vocab_padding_size on CUDA
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


@dataclass(frozen=True)
class LoraSpec:
    """The plan's ``engine.lora``: vLLM's ``--max-loras``, ``--max-lora-rank``, ``--max-cpu-loras``."""

    max_loras: int = 1
    max_lora_rank: int = 16
    max_cpu_loras: int | None = None
    target_modules: tuple[str, ...] | None = None


@dataclass(frozen=True)
class LoraTerms:
    """LoRA's bytes on one rank: the preallocated slots (inside "Model loading took") and the
    profile run's extra peak."""

    slot_bytes: int
    profile_bytes: int
    modules: tuple[tuple[str, int], ...]  # (module, bytes on this rank)
    not_counted: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.slot_bytes + self.profile_bytes

    def note(self) -> str:
        parts = ", ".join(f"{name} {b / 2**20:,.1f} MiB" for name, b in self.modules if b)
        text = f"LoRA slots {parts}; profile-run shrink buffer {self.profile_bytes / 2**20:,.1f} MiB (fp32)"
        if self.not_counted:
            text += f"; not counted: {', '.join(self.not_counted)}"
        return text


def allowed_ranks(version: Version) -> tuple[int, ...]:
    """The ``--max-lora-rank`` values vLLM accepts at that version."""
    for since, ranks in _RANKS:
        if version >= since:
            return ranks
    return _RANKS[-1][1]


def vocab_limit(version: Version) -> int:
    """``LogitsProcessorWithLoRA.create_lora_weights``'s vocabulary limit (vllm/lora/layers/logits_processor.py):
    258048 since PR #34773 (42489e43c, 2026-02-25, taken as v0.17), 257024 before."""
    return 258048 if version >= (0, 17, 0) else 257024


def check_lora(spec: LoraSpec, version: Version, label: str, shape: ModelShape | None = None) -> None:
    """Refuse what vLLM refuses (``LoRAConfig`` validation and ``create_lora_weights``), naming the field."""
    ranks = allowed_ranks(version)
    if spec.max_lora_rank not in ranks:
        raise InputError(
            "engine.lora.max_lora_rank",
            f"vLLM {label} accepts --max-lora-rank {', '.join(map(str, ranks))}; got {spec.max_lora_rank} "
            "(vllm/config/lora.py MaxLoRARanks)",
        )
    if spec.target_modules is not None and version < TARGET_MODULES_SINCE:
        raise InputError(
            "engine.lora.target_modules",
            f"vLLM {label} has no --lora-target-modules (it arrived in v0.18, PR #34984) and refuses to start with "
            "a flag it does not know; leave target_modules out (LoRA on every module) or plan for vLLM 0.18 or later",
        )
    if spec.max_loras < 1:
        raise InputError("engine.lora.max_loras", f"max_loras ({spec.max_loras}) must be >= 1.")
    if spec.max_cpu_loras is not None and spec.max_cpu_loras < spec.max_loras:
        raise InputError(
            "engine.lora.max_cpu_loras",
            f"max_cpu_loras ({spec.max_cpu_loras}) must be >= max_loras ({spec.max_loras}).",
        )
    if shape is not None and (shape.vocab_size or 0) > vocab_limit(version):
        raise InputError(
            "engine.lora",
            f"When using LoRA, vocab size must be <= {vocab_limit(version)} (vLLM {label}; the model's vocabulary "
            f"is {shape.vocab_size:,})",
        )


def _targeted(spec: LoraSpec, module: str, packed: tuple[str, ...] = ()) -> bool:
    """``is_in_target_modules``: a packed module (qkv_proj) is targeted when it or any part is named."""
    if spec.target_modules is None:
        return True
    return module in spec.target_modules or any(p in spec.target_modules for p in packed)


def _linear(slices_out: tuple[int, ...], inp: int, r: int, loras: int) -> int:
    """Elements of one column/row/replicated wrapper: A per slice ``r × in``, B ``out_slice × r``."""
    return loras * sum(r * inp + out * r for out in slices_out)


def _attention(shape: ModelShape, tp: int, r: int, spec: LoraSpec) -> tuple[tuple[str, int], ...]:
    heads, d = shape.num_attention_heads, shape.head_dim
    q = heads // tp * d
    kv = max(1, shape.num_kv_heads // tp) * d
    kv_v = max(1, shape.num_kv_heads // tp) * shape.head_dim_v
    h, n = shape.hidden_size, spec.max_loras
    out = []
    if _targeted(spec, "qkv_proj", ("q_proj", "k_proj", "v_proj")):
        out.append(("qkv_proj", _linear((q, kv, kv_v), h, r, n)))
    if _targeted(spec, "o_proj"):
        out.append(("o_proj", n * (r * (heads * shape.head_dim_v // tp) + h * r)))
    return tuple(out)


def _mlp(shape: ModelShape, tp: int, r: int, spec: LoraSpec, ep: bool) -> tuple[tuple[str, int], ...]:
    h, n = shape.hidden_size, spec.max_loras
    if shape.num_experts:
        experts = shape.num_experts
        inter = shape.moe_intermediate_size or shape.intermediate_size or 0
        local, shard = (max(1, experts // tp), inter) if ep else (experts, inter // tp)
        out = []
        if _targeted(spec, "experts", ("w1", "w2", "w3", "gate_proj", "up_proj", "down_proj")):
            # w1, w3: A r × hidden, B I_shard × r; w2: A r × I_shard, B hidden × r — per local expert.
            out.append(("experts", n * local * (2 * (r * h + shard * r) + r * shard + h * r)))
        if _targeted(spec, "gate"):
            out.append(("gate", _linear((experts,), h, r, n)))
        return tuple(out)
    inter = shape.intermediate_size or 0
    out = []
    if _targeted(spec, "gate_up_proj", ("gate_proj", "up_proj")):
        out.append(("gate_up_proj", _linear((inter // tp, inter // tp), h, r, n)))
    if _targeted(spec, "down_proj"):
        out.append(("down_proj", n * (r * (inter // tp) + h * r)))
    return tuple(out)


def _vocab(shape: ModelShape, r: int, spec: LoraSpec, first: bool, last: bool, extra: bool) -> list[tuple[str, int]]:
    vocab, h, n = shape.vocab_size or 0, shape.hidden_size, spec.max_loras
    out = []
    if first and _targeted(spec, "embed_tokens"):
        rows = vocab + (_EXTRA_VOCAB if extra else 0)
        out.append(("embed_tokens", n * (rows * r + h * r + (_EXTRA_VOCAB * h if extra else 0))))
    if last and _targeted(spec, "lm_head"):
        rows = -(-vocab // _EXTRA_VOCAB) * _EXTRA_VOCAB if extra else vocab
        out.append(("lm_head", n * (r * h + rows * r + (_EXTRA_VOCAB * h if extra else 0))))
    return out


def _stage_layers(shape: ModelShape, pp: int, stage: int) -> tuple[int, int]:
    """(attention layers, all decoder layers) on a pipeline stage (``get_pp_indices``)."""
    split = pp_layer_split(shape.num_layers, pp)
    start = sum(split[:stage])
    kinds = shape.layer_kinds[start : start + split[stage]]
    return sum(1 for k in kinds if k in ATTENTION_KINDS), split[stage]


@functools.lru_cache(maxsize=256)
def lora_terms(
    shape: ModelShape, spec: LoraSpec, tp: int, pp: int, stage: int, version: Version,
    max_num_batched_tokens: int, ep: bool = False,
) -> LoraTerms:  # fmt: skip
    """LoRA's bytes on one rank of pipeline stage ``stage`` at TP ``tp`` (see the module docstring)."""
    r = spec.max_lora_rank
    elem = _DTYPE_BYTES.get(shape.config_dtype, 2)
    attn_layers, layers = _stage_layers(shape, pp, stage)
    skipped: list[str] = []
    per_attn = _attention(shape, tp, r, spec) if not shape.is_mla else ()
    if shape.is_mla and attn_layers:
        skipped.append("MLA latent projections")
    if layers > attn_layers:
        skipped.append(f"{layers - attn_layers} mixer layers' projections")
    per_layer = _mlp(shape, tp, r, spec, ep)
    modules: dict[str, int] = {}
    for name, n in per_attn:
        modules[name] = n * attn_layers * elem
    for name, n in per_layer:
        modules[name] = n * layers * elem
    extra = version < EXTRA_VOCAB_UNTIL
    for name, n in _vocab(shape, r, spec, stage == 0, stage == pp - 1, extra):
        modules[name] = n * elem
    if not any(modules.values()):
        raise InputError("engine.lora.target_modules", "names no module vLLM wraps with LoRA in this model")
    tokens = -(-max_num_batched_tokens // 8) * 8  # LoRAModelManager rounds up to a multiple of 8
    punica = 5 * tokens * 8  # token/sampler/padded sampler indices + 2 embedding rows, int64
    slices = max((3 if name == "qkv_proj" else 2 if name in ("gate_up_proj", "experts") else 1)
                 for name in modules if modules[name])  # fmt: skip
    profile = slices * tokens * r * 4
    slots = sum(modules.values()) + punica
    return LoraTerms(slots, profile, (*modules.items(), ("punica indices", punica)), tuple(skipped))
