"""The model shape vLLM sizes the KV cache from (``ModelShape``), and the online-fp8 weights rule.

A ``ModelShape`` is read from a Hugging Face ``config.json`` by ``app.core.model_config``
(``shape_from_config``); this module holds the shape itself and what `--quantization fp8` does to
its weights, so that the parameter estimate (``app.core.params``) can use the shape without a cycle.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from app.core.errors import InputError
from app.core.layers import ATTENTION_KINDS, STATE_KINDS, LayerKind
from app.core.mamba import DTYPE_BYTES, StateGeometry
from app.core.max_len import ASSUMED_MAX_MODEL_LEN, LENGTH_KEYS, MaxLen, check_max_model_len
from app.core.weights_quant import online_fp8_plan
from app.core.weights_tensor import Geometry, WeightsModel, rank_group_bytes, requantized


@dataclass(frozen=True)
class ModelShape:
    """The shape of a decoder stack as vLLM sees it (whole model, before any parallelism)."""

    name: str | None
    architecture: str | None
    model_type: str | None
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    head_dim_v: int
    hidden_size: int
    intermediate_size: int | None
    vocab_size: int | None
    max_position_embeddings: int | None
    tie_word_embeddings: bool
    dtype: str
    layer_kinds: tuple[LayerKind, ...]
    sliding_window: int | None
    attention_chunk_size: int | None
    mla_latent_dim: int | None
    num_experts: int | None
    num_experts_per_tok: int | None
    moe_intermediate_size: int | None
    quantization: str | None
    params_total: int
    params_active: int
    weight_bytes: int
    notes: tuple[str, ...]
    config_dtype: str = "bfloat16"
    state: StateGeometry | None = None
    checkpoint_kv_cache_dtype: str | None = None  # what kv_cache_dtype "auto" resolves to (modelopt), else None
    quantizable_params: int = 0  # decoder linear and expert parameters (what vLLM's fp8 method quantizes)
    online_quantization: str | None = None  # "fp8": weights as `--quantization fp8` leaves them
    index_total_bytes: int | None = None  # the checkpoint's safetensors metadata.total_size, when given
    # MLA: qk_nope_head_dim + qk_rope_head_dim, the K head size vLLM caches when it does not use MLA
    # (before v0.7.1, VLLM_MLA_DISABLE=1; app.core.mla_rules); None for other models
    mla_qk_head_dim: int | None = None
    gated_mlp: bool = True  # dense MLP is gate_up + down (Llama); False: up + down (weights_arch.plain_mlp)
    # Tensor table for per-rank weights (app.core.weights); derived from the config, so not compared.
    weights: WeightsModel | None = field(default=None, compare=False, repr=False)
    # vLLM's default and limit for max_model_len (app.core.max_len); None for a shape built without a config
    max_len: MaxLen | None = None

    @property
    def is_mla(self) -> bool:
        return self.mla_latent_dim is not None

    @functools.cached_property
    def attention_layers(self) -> int:
        return sum(1 for kind in self.layer_kinds if kind in ATTENTION_KINDS)

    @property
    def state_layers(self) -> int:
        return sum(1 for kind in self.layer_kinds if kind in STATE_KINDS)

    @property
    def is_hybrid(self) -> bool:
        return len({k for k in self.layer_kinds if k != "none"}) > 1


def online_fp8_shape(shape: ModelShape) -> ModelShape:
    """The shape with the weights vLLM keeps after `--quantization fp8` on an unquantized checkpoint.

    `Fp8Config.get_quant_method` (vllm/model_executor/layers/quantization/fp8.py) gives every
    `LinearBase` layer `Fp8LinearMethod` and every `FusedMoE` layer `Fp8MoEMethod`, which quantize
    the weights to float8_e4m3fn after loading (one byte per parameter, per-tensor scales); the
    embedding and the LM head (`VocabParallelEmbedding`/`ParallelLMHead`), the norms and the
    vision tower stay at the model dtype. Measured independently: Llama-3-8B 16.06 GB → 9.08 GB
    with the same rule (tinygrad PR #12893).
    """
    if shape.online_quantization == "fp8" or shape.quantization == "fp8":
        return shape  # already fp8 (an FP8 checkpoint is what the flag would give: vLLM accepts it as is)
    if shape.quantization is not None:
        raise InputError(
            "engine.quantization",
            f"the checkpoint is already quantized ({shape.quantization}); vLLM refuses --quantization fp8 for it",
        )
    if shape.weights is not None:
        # The tensor table with Fp8LinearMethod / Fp8MoEMethod's per-tensor fp8 on every linear and
        # expert weight (weights_quant.online_fp8_plan).
        fp8 = requantized(shape.weights, online_fp8_plan())
        fp8_bytes = sum(rank_group_bytes(fp8, Geometry()).values())
        return replace(shape, weight_bytes=fp8_bytes, online_quantization="fp8", weights=fp8)
    dtype_bytes = DTYPE_BYTES[shape.dtype]
    scales = 4 * 8 * shape.num_layers  # one float32 scale per quantized tensor (≈ 8 per layer)
    fp8_bytes = shape.weight_bytes - shape.quantizable_params * (dtype_bytes - 1) + scales
    return replace(shape, weight_bytes=fp8_bytes, online_quantization="fp8")


def default_max_model_len(shape: ModelShape) -> tuple[int, str | None]:
    """The max_model_len vLLM defaults to for this model (``app.core.max_len`` rules 1-4: the smallest
    length key, RoPE scaling, longrope's original length), and a note when it is vLLM's assumption."""
    if shape.max_len is not None:
        if shape.max_len.key is not None:
            return shape.max_len.default, None
        return shape.max_len.default, _assumed_note(shape.max_len.default)
    if shape.max_position_embeddings is not None:  # a shape built without a config
        return shape.max_position_embeddings, None
    return ASSUMED_MAX_MODEL_LEN, _assumed_note(ASSUMED_MAX_MODEL_LEN)


def _assumed_note(tokens: int) -> str:
    return (
        f"the model's config states no maximum length ({', '.join(LENGTH_KEYS[:3])}, …): "
        f"vLLM assumes {tokens:,} with a warning (vllm/config/model.py _get_and_verify_max_len); "
        "set max_model_len for the length you serve"
    )


def check_given_max_model_len(field: str, shape: ModelShape | None, max_model_len: int) -> None:
    """Refuse a given max_model_len above what vLLM accepts for this model (``app.core.max_len`` rule 5)."""
    if shape is not None and shape.max_len is not None:
        check_max_model_len(field, max_model_len, shape.max_len)
