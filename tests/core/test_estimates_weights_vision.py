"""Qwen3-VL's vision tower counts its deepstack mergers whatever container the config holds them in
(catalogue configs hold tuples; a parsed config.json holds lists)."""

from __future__ import annotations

from app.core import weights
from app.core.model_config import shape_from_config
from app.ingest.catalogue import get_model


def _vision_bytes(config: dict[str, object]) -> int:
    groups = weights.weights_per_rank(shape_from_config(config), 1, 1, 0).groups
    return next(g.nbytes for g in groups if g.group == "vision")


def test_deepstack_mergers_counted_for_tuples_and_lists() -> None:
    config = dict(get_model("qwen3-vl-30b-a3b-instruct").config)
    vc = dict(config["vision_config"])  # type: ignore[call-overload]
    assert tuple(vc["deepstack_visual_indexes"]) == (8, 16, 24)
    as_tuple = _vision_bytes({**config, "vision_config": vc})
    as_list = _vision_bytes({**config, "vision_config": {**vc, "deepstack_visual_indexes": [8, 16, 24]}})
    without = _vision_bytes({**config, "vision_config": {**vc, "deepstack_visual_indexes": []}})
    # vLLM's Qwen3_VisionTransformer: one merger plus one Qwen3_VisionPatchMerger per deepstack index,
    # each linear_fc1 (4608 → 4608, bias), linear_fc2 (4608 → 2048, bias), norm (weight, bias), bf16
    merge, out = 1152 * 2 * 2, 2048
    merger = (merge * (merge + 1) + out * (merge + 1) + 2 * merge) * 2
    assert as_tuple == as_list == without + 3 * merger


def test_parameter_count_takes_tuples_too() -> None:
    """app.core.params (the checkpoint-bytes fallback) counts the same mergers for a tuple and a list."""
    from app.core.hfconfig import HFConfig
    from app.core.params import estimate_params

    config = dict(get_model("qwen3-vl-30b-a3b-instruct").config)
    vc = dict(config["vision_config"])  # type: ignore[call-overload]
    listed = {**config, "vision_config": {**vc, "deepstack_visual_indexes": [8, 16, 24]}}
    counts = []
    for cfg in (config, listed):
        shape = shape_from_config(cfg)
        counts.append(estimate_params(HFConfig(cfg), shape, []).vision)
    assert counts[0] == counts[1] > 0
