"""Model shape from Hugging Face config.json files: the real configs and the fallback rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.errors import InputError
from app.core.model_config import shape_from_config
from app.core.shape import ModelShape

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
CONFIG_FILES = sorted(CONFIGS.glob("*.json"))
GIB = 1024**3


def load(name: str) -> ModelShape:
    return shape_from_config(json.loads((CONFIGS / f"{name}.json").read_text()))


def test_all_thirteen_real_configs_are_present() -> None:
    assert len(CONFIG_FILES) == 13


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.stem)
def test_every_real_config_parses(path: Path) -> None:
    shape = shape_from_config(json.loads(path.read_text()))
    assert shape.num_layers == len(shape.layer_kinds) > 0
    assert shape.num_attention_heads > 0 and shape.num_kv_heads > 0 and shape.head_dim > 0
    assert shape.params_total >= shape.params_active > 0
    assert shape.weight_bytes > 0
    assert shape.dtype == "bfloat16"


@pytest.mark.parametrize(
    ("name", "layers", "kv", "head_dim", "kinds", "quant"),
    [
        ("llama31-8b", 32, 8, 128, {"full"}, None),
        ("llama31-70b", 80, 8, 128, {"full"}, None),
        ("qwen25-7b", 28, 4, 128, {"full"}, None),
        ("qwen3-14b", 40, 8, 128, {"full"}, None),
        ("r1-distill-qwen14b", 48, 8, 128, {"full"}, None),
        ("qwen3-30b-a3b", 48, 4, 128, {"full"}, None),
        ("qwen3-30b-a3b-fp8", 48, 4, 128, {"full"}, "fp8"),
        ("qwen3-235b-a22b-fp8", 94, 4, 128, {"full"}, "fp8"),
        ("qwen3-vl-30b-a3b", 48, 4, 128, {"full"}, None),
        ("qwen3-vl-30b-a3b-fp8", 48, 4, 128, {"full"}, "fp8"),
        ("deepseek-r1", 61, 128, 576, {"mla"}, "fp8"),
        ("gpt-oss-120b", 36, 8, 64, {"full", "sliding"}, "mxfp4"),
        ("qwen3-next-80b", 48, 2, 256, {"full", "linear"}, None),
    ],
)
def test_real_config_geometry(
    name: str, layers: int, kv: int, head_dim: int, kinds: set[str], quant: str | None
) -> None:
    shape = load(name)
    assert (shape.num_layers, shape.num_kv_heads, shape.head_dim) == (layers, kv, head_dim)
    assert set(shape.layer_kinds) == kinds
    assert shape.quantization == quant


def test_multimodal_config_reads_the_nested_text_config() -> None:
    shape = load("qwen3-vl-30b-a3b")
    assert shape.architecture == "Qwen3VLMoeForConditionalGeneration"
    assert shape.model_type == "qwen3_vl_moe"
    assert (shape.hidden_size, shape.num_experts, shape.num_experts_per_tok) == (2048, 128, 8)
    assert shape.dtype == "bfloat16"  # text_config "dtype"
    assert any("text_config" in note for note in shape.notes)
    text_only = load("qwen3-30b-a3b")
    vision = shape.params_total - text_only.params_total
    assert 0.4e9 < vision < 0.7e9  # the 27-block SigLIP-style tower with deepstack mergers (~0.54B)


def test_deepseek_mla_latent() -> None:
    shape = load("deepseek-r1")
    assert shape.mla_latent_dim == 512 + 64 and shape.is_mla
    assert shape.params_total == pytest.approx(671e9, rel=0.01)  # MTP layer not counted (vLLM skips it)
    assert shape.params_active == pytest.approx(37.5e9, rel=0.03)


def test_gpt_oss_layer_types_and_window() -> None:
    shape = load("gpt-oss-120b")
    assert shape.sliding_window == 128
    assert shape.layer_kinds[:4] == ("sliding", "full", "sliding", "full")
    assert shape.params_total == pytest.approx(116.8e9, rel=0.01)
    # what vLLM's Triton MXFP4 backend holds at TP1 (public log 42, v0.14.1 H100: 64.38 GiB)
    assert shape.weight_bytes == pytest.approx(64.38 * GIB, rel=0.02)
    assert any("bfloat16" in note for note in shape.notes)  # no torch_dtype in the config


def test_qwen3_next_pattern_and_state() -> None:
    shape = load("qwen3-next-80b")
    assert shape.layer_kinds[:4] == ("linear", "linear", "linear", "full")
    assert shape.state is not None and shape.state.kind == "gdn"
    assert (shape.state.num_k_heads, shape.state.num_v_heads, shape.state.d_conv) == (16, 32, 4)


def test_inert_qwen2_sliding_window() -> None:
    shape = load("qwen25-7b")
    assert shape.sliding_window is None and set(shape.layer_kinds) == {"full"}
    assert any("use_sliding_window" in note for note in shape.notes)


@pytest.mark.parametrize(
    ("name", "logged_gib", "tp", "rel"),
    [
        # "Loading model weights took 14.9888 GB" (file 01; the GB label is bytes / 2**30), TP1
        ("llama31-8b", 14.9888, 1, 0.01),
        # "Model loading took 74.2812 GiB" on each of 2 ranks (file 15)
        ("qwen3-next-80b", 74.2812, 2, 0.01),
        # "Actual usage is 27.72 GiB for weight" on each of 8 ranks (file 14, fp8 checkpoint)
        ("qwen3-235b-a22b-fp8", 27.72, 8, 0.01),
        # "Model loading took 14.7708 GiB" on each of 4 ranks (file 18; replicated parts make TP4 × 4 > TP1)
        ("qwen3-vl-30b-a3b", 14.7708, 4, 0.03),
    ],
)
def test_weight_estimate_is_near_the_logs(name: str, logged_gib: float, tp: int, rel: float) -> None:
    assert load(name).weight_bytes == pytest.approx(logged_gib * tp * GIB, rel=rel)


BASE: dict[str, Any] = {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "torch_dtype": "bfloat16"}


def shape_of(**extra: Any) -> ModelShape:
    return shape_from_config({**BASE, **extra})


@pytest.mark.parametrize(
    "key", ["n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups"]
)
def test_kv_head_fallbacks(key: str) -> None:
    assert shape_of(**{key: 2}).num_kv_heads == 2


def test_kv_heads_default_to_attention_heads_and_falcon_multi_query() -> None:
    assert shape_of().num_kv_heads == 8
    assert shape_of(model_type="falcon", multi_query=True).num_kv_heads == 1
    assert shape_of(model_type="falcon", new_decoder_architecture=True, num_kv_heads=4).num_kv_heads == 4


def test_head_dim_explicit_before_hidden_over_heads() -> None:
    assert shape_of().head_dim == 64
    assert shape_of(head_dim=128).head_dim == 128


@pytest.mark.parametrize(
    ("extra", "dtype"),
    [({"torch_dtype": "float16"}, "float16"), ({"torch_dtype": None, "dtype": "torch.float16"}, "float16"),
     ({"torch_dtype": "float32"}, "bfloat16"), ({"torch_dtype": None}, "bfloat16")],
)  # fmt: skip
def test_dtype(extra: dict[str, Any], dtype: str) -> None:
    shape = shape_of(**extra)
    assert shape.dtype == dtype
    if extra.get("torch_dtype") == "float32":
        assert shape.config_dtype == "float32" and any("float32" in n for n in shape.notes)


def test_gemma2_and_gemma3_default_patterns() -> None:
    g2 = shape_of(model_type="gemma2", num_hidden_layers=6, sliding_window=4096)
    assert g2.layer_kinds == ("sliding", "full") * 3 and g2.sliding_window == 4096
    assert g2.tie_word_embeddings  # Gemma default
    g3 = shape_of(model_type="gemma3_text", num_hidden_layers=12, sliding_window=1024)
    assert g3.layer_kinds == (("sliding",) * 5 + ("full",)) * 2
    cohere = shape_of(num_hidden_layers=8, sliding_window=4096, sliding_window_pattern=4)
    assert cohere.layer_kinds == ("sliding", "sliding", "sliding", "full") * 2


def test_llama4_chunked_local_attention() -> None:
    shape = shape_of(model_type="llama4_text", num_hidden_layers=8, attention_chunk_size=8192, no_rope_layers=[])
    assert shape.layer_kinds == ("chunked", "chunked", "chunked", "full") * 2
    assert shape.attention_chunk_size == 8192
    explicit = shape_of(num_hidden_layers=4, attention_chunk_size=8192, no_rope_layers=[1, 0, 1, 0])
    assert explicit.layer_kinds == ("chunked", "full", "chunked", "full")


def test_plain_sliding_window_applies_to_every_layer() -> None:
    # vLLM arg_utils: a non-interleaved model's sliding_window becomes CacheConfig.sliding_window.
    phi3 = shape_of(model_type="phi3", sliding_window=2047, num_attention_heads=32)  # Phi3Config: 32 KV heads
    assert set(phi3.layer_kinds) == {"sliding"} and phi3.sliding_window == 2047
    assert any("every layer" in n for n in phi3.notes)
    assert set(shape_of(model_type="mistral", sliding_window=None).layer_kinds) == {"full"}
    qwen2 = shape_of(model_type="qwen2", sliding_window=131072, use_sliding_window=False, num_key_value_heads=8)
    assert set(qwen2.layer_kinds) == {"full"} and qwen2.sliding_window is None


def test_mamba_models() -> None:
    falcon = shape_from_config(
        {"model_type": "falcon_mamba", "num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 128,
         "state_size": 16, "conv_kernel": 4, "torch_dtype": "bfloat16", "vocab_size": 100}
    )  # fmt: skip
    assert set(falcon.layer_kinds) == {"mamba"} and falcon.num_kv_heads == 0
    assert falcon.state is not None and falcon.state.kind == "mamba1" and falcon.state.d_inner == 128
    jamba = shape_of(model_type="jamba", num_hidden_layers=8, attn_layer_period=8, attn_layer_offset=4,
                     mamba_d_state=16, mamba_d_conv=4, mamba_expand=2)  # fmt: skip
    assert jamba.layer_kinds.count("full") == 1 and jamba.layer_kinds[4] == "full"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"hidden_size": 512, "num_attention_heads": 8}, "model.config.num_hidden_layers"),
        ({**BASE, "torch_dtype": "int3"}, "model.config.torch_dtype"),
        ({**BASE, "num_hidden_layers": 2.5}, "model.config.num_hidden_layers"),
        ({**BASE, "num_key_value_heads": 0}, "model.config.num_key_value_heads"),
        ({**BASE, "layer_types": ["full_attention"]}, "model.config.layer_types"),
        ({**BASE, "text_config": 3}, "model.config.text_config"),
    ],
)
def test_bad_configs_name_the_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        shape_from_config(config)
    assert err.value.field == field
