"""The multimodal encoder's part of vLLM's profile run (Qwen2-VL / Qwen2.5-VL / Qwen3-VL towers).

`GPUModelRunner.profile_run` (vllm/v1/worker/gpu_model_runner.py @28be48fa) runs the vision
encoder on `max_mm_items_per_batch` dummy items of the modality with the most tokens per item,
and keeps the outputs in `encoder_cache` through the text forward. The encoder budget is
`max(max_num_batched_tokens, max tokens of one item)` (`compute_encoder_budget`,
vllm/v1/core/encoder_cache_manager.py), so the batch holds `budget // tokens_per_item` items
(at least one).

Tokens per image: the Qwen-VL processors cap an image at `max_pixels` (Qwen2/2.5-VL
12,845,056 px with 14-px patches; Qwen3-VL 16,777,216 px with 16-px patches), and every
`spatial_merge_size²` patches become one token: 16,384 tokens, 65,536 patches, in both families.
The video modality can be larger (frames fitted to max_model_len); the image is assumed, and the
cell's note says so.

Per patch, the peak of one vision block (`Qwen2_5_VisionBlock`/`Qwen3_VisionBlock`; qkv and
MLP are `QKVParallelLinear`/`ColumnParallelLinear`, sharded by TP) holds the hidden states and
residual (2w), qkv (3w/TP), the attention output (w/TP), the projection output and its all-reduce
copy (2w), or at the MLP the fc1 output and the activation (2·I/TP). Around the blocks the dummy
pixels sit in float32 and the model dtype (channels × temporal patch × patch² each), and the
interpolated position embeddings (Qwen3-VL `fast_pos_embed_interpolate`: four fp32 w-vectors per
patch). No fitted constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MAX_TOKENS_PER_IMAGE = 16384


@dataclass(frozen=True)
class VisionGeometry:
    depth: int
    width: int
    intermediate: int
    patch_size: int
    merge: int
    channels_per_patch: int
    out_hidden: int
    deepstack: int
    pos_interpolation: bool
    tokens_per_item: int = MAX_TOKENS_PER_IMAGE


def vision_geometry(config: Mapping[str, object]) -> VisionGeometry | None:
    """The vision tower vLLM profiles, from a config.json's `vision_config` (Qwen-VL families only)."""
    vc = config.get("vision_config")
    model_type = str(config.get("model_type") or "")
    if not isinstance(vc, Mapping) or not model_type.startswith(("qwen2_vl", "qwen2_5_vl", "qwen3_vl")):
        return None

    def num(*keys: str, default: int = 0) -> int:
        for key in keys:
            value = vc.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return default

    width = num("hidden_size", "embed_dim") if model_type.startswith("qwen2_5") or "qwen3" in model_type else 0
    width = width or num("embed_dim", "hidden_size")
    inter = num("intermediate_size", default=width * num("mlp_ratio", default=4))
    patch = num("patch_size", default=14)
    temporal = num("temporal_patch_size", default=2)
    text = config.get("text_config")
    text_hidden = num("out_hidden_size") or (
        int(text.get("hidden_size") or 0) if isinstance(text, Mapping) else int(config.get("hidden_size") or 0)  # type: ignore[call-overload]
    )
    deepstack = vc.get("deepstack_visual_indexes")
    return VisionGeometry(
        depth=num("depth", "num_hidden_layers"), width=width, intermediate=inter, patch_size=patch,
        merge=num("spatial_merge_size", default=2), channels_per_patch=num("in_channels", "in_chans", default=3)
        * temporal * patch * patch, out_hidden=text_hidden,
        deepstack=len(deepstack) if isinstance(deepstack, list) else 0,
        pos_interpolation=bool(num("num_position_embeddings")),
    )  # fmt: skip


def encoder_profile_bytes(
    geo: VisionGeometry, max_num_batched_tokens: int, tp: int, dtype_bytes: int
) -> tuple[int, int, str]:
    """(encoder step peak, encoder-cache bytes kept through the text forward, note) on one rank."""
    budget = max(max_num_batched_tokens, geo.tokens_per_item)
    items = max(1, budget // geo.tokens_per_item)
    patches = items * geo.tokens_per_item * geo.merge**2
    w, inter = geo.width, geo.intermediate
    block = max(2 * w + (3 * w + w) // tp + 2 * w, 2 * w + 2 * inter // tp + 2 * w) * dtype_bytes
    pixels = geo.channels_per_patch * (4 + dtype_bytes)
    pos = 4 * w * 4 if geo.pos_interpolation else 0
    cache = items * geo.tokens_per_item * geo.out_hidden * dtype_bytes * (1 + geo.deepstack)
    peak = patches * (block + pixels + pos) + cache
    note = (
        f"vision encoder profiled on {items} dummy image(s) of {geo.tokens_per_item:,} tokens "
        f"({patches:,} patches; a video item can be larger: not modelled)"
    )
    return peak, cache, note
