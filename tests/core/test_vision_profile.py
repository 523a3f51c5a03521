"""The multimodal encoder's share of the profile peak (app.core.vision), summed by hand."""

from __future__ import annotations

from app.core.vision import encoder_profile_bytes, vision_geometry
from app.ingest.catalogue import get_model


def test_v011_keeps_the_dummy_pixels_with_the_scattered_outputs() -> None:
    # Qwen3-VL-30B-A3B at v0.11.0, max_model_len 65,536, 2048 batched tokens: one dummy video of 44,616
    # patches and 11,154 tokens, its output (and 3 deepstack levels: 4 × 2048 bf16 a token) scattered into
    # a 139,425-row tensor, the last original output alive in the loop variable, and the float32 dummy
    # pixels (2 × 16 × 16 × 3 = 1536 values a patch) alive in `batched_dummy_mm_inputs` until
    # profile_run returns (vllm/v1/worker/gpu_model_runner.py @a332b8457).
    geo = vision_geometry(get_model("qwen3-vl-30b-a3b-instruct").config)
    assert geo is not None
    _, kept, note = encoder_profile_bytes(geo, 2048, 4, 2, (0, 11, 0), 65536)
    per_token = 2048 * 2 * 4
    assert kept == 139425 * per_token + 11154 * per_token + 44616 * 1536 * 4
    assert "139,425-row" in note


def test_v014_keeps_the_image_output_and_its_pixels() -> None:
    # From v0.14 the image (16,384 tokens, 65,536 patches) is the profiled item, not scattered.
    geo = vision_geometry(get_model("qwen3-vl-30b-a3b-instruct").config)
    assert geo is not None
    _, kept, _ = encoder_profile_bytes(geo, 2048, 4, 2, (0, 14, 0), 65536)
    assert kept == 16384 * 2048 * 2 * 4 + 65536 * 1536 * 4
