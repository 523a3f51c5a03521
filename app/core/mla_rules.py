"""What vLLM caches for a DeepSeek-style MLA model, by vLLM version: the latent, or full K/V; and the block size.

Pure functions; every rule cites the vLLM commit it comes from (mirror of vllm-project/vllm, HEAD
4dd49b06f ≈ v0.19.0; commits older than the mirror's tags are dated and named by their PR).

1. **Latent or full K/V.** MLA caching arrived in cabaf4eff (PR #12528, 2025-01-31: DeepSeek-V2) and
   baeded256 (PR #12601, 2025-02-01: DeepSeek-V3), first released in v0.7.1. Before it,
   ``ModelConfig.get_head_size`` (vllm/config.py @cabaf4eff^) returned ``qk_nope_head_dim + qk_rope_head_dim``
   (192 for V2/V3), ``get_num_kv_heads`` split ``num_key_value_heads`` over TP, and ``DeepseekV2Attention``
   padded V to that head size (``torch.nn.functional.pad(v, [0, qk_head_dim - v_head_dim])``,
   vllm/model_executor/models/deepseek_v2.py @cabaf4eff^): per token and layer ``2 × heads_rank × 192 × B``.
   Since then ``use_mla`` gives one latent of ``kv_lora_rank + qk_rope_head_dim`` and one KV head.
2. **Quantized checkpoints, v0.7.1–v0.7.2.** ``ModelConfig.use_mla`` @baeded256 returned False ("MLA is not
   supported with %s quantization. Disabling MLA.") for any quantization but ``fp8`` and (all-fp8)
   ``compressed-tensors``; f0b2da72a (PR #13181, 2025-02-14, released v0.7.3) removed the check.
3. **VLLM_MLA_DISABLE=1** (vllm/envs.py, read by ``use_mla`` since cabaf4eff) forces full K/V in every version.
4. **Block size.** v0.7.1–v0.7.x: Triton MLA, the configured size. b0d541947 (PR #14451, 2025-03-08, v0.8.0)
   made FlashMLA the default on Hopper and forced ``block_size = 64`` there ("Forcing kv cache block size
   to 64 for FlashMLA backend.", vllm/platforms/cuda.py, still so @77a73458e^). 77a73458e (PR #35122,
   2026-03-09, v0.18) replaced the forcing by the backend's preferred size
   (``Platform.update_block_size_for_backend`` → ``AttentionBackend.get_preferred_block_size``: the
   default 16 if the backend takes it, else its smallest size; vllm/platforms/interface.py @4dd49b06f),
   with the priorities of ``_get_backend_priorities`` (vllm/platforms/cuda.py @4dd49b06f):
   Hopper FLASH_ATTN_MLA (``MultipleOf(16)``, kv dtypes auto/float16/bfloat16 only) → 16, with an fp8
   cache FLASHMLA (``[64]``) → 64; Blackwell FLASHINFER_MLA (``[32, 64]``) → 32; Ampere/Ada TRITON_MLA
   (``MultipleOf(16)``) → 16 (vllm/v1/attention/backends/mla/{flashattn_mla,flashmla,flashinfer_mla,
   triton_mla}.py @4dd49b06f). A ``--block-size`` the user sets is kept from v0.18 on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from app.core.gpus import compute_capability
from app.core.shape import ModelShape
from app.core.versions import Version, parse_version

__all__ = [
    "BACKEND_BLOCK_SINCE",
    "FLASHMLA_FORCED_SINCE",
    "LATENT_NOTE",
    "MLA_QUANT_FIX_SINCE",
    "MLA_SINCE",
    "Family",
    "MLADecision",
    "family_block_sizes",
    "full_kv_shape",
    "gpu_family",
    "mla_block_size",
    "mla_decision",
]

MLA_SINCE: Version = (0, 7, 1)  # cabaf4eff (PR #12528) + baeded256 (PR #12601)
MLA_QUANT_FIX_SINCE: Version = (0, 7, 3)  # f0b2da72a (PR #13181)
FLASHMLA_FORCED_SINCE: Version = (0, 8, 0)  # b0d541947 (PR #14451)
BACKEND_BLOCK_SINCE: Version = (0, 18, 0)  # 77a73458e (PR #35122)
# use_mla @baeded256: the quantizations MLA kept (compressed-tensors only with fp8 weights and activations)
_MLA_QUANTS = frozenset({"fp8", "compressed-tensors"})

LATENT_NOTE = "MLA: one latent"  # how app.core.model_config's note on the latent begins

Family = Literal["hopper", "blackwell", "ampere/ada"]
_FAMILIES: tuple[Family, ...] = ("hopper", "blackwell", "ampere/ada")


@dataclass(frozen=True)
class MLADecision:
    """Whether vLLM caches the MLA latent, and why not when it does not."""

    latent: bool
    reason: str | None = None  # a note for the plan when it caches full K/V


def gpu_family(gpu_name: str | None) -> Family | None:
    """The card's family as vLLM's MLA backend choice sees it (compute capability major), None if unknown."""
    cc = compute_capability(gpu_name)
    if cc is None:
        return None
    if cc[0] == 9:
        return "hopper"
    if cc[0] in (10, 12):
        return "blackwell"
    return "ampere/ada" if cc[0] == 8 else None


def mla_decision(version_text: str | None, quantization: str | None = None, mla_disable: bool = False) -> MLADecision:
    """Latent (True) or full K/V for an MLA model under this vLLM version, checkpoint quantization and env."""
    if mla_disable:
        return MLADecision(False, "VLLM_MLA_DISABLE=1: vLLM caches full K/V (ModelConfig.use_mla is False)")
    version = parse_version(version_text) if version_text else None
    if version is not None and version < MLA_SINCE:
        return MLADecision(
            False,
            f"vLLM {_label(version)} predates MLA caching (v0.7.1, PR #12528/#12601): it caches full K/V, "
            "head size qk_nope_head_dim + qk_rope_head_dim with V padded to it",
        )
    if version is not None and version < MLA_QUANT_FIX_SINCE and quantization and quantization not in _MLA_QUANTS:
        return MLADecision(
            False,
            f"vLLM {_label(version)} disables MLA for {quantization} checkpoints (fixed in v0.7.3, PR #13181): "
            "full K/V is cached",
        )
    return MLADecision(True)


def full_kv_shape(shape: ModelShape) -> ModelShape:
    """The shape as vLLM without MLA sizes it: full attention, K and V of ``qk_nope + qk_rope`` per KV head."""
    if not shape.is_mla or shape.mla_qk_head_dim is None:
        return shape
    head = shape.mla_qk_head_dim
    kinds = tuple("full" if k == "mla" else k for k in shape.layer_kinds)
    notes = tuple(n for n in shape.notes if not n.startswith(LATENT_NOTE))  # app.core.model_config's MLA note
    return replace(shape, layer_kinds=kinds, head_dim=head, head_dim_v=head, mla_latent_dim=None, notes=notes)


def mla_block_size(
    version_text: str | None, family: Family | None, kv_cache_dtype: str, configured: int, user_set: bool = False
) -> int:
    """The block size vLLM runs an MLA model with (``configured`` where no rule changes it)."""
    version = parse_version(version_text) if version_text else None
    if family is None or version is None or version < FLASHMLA_FORCED_SINCE:
        return configured
    if version < BACKEND_BLOCK_SINCE:
        # @77a73458e^ cuda.py: FlashMLA forced to 64 unless already a multiple of 64; only Hopper is ruled here
        return 64 if family == "hopper" and configured % 64 else configured
    if user_set:
        return configured
    return _preferred(family, kv_cache_dtype)


def _preferred(family: Family, kv_cache_dtype: str) -> int:
    if family == "hopper":
        return 16 if kv_cache_dtype in ("auto", "float16", "bfloat16") else 64
    return 32 if family == "blackwell" else 16


def family_block_sizes(version_text: str | None, kv_cache_dtype: str, configured: int) -> dict[str, int]:
    """Each family's pick, for the explanation when no card is named."""
    return {f: mla_block_size(version_text, f, kv_cache_dtype, configured) for f in _FAMILIES}


