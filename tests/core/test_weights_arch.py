"""Ungated-MLP architectures (app/core/weights_arch.py), summed by hand from their vLLM classes."""

from __future__ import annotations

import pytest

from app.core.weights import weights_model, weights_per_rank
from app.ingest.catalogue import get_model


def _phi2_by_hand(tp: int) -> int:
    # phi.py @4dd49b06f, microsoft/phi-2: h 2560, 32 layers, vocab 51200 (a multiple of 64), fp16.
    h, layers, vocab, inter = 2560, 32, 51200, 4 * 2560
    per_layer = (
        2 * h  # input_layernorm: weight + bias (no post-attention norm: attention and MLP in parallel)
        + (3 * h * h + 3 * h) // tp  # qkv_proj weight + bias, column-parallel
        + h * h // tp + h  # dense: row-parallel weight, its bias whole on every rank
        + (inter * h + inter) // tp  # fc1 weight + bias, column-parallel
        + h * inter // tp + h  # fc2: row-parallel weight, bias whole
    )  # fmt: skip
    edges = vocab * h // tp + 2 * h + (vocab * h + vocab) // tp  # embed, final LayerNorm, lm_head + bias
    rope = 2048 * int(80 * 0.4)  # cos_sin_cache: max positions × rotary_dim (head 80 × partial 0.4)
    return 2 * (layers * per_layer + edges + rope)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_phi2_plain_mlp_with_biases_by_hand(tp: int) -> None:
    model = weights_model(get_model("phi-2").config_dict())
    assert weights_per_rank(model, tp, vllm_version=(0, 19, 0)).nbytes == _phi2_by_hand(tp)


def _tiny(model_type: str, **extra: object) -> dict[str, object]:
    return {
        "architectures": ["X"], "model_type": model_type, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 128, "max_position_embeddings": 32,
        "torch_dtype": "bfloat16", "tie_word_embeddings": False, **extra,
    }  # fmt: skip


def test_gpt_neox_two_layernorms_biases_and_rotary_pct_by_hand() -> None:
    # gpt_neox.py: query_key_value / dense with bias (attention_bias default), dense_h_to_4h / dense_4h_to_h
    # with bias, input_ + post_attention_layernorm, embed_out without bias; rotary_pct 0.25 of head 16.
    h, inter, vocab = 64, 256, 128
    layer = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (inter * h + inter) + (h * inter + h)
    by_hand = 2 * (2 * layer + vocab * h + 2 * h + vocab * h + 32 * 4)
    model = weights_model(_tiny("gpt_neox", rotary_pct=0.25))
    assert weights_per_rank(model).nbytes == by_hand


def test_gptj_bias_free_attention_one_layernorm_and_rotary_dim_by_hand() -> None:
    # gpt_j.py: qkv_proj / out_proj bias=False, fc_in / fc_out of n_inner with bias, ln_1 only,
    # lm_head with bias; rotary_dim 8 of head 16.
    h, inter, vocab = 64, 128, 128
    layer = 2 * h + 3 * h * h + h * h + (inter * h + inter) + (h * inter + h)
    by_hand = 2 * (2 * layer + vocab * h + 2 * h + vocab * h + vocab + 32 * 8)
    model = weights_model(_tiny("gptj", n_inner=inter, rotary_dim=8))
    assert weights_per_rank(model).nbytes == by_hand


def test_starcoder2_without_bias_is_a_plain_mlp_with_layernorms() -> None:
    # starcoder2.py: use_bias False drops every linear bias; the LayerNorms keep theirs.
    h, inter, vocab = 64, 256, 128
    layer = 4 * h + 3 * h * h + h * h + inter * h + h * inter
    by_hand = 2 * (2 * layer + vocab * h + 2 * h + vocab * h + 32 * 16)
    assert weights_per_rank(weights_model(_tiny("starcoder2", use_bias=False))).nbytes == by_hand


def test_a_gated_model_keeps_its_gate() -> None:
    # The same tiny shape as Llama: gate_up 2 × intermediate, no biases, RMSNorms.
    h, inter, vocab = 64, 256, 128
    layer = 2 * h + 4 * h * h + 3 * inter * h
    by_hand = 2 * (2 * layer + vocab * h + h + vocab * h + 32 * 16)
    assert weights_per_rank(weights_model(_tiny("llama"))).nbytes == by_hand


def _gemma3_vision_by_hand(tp: int) -> int:
    # siglip.py @4dd49b06f, Gemma-3's vision_config: width 1152, MLP 4304, 27 layers, 896 px / 14 px patches.
    w, inter, depth, text = 1152, 4304, 27, 3840
    block = (
        (3 * w * w + 3 * w) // tp  # qkv_proj (QKVParallelLinear, bias)
        + w * w // tp + w  # out_proj: row-parallel, bias whole
        + (inter * w + inter) // tp  # fc1 (column-parallel, bias)
        + w * inter // tp + w  # fc2: row-parallel, bias whole
        + 4 * w  # layer_norm1, layer_norm2 (LayerNorm: weight + bias)
    )  # fmt: skip
    embeddings = 3 * 14 * 14 * w + w + (896 // 14) ** 2 * w  # patch Conv2d (+ bias), position embedding
    tail = 2 * w + w * text + w  # post_layernorm; projector weight (nn.Parameter: whole) + mm_soft_emb_norm
    return 2 * (depth * block + embeddings + tail)


@pytest.mark.parametrize("tp", [1, 2])
def test_gemma3_vision_tower_and_projector_by_hand(tp: int) -> None:
    model = weights_model(get_model("gemma-3-12b-it").config_dict())
    groups = {g.group: g.nbytes for g in weights_per_rank(model, tp, vllm_version=(0, 19, 0)).groups}
    assert groups["vision"] == _gemma3_vision_by_hand(tp)
