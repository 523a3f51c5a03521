"""GPT-2, GPTBigCode, OPT and Falcon decoders (app/core/weights_arch.py), against published checkpoint
sizes and by hand from their vLLM classes (vllm/model_executor/models/{gpt2,gpt_bigcode,opt,falcon}.py
@4dd49b06f). These had fallen back to the Llama-style gated MLP: 35-50 % too many weight bytes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.core.kvspec import kv_bytes_per_token_at
from app.core.model_config import shape_from_config
from app.core.profile_run import mlp_elems_per_token
from app.core.weights import weights_per_rank
from app.core.weights_tensor import WeightsModel, checkpoint_bytes


def _opt(h: int, layers: int, heads: int, ffn: int, width: int, pre_norm: bool) -> dict[str, object]:
    return {
        "architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": h, "num_hidden_layers": layers,
        "num_attention_heads": heads, "ffn_dim": ffn, "max_position_embeddings": 2048, "vocab_size": 50272,
        "word_embed_proj_dim": width, "do_layer_norm_before": pre_norm, "torch_dtype": "float16",
    }  # fmt: skip


GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
        "n_positions": 1024, "vocab_size": 50257, "torch_dtype": "float16"}  # fmt: skip
FALCON_7B = {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 4544,
             "num_hidden_layers": 32, "num_attention_heads": 71, "multi_query": True, "parallel_attn": True,
             "bias": False, "alibi": False, "new_decoder_architecture": False, "vocab_size": 65024,
             "torch_dtype": "bfloat16"}  # fmt: skip

# Whole-checkpoint bytes at 2 bytes a parameter: the parameter counts transformers reports for the
# Hub checkpoints (num_parameters(), tied heads counted once). OPT: 125,239,296 / 331,196,416 (opt-350m:
# a 512-wide embedding with project_in/out and no final LayerNorm) / 1,315,758,080 / 6,658,473,984 —
# the model cards' 125M / 350M / 1.3B / 6.7B; an unrelated public test suite found with the code
# search pins the same fp16 totals. GPT-2: 124,439,808. Falcon-7B: 6,921,720,704 (multi-query,
# parallel attention, one LayerNorm a layer).
PUBLISHED = [
    ("opt-125m", _opt(768, 12, 12, 3072, 768, True), 250_478_592),
    ("opt-350m", _opt(1024, 24, 16, 4096, 512, False), 662_392_832),
    ("opt-1.3b", _opt(2048, 24, 32, 8192, 2048, True), 2_631_516_160),
    ("opt-6.7b", _opt(4096, 32, 32, 16384, 4096, True), 13_316_947_968),
    ("gpt2", GPT2, 2 * 124_439_808),
    ("falcon-7b", FALCON_7B, 2 * 6_921_720_704),
]


@pytest.mark.parametrize(("name", "config", "total"), PUBLISHED, ids=[c[0] for c in PUBLISHED])
def test_checkpoint_bytes_equal_the_published_sizes(name: str, config: dict[str, object], total: int) -> None:
    assert checkpoint_bytes(_weights(config)) == total, name


def _weights(config: dict[str, object]) -> WeightsModel:
    model = shape_from_config(config).weights
    assert model is not None
    return model


def _pad64(n: int) -> int:
    return -(-n // 64) * 64


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_opt_125m_per_rank_by_hand(tp: int) -> None:
    # opt.py: qkv_proj / out_proj / fc1 / fc2 with biases (enable_bias), the row-parallel biases whole
    # per rank; two LayerNorms a layer; embed_positions 2048 + 2 rows whole; final_layer_norm; the
    # VocabParallelEmbedding padded to 64 rows and split, the lm_head tied to it.
    h, ffn, vocab = 768, 3072, _pad64(50272)
    layer = 4 * h + (3 * h * h + 3 * h) // tp + h * h // tp + h + (ffn * h + ffn) // tp + h * ffn // tp + h
    by_hand = 2 * (12 * layer + vocab * h // tp + 2050 * h + 2 * h)
    model = shape_from_config(_opt(768, 12, 12, 3072, 768, True))
    assert weights_per_rank(model, tp, vllm_version=(0, 19, 0)).nbytes == by_hand


def test_opt_125m_within_two_and_a_half_percent_of_its_logged_load() -> None:
    # tests/data/vllm-logs/public/35 (vLLM 0.4.2, facebook/opt-125m): "Loading model weights took
    # 0.2389 GB". That V0 figure is the caching allocator's peak over the load (CudaMemoryProfiler),
    # so it sits a few MB above the tensors' own bytes; the gated-MLP fallback said 0.355 GiB.
    model = shape_from_config(_opt(768, 12, 12, 3072, 768, True))
    logged = 0.2389 * 2**30
    assert -0.025 < weights_per_rank(model, 1, vllm_version=(0, 4, 2)).nbytes / logged - 1 < 0


def test_gpt_bigcode_is_multi_query_by_default_with_learned_positions_by_hand() -> None:
    # gpt_bigcode.py: multi_query (GPTBigCodeConfig's default True) → one KV head in c_attn and in the
    # KV cache; c_attn / c_proj / c_fc / c_proj biased; ln_1, ln_2; wpe whole per rank; tied head.
    config = {"architectures": ["GPTBigCodeForCausalLM"], "model_type": "gpt_bigcode", "n_embd": 2048,
              "n_layer": 24, "n_head": 16, "n_positions": 2048, "n_inner": 8192, "vocab_size": 49280,
              "torch_dtype": "float16"}  # fmt: skip
    shape = shape_from_config(config)
    assert shape.num_kv_heads == 1
    assert any("multi_query not in config.json: True" in n for n in shape.notes)
    h, d, inner = 2048, 128, 8192
    layer = 4 * h + (h + 2 * d) * h + (h + 2 * d) + h * h + h + inner * h + inner + h * inner + h
    assert shape.weights is not None
    assert checkpoint_bytes(shape.weights) == 2 * (24 * layer + 49280 * h + 2048 * h + 2 * h)
    assert kv_bytes_per_token_at(shape) == 24 * 2 * d * 2  # one K and one V head of 128, fp16, 24 layers


@pytest.mark.parametrize(
    ("extra", "norms", "rope"),
    [
        ({}, 1, True),  # parallel attention, one input_layernorm (Falcon-7B)
        ({"parallel_attn": False}, 2, True),  # input_ + post_attention_layernorm
        ({"new_decoder_architecture": True, "num_kv_heads": 8}, 2, True),  # ln_attn + ln_mlp (Falcon-40B)
        ({"alibi": True}, 1, False),  # alibi: no rotary cache (Falcon-RW)
    ],
)
def test_falcon_layernorms_and_rotary_follow_the_config(extra: dict[str, object], norms: int, rope: bool) -> None:
    config = {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 128, "max_position_embeddings": 32,
              "torch_dtype": "bfloat16", **extra}  # fmt: skip
    shape = shape_from_config(config)
    h, d, kv = 64, 8, shape.num_kv_heads
    layer = 2 * norms * h + (8 + 2 * kv) * d * h + h * h + 2 * 4 * h * h  # bias False: no bias vectors
    cache = 32 * d if rope else 0  # cos_sin_cache: max positions × rotary dim
    expected = 2 * (2 * layer + 128 * h + 2 * h + cache)
    assert weights_per_rank(shape, 1, vllm_version=(0, 19, 0)).nbytes == expected


def test_more_tp_never_raises_these_per_rank_weights() -> None:
    for config in (GPT2, FALCON_7B, _opt(1024, 24, 16, 4096, 512, False)):
        model = shape_from_config(config)
        sizes = [weights_per_rank(model, tp, vllm_version=(0, 19, 0)).nbytes for tp in (1, 2, 4)]
        assert sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize("tp", [1, 2])
def test_the_profile_run_sees_an_ungated_mlp_as_up_plus_activation(tp: int) -> None:
    # An ungated MLP (up → activation → down) holds the up projection's I/TP while the activation
    # writes its I/TP: 2 × I/TP per token, where the gated gate_up (2 × I/TP) + SiluAndMul is 3 × I/TP.
    opt = shape_from_config(_opt(768, 12, 12, 3072, 768, True))
    assert not opt.gated_mlp and opt.intermediate_size == 3072
    assert mlp_elems_per_token(opt, tp) == (2 * 3072 // tp, 2 * 768)
    llama = replace(opt, gated_mlp=True)
    assert mlp_elems_per_token(llama, tp) == (3 * 3072 // tp, 2 * 768)


def test_a_refinedweb_falcon_40b_config_ties_its_head_as_vllm_does() -> None:
    # tiiuae/falcon-40b-instruct's own config (model_type "RefinedWeb", as quoted in a public
    # Tenstorrent port's notes): no tie_word_embeddings, so FalconForCausalLM ties (falcon.py
    # @4dd49b06f); new_decoder_architecture: ln_attn + ln_mlp, 8 KV heads, MLP 4 × hidden.
    config = {"architectures": ["RWForCausalLM"], "bias": False, "hidden_size": 8192, "model_type": "RefinedWeb",
              "n_head": 128, "n_head_kv": 8, "n_layer": 60, "new_decoder_architecture": True, "num_kv_heads": 8,
              "parallel_attn": True, "torch_dtype": "bfloat16", "vocab_size": 65024}  # fmt: skip
    shape = shape_from_config(config)
    assert shape.tie_word_embeddings and shape.num_kv_heads == 8
    h, d = 8192, 64
    layer = 2 * 2 * h + (128 + 16) * d * h + h * h + 2 * 4 * h * h
    assert checkpoint_bytes(_weights(config)) == 2 * (60 * layer + 65024 * h + 2 * h)  # 41,303,293,952 parameters