def _label(version: Version) -> str:
    return ".".join(str(p) for p in version)


@dataclass(frozen=True)
class MLASizing:
    """An MLA model as one vLLM version sizes it on one card: its shape, block size and notes."""

    shape: ModelShape
    block_size: int
    notes: tuple[str, ...] = ()


def mla_sizing(
    shape: ModelShape, version_text: str, gpu_name: str | None, kv_cache_dtype: str, configured: int,
    user_set: bool, mla_disable: bool,
) -> MLASizing:
    """The one MLA step of the plan and of `kvledger kv-bytes`: full K/V where the version, the
    checkpoint's quantization or VLLM_MLA_DISABLE turns MLA off (`mla_decision`), else the latent at the
    block size the version's MLA backend runs on the card's family (`mla_block_size`); with no card
    named the configured size is kept and each family's pick is noted."""
    if not shape.is_mla:
        return MLASizing(shape, configured)
    decision = mla_decision(version_text, shape.quantization, mla_disable)
    if not decision.latent and shape.mla_qk_head_dim is not None:
        return MLASizing(full_kv_shape(shape), configured, (decision.reason or "",))
    family = gpu_family(gpu_name)
    if family is None:
        picks = family_block_sizes(version_text, kv_cache_dtype, configured)
        if all(size == configured for size in picks.values()):
            return MLASizing(shape, configured)
        listed = ", ".join(f"{name} {size}" for name, size in picks.items())
        return MLASizing(shape, configured, (f"MLA block size: no GPU named, so the configured {configured} is kept; "
                                             f"vLLM {version_text} would pick {listed} tokens (app.core.mla_rules)",))
    size = mla_block_size(version_text, family, kv_cache_dtype, configured, user_set)
    if size == configured:
        return MLASizing(shape, configured)
    return MLASizing(shape, size, (f"MLA block size {size} (not {configured}): what vLLM {version_text}'s MLA "
                                   f"backend runs with on {family}",))
