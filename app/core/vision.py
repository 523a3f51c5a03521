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

Qwen3-VL's video (v0.11.0 to v0.13; vllm/model_executor/models/qwen3_vl.py @5e4a8223c): the profile
takes the modality with the most tokens per item (`MultiModalBudget.get_modality_with_max_tokens`),
and from 0efd540db (2025-09-28, PR #25557, v0.11.0) until f5f51e593 (2025-12-16, PR #30475, taken
as v0.14.0) Qwen3-VL counts a video's tokens ×12.5 (its timestamp text), so the video wins: see
`qwen3_video_item`. From 69311446b (2025-09-27, PR #25810, v0.11.0) until f5f51e593 the profile
scatters each item's output into a zero tensor of `encoder_budget` rows (`profile_run`,
`expanded_outputs`), which the encoder cache keeps through the text forward; the loop variable
`output` keeps the last unexpanded output alive, and `batched_dummy_mm_inputs` the float32 pixels,
until `profile_run` returns. Qwen2/2.5-VL's video is not modelled (the image is assumed; the note
says so).

Per patch, the peak of one vision block (`Qwen2_5_VisionBlock`/`Qwen3_VisionBlock`; qkv and
MLP are `QKVParallelLinear`/`ColumnParallelLinear`, sharded by TP) holds the hidden states and
residual (2w), qkv (3w/TP), the attention output (w/TP), the projection output and its all-reduce
copy (2w), or at the MLP the fc1 output and the activation (2·I/TP). Around the blocks the dummy
pixels sit in float32 and the model dtype (channels × temporal patch × patch² each), and the
interpolated position embeddings (Qwen3-VL `fast_pos_embed_interpolate`: four fp32 w-vectors per
patch). No fitted constant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

MAX_TOKENS_PER_IMAGE = 16384
# Qwen3-VL's video processor (`Qwen3VLVideoProcessor`, transformers; the checkpoints'
# video_preprocessor_config.json): longest_edge = 16·16·2·2·2·6144 pixels over all frames.
QWEN3_VIDEO_MAX_PIXELS = 25165824
QWEN3_IMAGE_SIDE = 4096  # the image with most features: 16,777,216 px at factor 32
_MAX_FRAMES_PER_VIDEO = 24576  # qwen3_vl.py
_MM_LIMIT_PER_PROMPT = 999  # MultiModalConfig.get_limit_per_prompt default (V1)


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
    qwen3: bool = False


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
        deepstack=len(deepstack) if isinstance(deepstack, (list, tuple)) else 0,
        pos_interpolation=bool(num("num_position_embeddings")), qwen3=model_type.startswith("qwen3_vl"),
    )  # fmt: skip


def _video_side(frames: int, side: int = QWEN3_IMAGE_SIDE, factor: int = 32) -> int:
    """transformers' Qwen3-VL video `smart_resize` of the largest image over `frames` frames."""
    if math.ceil(frames / 2) * 2 * side * side <= QWEN3_VIDEO_MAX_PIXELS:
        return side
    beta = math.sqrt(frames * side * side / QWEN3_VIDEO_MAX_PIXELS)
    return max(factor, math.floor(side / beta / factor) * factor)


def qwen3_video_item(max_model_len: int, patch: int = 16) -> tuple[int, int, int]:
    """(patches, encoder output tokens, tokens counted for the budget) of Qwen3-VL's dummy video.

    `get_num_frames_with_most_features(seq_len=max_model_len)`: the most frames whose video tokens
    stay ≤ max_model_len (`_get_max_video_frames`; once the frames are shrunk to 32 px a video of F
    frames has F/2 tokens, so 2·max_model_len frames when max_model_len exceeds the ~12,288 tokens the
    pixel cap allows, else the start value 2), divided by the per-prompt video limit (999), at most
    24,576. Tokens = patches / merge², and ×12.5 for the budget (`get_max_video_tokens`).
    """
    cap_tokens = QWEN3_VIDEO_MAX_PIXELS // (patch * patch * 2 * 4)
    total_frames = 2 * max_model_len if max_model_len >= cap_tokens else 2
    frames = max(1, min(total_frames // _MM_LIMIT_PER_PROMPT, _MAX_FRAMES_PER_VIDEO))
    frames = max(frames, 2)  # _get_dummy_videos
    side = _video_side(frames)
    grid_t = (frames + frames % 2) // 2
    patches = grid_t * (side // patch) ** 2
    tokens = patches // 4
    return patches, tokens, int(tokens * 12.5)


def encoder_profile_bytes(
    geo: VisionGeometry, max_num_batched_tokens: int, tp: int, dtype_bytes: int,
    version: tuple[int, int, int] = (0, 11, 0), max_model_len: int | None = None,
) -> tuple[int, int, str]:  # fmt: skip
    """(encoder step peak, bytes kept through the text forward, note) on one rank."""
    video = geo.qwen3 and max_model_len is not None and (0, 11, 0) <= version < (0, 14, 0)
    if video and max_model_len is not None:
        patches, out_tokens, item_tokens = qwen3_video_item(max_model_len, geo.patch_size)
        video = item_tokens > geo.tokens_per_item
    if video:
        budget = max(max_num_batched_tokens, item_tokens)
        items = max(1, budget // item_tokens)
        what = f"{items} dummy video(s) of {out_tokens:,} tokens ({patches:,} patches; budget {budget:,})"
    else:
        budget = max(max_num_batched_tokens, geo.tokens_per_item)
        items = max(1, budget // geo.tokens_per_item)
        out_tokens = geo.tokens_per_item
        patches = items * out_tokens * geo.merge**2
        what = f"{items} dummy image(s) of {out_tokens:,} tokens ({patches:,} patches)"
    w, inter = geo.width, geo.intermediate
    block = max(2 * w + (3 * w + w) // tp + 2 * w, 2 * w + 2 * inter // tp + 2 * w) * dtype_bytes
    pixels = geo.channels_per_patch * (4 + dtype_bytes)
    pos = 4 * w * 4 if geo.pos_interpolation else 0
    per_token = geo.out_hidden * dtype_bytes * (1 + geo.deepstack)
    outputs = items * out_tokens * per_token
    peak = patches * (block + pixels + pos) + outputs
    pixels_kept = patches * geo.channels_per_patch * 4  # `batched_dummy_mm_inputs`: float32, to the end
    kept = outputs + pixels_kept
    if version >= (0, 11, 0) and version < (0, 14, 0) and out_tokens < budget:
        # expanded + the last original (`output`) + the dummy pixels (profile_run @a332b8457, v0.11.0:
        # `batched_dummy_mm_inputs` is a local of profile_run, alive through _dummy_run and the sampler)
        kept = items * budget * per_token + out_tokens * per_token + pixels_kept
        what += f", outputs scattered into {budget:,}-row tensors"
    note = f"vision encoder profiled on {what}" + ("" if geo.qwen3 else "; a video item can be larger: not modelled")
    return peak, kept, note
