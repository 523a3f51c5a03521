"""Weights per rank: the sharding and quantization rules against hand computations, and properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.errors import InputError
from app.core.weights import weights_model, weights_per_rank
from app.core.weights_tensor import index_total_size

H, INTER, L, HEADS, KV, D, V = 256, 512, 2, 4, 2, 64, 1000


def tiny(**extra: Any) -> dict[str, Any]:
    """A 2-layer Llama: every tensor countable by hand."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": H,
        "intermediate_size": INTER,
        "num_hidden_layers": L,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "head_dim": D,
        "vocab_size": V,
        "max_position_embeddings": 128,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        **extra,
    }


PADDED_V = 1024  # pad_vocab_size(1000, 64)
ROPE = 128 * D * 2


def linear_params(tp: int = 1) -> int:
    q, kv = HEADS * D // tp, max(1, KV // tp) * D
    return L * (H * (q + 2 * kv) + q * H + 3 * H * INTER // tp)


def test_bf16_by_hand() -> None:
    norms = L * 2 * H + H
    expected = 2 * (linear_params() + norms + 2 * PADDED_V * H) + ROPE
    assert weights_per_rank(tiny()).nbytes == expected


def test_tp_beyond_kv_heads_replicates_one_kv_head_per_rank() -> None:
    # QKVParallelLinear: tp=4 > 2 KV heads → each rank holds 1 KV head (k and v), q ÷ 4.
    norms = L * 2 * H + H
    expected = 2 * (linear_params(4) + norms + 2 * PADDED_V // 4 * H) + ROPE
    assert weights_per_rank(tiny(), tp=4).nbytes == expected


def test_tied_embeddings_once_on_one_stage_and_copied_for_the_last_stage() -> None:
    untied, tied = weights_per_rank(tiny()).nbytes, weights_per_rank(tiny(tie_word_embeddings=True)).nbytes
    assert untied - tied == 2 * PADDED_V * H
    stages = [weights_per_rank(tiny(tie_word_embeddings=True), 1, 2, r).nbytes for r in range(2)]
    assert sum(stages) == untied + ROPE  # the last stage builds its own embed_tokens; one rope cache per stage


def test_fp8_block_scales_by_hand() -> None:
    cfg = tiny(quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]})
    blocks = L * (  # ceil(out/128) × ceil(in/128) fp32 per linear shard
        (HEADS * D // 128) * (H // 128)
        + 2 * 1 * 2
        + (H // 128) * (HEADS * D // 128)
        + (2 * INTER // 128) * (H // 128)
        + (H // 128) * (INTER // 128)
    )
    plain = 2 * (L * 2 * H + H + 2 * PADDED_V * H) + ROPE
    assert weights_per_rank(cfg).nbytes == plain + linear_params() + 4 * blocks


def test_awq_int4_group_128_by_hand() -> None:
    cfg = tiny(quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True})
    shapes = [(HEADS * D, H), (KV * D, H), (KV * D, H), (H, HEADS * D), (2 * INTER, H), (H, INTER)]
    # qweight 4 bits/value + fp16 scale and a packed 4-bit zero per (row, group of 128 inputs)
    per_layer = sum(r * c // 2 + r * (c // 128) * 2 + r * (c // 128) // 2 for r, c in shapes)
    plain = 2 * (L * 2 * H + H + 2 * PADDED_V * H) + ROPE
    assert weights_per_rank(cfg).nbytes == plain + L * per_layer


def test_ignored_modules_stay_at_the_model_dtype() -> None:
    q = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    full = weights_per_rank(tiny(quantization_config=q)).nbytes
    skip = weights_per_rank(tiny(quantization_config={**q, "ignored_layers": ["model.layers.0.mlp.down_proj"]})).nbytes
    assert skip - full == H * INTER * 2 - H * INTER - 4 * (H // 128) * (INTER // 128)


def test_compressed_tensors_w8a8_int8_channel_scales() -> None:
    q = {
        "quant_method": "compressed-tensors",
        "ignore": ["lm_head"],
        "config_groups": {
            "group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel"}}
        },
    }
    rows = HEADS * D + 2 * KV * D + H + 2 * INTER + H  # one fp32 scale per output row
    plain = 2 * (L * 2 * H + H + 2 * PADDED_V * H) + ROPE
    assert weights_per_rank(tiny(quantization_config=q)).nbytes == plain + linear_params() + 4 * L * rows


def test_unknown_quantization_method_names_the_field() -> None:
    with pytest.raises(InputError) as err:
        weights_model(tiny(quantization_config={"quant_method": "wavelet9"}))
    assert err.value.field == "model.config.quantization_config.quant_method" and "wavelet9" in err.value.message


def test_known_but_unmodelled_method_says_what_it_assumed() -> None:
    est = weights_per_rank(tiny(quantization_config={"quant_method": "gguf"}))
    assert est.nbytes == weights_per_rank(tiny()).nbytes
    assert any("gguf" in n and "upper bound" in n for n in est.notes)


def test_safetensors_index_scales_the_checkpoint_part_only() -> None:
    model = weights_model(tiny())
    ckpt = model.checkpoint_bytes
    exact = weights_model(tiny(), {"metadata": {"total_size": ckpt * 2}, "weight_map": {}})
    est, doubled = weights_per_rank(model), weights_per_rank(exact)
    assert doubled.nbytes == 2 * (est.nbytes - ROPE) + ROPE
    assert "total_size" in doubled.source


@pytest.mark.parametrize(
    ("index", "field"),
    [
        ({}, "metadata.total_size"),
        ({"metadata": {"total_size": -3}}, "metadata.total_size"),
        ({"metadata": {"total_size": "12"}}, "metadata.total_size"),
        ({"metadata": {"total_size": 10}, "weight_map": {"a": 3}}, "weight_map"),
    ],
)
def test_malformed_index_is_refused_by_field(index: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        index_total_size(index)
    assert err.value.field == f"model.safetensors_index.{field}"


# --- properties -----------------------------------------------------------------------------

configs = st.builds(
    lambda heads, kv_div, d, inter, layers, experts, tied, vocab: tiny(
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // kv_div),
        head_dim=d,
        intermediate_size=inter,
        num_hidden_layers=layers,
        tie_word_embeddings=tied,
        vocab_size=vocab,
        **(
            {
                "num_experts": experts,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": inter // 2,
                "model_type": "qwen3_moe",
            }
            if experts
            else {}
        ),
    ),
    st.sampled_from([4, 8, 16, 32]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([64, 128]),
    st.sampled_from([256, 512, 768, 1536]),
    st.integers(1, 9),
    st.sampled_from([0, 8, 16, 60]),
    st.booleans(),
    st.integers(100, 5000),
)


@settings(max_examples=60, deadline=None)
@given(configs)
def test_more_tp_never_raises_per_rank_weights(cfg: dict[str, Any]) -> None:
    model = weights_model(cfg)
    sizes = [weights_per_rank(model, tp).nbytes for tp in (1, 2, 4, 8, 16)]
    assert sizes == sorted(sizes, reverse=True)


@settings(max_examples=60, deadline=None)
@given(configs, st.integers(1, 4))
def test_pipeline_stages_sum_to_the_whole(cfg: dict[str, Any], pp: int) -> None:
    pp = min(pp, cfg["num_hidden_layers"])
    model = weights_model(cfg)
    whole = weights_per_rank(model).nbytes
    stages = [weights_per_rank(model, 1, pp, r) for r in range(pp)]
    rope = next((g.nbytes for g in stages[0].groups if g.group == "rope"), 0)
    tied_copy = 2 * (-(-cfg["vocab_size"] // 64) * 64) * H if cfg["tie_word_embeddings"] and pp > 1 else 0
    assert sum(s.nbytes for s in stages) == whole + (pp - 1) * rope + tied_copy


@settings(max_examples=40, deadline=None)
@given(configs.filter(lambda c: c.get("num_experts", 0) in (8, 16)), st.sampled_from([2, 4, 8]))
def test_expert_parallel_and_tensor_parallel_conserve_expert_bytes(cfg: dict[str, Any], n: int) -> None:
    model = weights_model(cfg)

    def experts(**kw: Any) -> int:
        return sum(g.nbytes for g in weights_per_rank(model, n, **kw).groups if g.group == "experts")

    tp_total = n * experts()
    ep_total = sum(experts(enable_expert_parallel=True, ep_rank=r) for r in range(n))
    one_rank = sum(g.nbytes for g in weights_per_rank(model).groups if g.group == "experts")
    assert tp_total == ep_total == one_rank


def test_online_fp8_on_an_exact_index_still_halves_the_linear_weights() -> None:
    from app.core.model_config import shape_from_config
    from app.core.shape import online_fp8_shape

    model = weights_model(tiny())
    exact = shape_from_config(tiny(), {"metadata": {"total_size": model.checkpoint_bytes}})
    fp8 = online_fp8_shape(exact)
    linear = linear_params()  # bf16 → one byte per value, plus one fp32 scale per tensor
    assert weights_per_rank(exact).nbytes - weights_per_rank(fp8).nbytes == linear - 4 * 6 * L
