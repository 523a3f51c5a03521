"""What vLLM keeps on the GPU beside the checkpoint, rule by rule, against tensor shapes summed by hand.

Each expected figure is written out from the config's numbers and the vLLM source the rule cites
(app/core/weights_rope.py, weights_tensor.py ``mxfp4_expert_bytes``, weights_build.py ``_mla_absorbed``),
not computed through the module under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.core.weights import weights_model, weights_per_rank
from app.core.weights_rope import rope_rows
from app.core.weights_tensor import pp_layer_split
from app.ingest.catalogue import get_model

GIB = 2**30


def group(model: Any, name: str, *args: Any, **kw: Any) -> int:
    return sum(g.nbytes for g in weights_per_rank(model, *args, **kw).groups if g.group == name)


def config(slug: str) -> dict[str, Any]:
    return get_model(slug).config_dict()


# --- rotary caches (weights_rope) ---------------------------------------------------------------


def test_gemma3_global_rope_is_linear_scaled_by_its_factor() -> None:
    # Gemma-3-12B: head_dim 256, 131072 positions; local layers a default rope, global layers the
    # config's linear rope (factor 8): 131072 + 8 × 131072 rows of 256 bf16 values.
    m = weights_model(config("gemma-3-12b-it"))
    assert group(m, "rope") == (131072 + 8 * 131072) * 256 * 2


def test_mrope_cache_is_four_times_the_positions() -> None:
    # Qwen3-VL-30B-A3B: MRotaryEmbedding caches 4 × 262144 positions × 128 (head_dim) bf16 — also when
    # the config copy leaves rope_scaling out (the catalogue's does).
    cfg = config("qwen3-vl-30b-a3b-instruct")
    assert "rope_scaling" not in cfg["text_config"]
    assert group(weights_model(cfg), "rope") == 4 * 262144 * 128 * 2
    stated = {**cfg, "text_config": {**cfg["text_config"], "rope_scaling": {"mrope_section": [24, 20, 20]}}}
    assert group(weights_model(stated), "rope") == 4 * 262144 * 128 * 2


@pytest.mark.parametrize(
    ("params", "rows"),
    [
        (None, 1000),
        ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 100}, 1000),
        ({"rope_type": "linear", "factor": 4.0}, 4000),
        ({"type": "linear", "factor": [1.0, 2.0]}, 3000),
        ({"rope_type": "dynamic", "factor": 2.0}, 2000),
        ({"rope_type": "dynamic", "alpha": 3.0}, 1000),
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 250}, 1000),
        ({"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}, 163840),
        ({"rope_type": "longrope", "original_max_position_embeddings": 100}, 1100),
        ({"rope_type": "default", "mrope_section": [16, 24, 24]}, 4000),
    ],
)
def test_rope_rows_per_rope_type(params: dict[str, Any] | None, rows: int) -> None:
    assert rope_rows(params, 1000) == rows


def test_qwen3_vl_deepstack_buffers_follow_the_batched_tokens() -> None:
    # 3 deepstack levels × max_num_batched_tokens × 2048 (text hidden) bf16, whole on every rank.
    m = weights_model(config("qwen3-vl-30b-a3b-instruct"))
    assert group(m, "buffers", 4, max_num_batched_tokens=2048) == 3 * 2048 * 2048 * 2
    assert group(m, "buffers", 4) == 0
    assert group(weights_model(config("gemma-3-12b-it")), "buffers", max_num_batched_tokens=8192) == 0


# --- MXFP4 experts (gpt-oss-20b: 24 layers, 32 experts, hidden 2880, intermediate 2880) ---------------

L, E = 24, 32


def test_mxfp4_triton_v36_layout_at_tp2_by_hand() -> None:
    # Per rank intermediate 1440 → 1472 (round up to 64). w13 [2944 rows, 1440 bytes] and w2 [2880 rows,
    # 736 bytes]; triton_kernels v3.6.0 pads both storage dims to 64 (1440 → 1472, 736 → 768); the
    # swizzled scales pad rows to 256 (2944/2880 → 3072) beside the loaded ones (90 and 46 groups of 32);
    # the biases become float32.
    w13 = 2944 * 1472 + 3072 * 90 + 2944 * 90 + 2944 * 4
    w2 = 2880 * 768 + 3072 * 46 + 2880 * 46 + 2880 * 4
    m = weights_model(config("gpt-oss-20b"))
    assert group(m, "experts", 2, vllm_version=(0, 19, 0)) == L * E * (w13 + w2)


def test_mxfp4_triton_v35_layout_pads_values_only_to_the_mma_tile() -> None:
    # v0.14 bundles triton_kernels v3.5.0: the values keep their size (2944 % 16 == 0, 1440 % 32 == 0, …).
    w13 = 2944 * 1440 + 3072 * 90 + 2944 * 90 + 2944 * 4
    w2 = 2880 * 736 + 3072 * 46 + 2880 * 46 + 2880 * 4
    m = weights_model(config("gpt-oss-20b"))
    assert group(m, "experts", 2, vllm_version=(0, 14, 1)) == L * E * (w13 + w2)


def test_mxfp4_on_hopper_before_v012_is_marlin_by_hand() -> None:
    # No bundled triton_kernels: Marlin. Intermediate 1440 → 1536 (128), hidden 2880 → 3072 (256); one
    # set of scales; bf16 biases (w13 2 × 1536, w2 3072).
    w13 = 3072 * 1536 + 3072 * 96 + 3072 * 2
    w2 = 3072 * 768 + 3072 * 48 + 3072 * 2
    m = weights_model(config("gpt-oss-20b"))
    assert group(m, "experts", 2, vllm_version=(0, 10, 1)) == L * E * (w13 + w2)
    assert group(m, "experts", 2, vllm_version=(0, 10, 1)) == group(m, "experts", 2, mxfp4_backend="marlin")


def test_mxfp4_newest_rules_when_no_version_is_given() -> None:
    m = weights_model(config("gpt-oss-20b"))
    assert weights_per_rank(m, 2).nbytes == weights_per_rank(m, 2, vllm_version=(0, 19, 0)).nbytes


# --- DeepSeek MLA (R1: 128 heads, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128, hidden 7168) -------


def test_mla_matrix_absorption_at_v072_by_hand() -> None:
    # TP8: 16 heads a rank. v0.7.2 keeps, per layer: W_QR [1536, 16·64] bf16; W_Q_UK [1536, 16·512] and
    # W_UV_O [16·512, 7168] requantized to fp8 with fp32 128×128 block scales; W_UK/W_UV views of kv_b_proj
    # dequantized to float32 [512, 16·256]. From v0.8.0: W_UK_T + W_UV as bf16 copies [16·256, 512].
    n = 16
    absorbed = (
        1536 * n * 64 * 2
        + 1536 * n * 512 + (1536 // 128) * (n * 512 // 128) * 4
        + n * 512 * 7168 + (n * 512 // 128) * (7168 // 128) * 4
        + 512 * n * 256 * 4
    )  # fmt: skip
    copies = n * 256 * 512 * 2
    m = weights_model(config("deepseek-r1"))
    v072, v080 = group(m, "attention", 8, vllm_version=(0, 7, 2)), group(m, "attention", 8, vllm_version=(0, 8, 0))
    assert v072 - v080 == 61 * (absorbed - copies)
    # v0.7.3 dequantizes kv_b_proj to bf16 instead (PR #13181)
    assert v072 - group(m, "attention", 8, vllm_version=(0, 7, 3)) == 61 * 512 * n * 256 * 2
    # before v0.7.1: neither
    assert group(m, "attention", 8, vllm_version=(0, 7, 0)) == v080 - 61 * copies


def test_mla_absorption_of_an_unquantized_model_keeps_no_kv_b_copy() -> None:
    # DeepSeek-V2-Lite (bf16, no q_lora: W_Q is q_proj [2048 → 16·192]): W_QR [2048, 16·64], W_Q_UK
    # [2048, 16·512], W_UV_O [16·512, 2048], all bf16; W_UK/W_UV are views of the loaded weight.
    cfg = config("deepseek-v2-lite")
    n, h, layers = cfg["num_attention_heads"], cfg["hidden_size"], cfg["num_hidden_layers"]
    m = weights_model(cfg)
    extra = (h * n * 64 + h * n * 512 + n * 512 * h) * 2
    assert group(m, "attention", vllm_version=(0, 7, 2)) - group(m, "attention") == layers * extra


def test_pipeline_split_gave_the_remainder_to_the_last_stage_before_v08() -> None:
    assert pp_layer_split(61, 2, (0, 7, 2)) == (30, 31)
    assert pp_layer_split(61, 2, (0, 8, 0)) == pp_layer_split(61, 2) == (31, 30)
    assert pp_layer_split(10, 4, (0, 6, 4)) == (2, 2, 2, 4)
    assert sum(pp_layer_split(10, 4, (0, 6, 4))) == sum(pp_layer_split(10, 4)) == 10


def test_deepseek_r1_first_stage_at_v072_holds_thirty_layers() -> None:
    # public/30's driver (PP0 of TP8 × PP2): the first stage's layers at v0.7.2 are 0-29 (3 dense, 27 MoE).
    m = weights_model(config("deepseek-r1"))
    old, new = group(m, "experts", 8, 2, 0, vllm_version=(0, 7, 2)), group(m, "experts", 8, 2, 0)
    assert old * 28 == new * 27


def test_data_parallel_weights_follow_the_release_too() -> None:
    # A DP plan's expert weights (app.core.dp_layout.dp_weights) take the same release rules as the
    # estimate's: gpt-oss-20b, DP2 × TP1 on v0.10.1 is Marlin's layout, on v0.19.0 Triton's.
    from app.core.dp_layout import DPLayout, dp_weights
    from app.core.model_config import shape_from_config

    s = shape_from_config(config("gpt-oss-20b"))
    layout = DPLayout(2, 1, 1, False, 32)
    for version in ((0, 10, 1), (0, 19, 0)):
        table = dp_weights(s, layout, "triton", version)
        assert table is not None
        assert table[0][0] == weights_per_rank(s, 1, dp=2, vllm_version=version).nbytes
    assert dp_weights(s, layout, "triton", (0, 10, 1)) != dp_weights(s, layout, "triton", (0, 19, 0))
