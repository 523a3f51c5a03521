"""Per-rank KV bytes, pages, groups and vLLM's admission arithmetic (app.core.kvspec).

The model-shapes checks compare against an oracle written here from the dataset's own fields and
the plain formulas (full/GQA ``2·L·h_rank·d·2`` with ``h_rank = max(1, kv // tp)``, MLA one latent
replicated on every rank), never against the code under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.errors import InputError
from app.core.kvspec import (
    KV_CACHE_DTYPES,
    RankKV,
    kv_bytes_per_token_at,
    pp_layer_split,
    rank_kv,
    rank_kv_stages,
    rank_kv_uniform,
)
from app.core.mamba import state_bytes_per_layer
from app.core.model_config import shape_from_config
from app.core.shape import ModelShape

DATA = Path(__file__).resolve().parents[1] / "data"
MODELS: list[dict[str, Any]] = json.loads((DATA / "model-shapes.json").read_text())["models"]
TPS = (1, 2, 4, 8)


def _config(m: dict[str, Any]) -> dict[str, Any]:
    """A Hugging Face-style config.json rebuilt from a model-shapes.json entry."""
    fam = m["family"].split(" ")[0]
    mt = {"deepseek_v2/v3": "deepseek_v3", "gemma3": "gemma3_text", "llama4": "llama4_text"}.get(fam, fam)
    c: dict[str, Any] = {"model_type": mt, "num_hidden_layers": m["num_hidden_layers"]}
    for key in ("hidden_size", "vocab_size", "max_position_embeddings", "intermediate_size", "torch_dtype"):
        if m.get(key) is not None:
            c[key] = m[key]
    if m.get("tie_word_embeddings") is not None:
        c["tie_word_embeddings"] = m["tie_word_embeddings"]
    if m["num_attention_heads"]:
        c["num_attention_heads"] = m["num_attention_heads"]
        c["num_key_value_heads"] = m["num_key_value_heads"]
    if m["head_dim"] and m["head_dim_source"].startswith("explicit"):
        c["head_dim"] = m["head_dim"]
    c.update(m.get("mla") or {})
    c.update({k: v for k, v in (m.get("moe") or {}).items() if not isinstance(v, str)})
    c.update(_attention_pattern(m, mt))
    c.update(_mamba(m, mt))
    return c


def _attention_pattern(m: dict[str, Any], mt: str) -> dict[str, Any]:
    sw = m.get("sliding_window") or {}
    out: dict[str, Any] = {}
    if sw.get("value") is not None:
        out["sliding_window"] = sw["value"]
    if "use_sliding_window" in sw:
        out["use_sliding_window"] = sw["use_sliding_window"]
    if mt == "gpt_oss":
        n = m["num_hidden_layers"]
        out["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if "sliding_window_pattern" in sw:
        out["sliding_window_pattern"] = sw["sliding_window_pattern"]
    if m.get("attention_chunk_size"):
        out["attention_chunk_size"] = m["attention_chunk_size"]
        out["no_rope_layers"] = m["layer_pattern"]["no_rope_layers_in_config"]
        out["intermediate_size_mlp"] = m["intermediate_size_mlp"]
    if m.get("linear_attention"):
        out.update({k: v for k, v in m["linear_attention"].items() if k.startswith("linear_")})
        out["full_attention_interval"] = m["layer_pattern"]["full_attention_interval"]
    return out


def _mamba(m: dict[str, Any], mt: str) -> dict[str, Any]:
    mb = m.get("mamba")
    if not mb:
        return {}
    if mt == "falcon_mamba":
        keys = {"state_size": "state_size", "conv_kernel": "conv_kernel", "time_step_rank": "time_step_rank"}
        return {dst: mb[src] for src, dst in keys.items()}
    if mt == "jamba":
        pattern = m["layer_pattern"]
        return {
            "attn_layer_period": pattern["attn_layer_period"], "attn_layer_offset": pattern["attn_layer_offset"],
            "mamba_d_state": mb["mamba_d_state"], "mamba_d_conv": mb["mamba_d_conv"],
            "mamba_expand": mb["mamba_expand"], "mamba_dt_rank": mb["mamba_dt_rank"],
        }  # fmt: skip
    lp = m["layer_pattern"]
    ffn = "E" if m.get("moe") else "-"
    n_ffn = m["num_hidden_layers"] - lp["attention_layers"] - lp["mamba_layers"]
    pattern = "M" * lp["mamba_layers"] + ffn * n_ffn + "*" * lp["attention_layers"]
    out = {
        "hybrid_override_pattern": pattern, "mamba_num_heads": mb["mamba_num_heads"],
        "mamba_head_dim": mb["mamba_head_dim"], "n_groups": mb["n_groups"],
        "ssm_state_size": mb["ssm_state_size"], "conv_kernel": mb["conv_kernel"],
    }  # fmt: skip
    if "mamba_ssm_cache_dtype" in mb:
        out["mamba_ssm_cache_dtype"] = "float32"
    return out


def _oracle(m: dict[str, Any], tp: int) -> int | None:
    """Bytes per token per rank from the dataset's fields, or None when vLLM refuses the TP degree."""
    heads, kv = m["num_attention_heads"] or 0, m["num_key_value_heads"] or 0
    mla = m.get("mla")
    if heads and heads % tp:
        return None
    if heads and not mla and ((tp >= kv and tp % kv) or (tp < kv and kv % tp)):
        return None
    if mla:
        return int(m["num_hidden_layers"] * (mla["kv_lora_rank"] + mla["qk_rope_head_dim"]) * 2)
    layers = m["derived"].get("attention_layers_with_kv") or 0
    return 2 * layers * max(1, kv // tp) * (m["head_dim"] or 0) * 2


SHAPES = {m["name"]: shape_from_config(_config(m)) for m in MODELS}


def test_dataset_has_36_models() -> None:
    assert len(MODELS) == 36


@pytest.mark.parametrize("m", MODELS, ids=[m["name"] for m in MODELS])
@pytest.mark.parametrize("tp", TPS)
def test_bytes_per_token_per_rank_matches_the_oracle(m: dict[str, Any], tp: int) -> None:
    expected = _oracle(m, tp)
    shape = SHAPES[m["name"]]
    if expected is None:
        with pytest.raises(InputError) as err:
            rank_kv(shape, tp=tp)
        assert err.value.field == "layout.tp"
        return
    assert rank_kv(shape, tp=tp).kv_bytes_per_token == expected
    if tp == 1 and expected:
        assert expected == m["derived"].get(
            "kv_bytes_per_token_bf16_all_attention_layers", m["derived"].get("mla_kv_bytes_per_token_bf16")
        )


@pytest.mark.parametrize("m", MODELS, ids=[m["name"] for m in MODELS])
def test_layer_pattern_counts_match_the_dataset(m: dict[str, Any]) -> None:
    kinds = SHAPES[m["name"]].layer_kinds
    assert sum(k in ("full", "sliding", "chunked", "mla") for k in kinds) == (
        m["derived"].get("attention_layers_with_kv") or (m["num_hidden_layers"] if m.get("mla") else 0)
    )
    sw = m.get("sliding_window") or {}
    if "sliding_layers" in sw:
        assert (kinds.count("sliding"), kinds.count("full")) == (sw["sliding_layers"], sw["global_layers"])
    lp = m.get("layer_pattern") or {}
    if "chunked_layers" in lp:
        assert (kinds.count("chunked"), kinds.count("full")) == (lp["chunked_layers"], lp["global_layers"])
    if "linear_attention_layers" in lp:
        assert kinds.count("linear") == lp["linear_attention_layers"]
    if m.get("mamba"):
        assert kinds.count("mamba") == m["mamba"].get("mamba_layers", lp.get("mamba_layers"))


@pytest.mark.parametrize("m", [m for m in MODELS if m.get("mamba") or m.get("linear_attention")], ids=str)
def test_recurrent_state_per_layer_matches_the_dataset(m: dict[str, Any]) -> None:
    shape = SHAPES[m["name"]]
    assert shape.state is not None
    block = m.get("mamba") or m["linear_attention"]
    key = next(k for k in block if k.startswith("per_layer_state_bytes"))
    assert state_bytes_per_layer(shape.state, 1) == block[key]


@pytest.mark.parametrize(
    "m", [m for m in MODELS if m["params_source"].startswith("computed from config")], ids=lambda m: m["name"]
)
def test_parameter_count_matches_the_datasets_formula(m: dict[str, Any]) -> None:
    got = SHAPES[m["name"]].params_total / 1e9
    assert got == pytest.approx(m["params_total_b"], rel=0.015)


def test_mla_latent_is_replicated_not_sharded() -> None:
    shape = SHAPES["DeepSeek-V3"]
    per_rank = {tp: rank_kv(shape, tp=tp) for tp in (1, 2, 4, 8, 16, 32)}
    assert {r.kv_bytes_per_token for r in per_rank.values()} == {61 * 576 * 2}
    assert {r.kv_heads_per_rank for r in per_rank.values()} == {1}
    assert per_rank[8].page_bytes == 61 * 16 * 576 * 2


def test_kv_heads_are_replicated_above_the_kv_head_count() -> None:
    shape = SHAPES["Qwen3-235B-A22B"]  # 4 KV heads
    assert [rank_kv(shape, tp=tp).kv_heads_per_rank for tp in (1, 2, 4, 8, 16)] == [4, 2, 1, 1, 1]
    assert kv_bytes_per_token_at(shape, 8) == kv_bytes_per_token_at(shape, 4) == 94 * 2 * 128 * 2


@pytest.mark.parametrize(
    ("heads", "kv", "tp"), [(24, 8, 3), (12, 3, 2), (24, 6, 4), (12, 3, 4), (28, 4, 8), (40, 10, 4)]
)
def test_vllm_refuses_these_tp_degrees(heads: int, kv: int, tp: int) -> None:
    shape = shape_from_config(
        {"num_hidden_layers": 2, "hidden_size": heads * 64, "num_attention_heads": heads, "num_key_value_heads": kv}
    )
    with pytest.raises(InputError) as err:
        rank_kv(shape, tp=tp)
    assert err.value.field == "layout.tp" and f"tp={tp}" in err.value.message


@pytest.mark.parametrize(
    ("layers", "pp", "split"),
    [
        (2, 2, (1, 1)),
        (3, 2, (2, 1)),
        (3, 3, (1, 1, 1)),
        (4, 3, (1, 2, 1)),
        (5, 3, (2, 2, 1)),
        (61, 4, (15, 15, 16, 15)),
        (94, 8, (11, 12, 12, 12, 12, 12, 12, 11)),
    ],
)
def test_pp_split_follows_get_pp_indices(layers: int, pp: int, split: tuple[int, ...]) -> None:
    # The first five rows are vLLM's own tests/distributed/test_pipeline_partition.py cases.
    assert pp_layer_split(layers, pp) == split


def test_pp_keeps_only_the_stage_layers_and_the_largest_stage_binds() -> None:
    shape = SHAPES["Llama-3.1-8B"]
    stages = rank_kv_stages(shape, pp=3)
    assert [s.layers_on_rank for s in stages] == [11, 11, 10]
    assert [s.kv_bytes_per_token for s in stages] == [11 * 4096, 11 * 4096, 10 * 4096]
    tight = rank_kv(shape, pp=3)
    assert tight.stage == 0 and tight.page_bytes == 11 * 16 * 4096
    with pytest.raises(InputError) as err:
        rank_kv(shape, pp=33)
    assert err.value.field == "layout.pp"


@pytest.mark.parametrize(
    ("dtype", "token_bytes"),
    [("auto", 4096), ("bfloat16", 4096), ("float16", 4096), ("float32", 8192), ("fp8", 2048),
     ("fp8_e4m3", 2048), ("fp8_e5m2", 2048), ("fp8_inc", 2048),
     ("int8_per_token_head", 2048 + 2 * 8 * 4), ("fp8_per_token_head", 2048 + 2 * 8 * 4),
     ("nvfp4", 2 * 8 * (64 + 8))],
)  # fmt: skip
def test_cache_dtypes_per_layer(dtype: str, token_bytes: int) -> None:
    rkv = rank_kv(SHAPES["Llama-3.1-8B"], kv_cache_dtype=dtype)  # 8 KV heads × 128, 32 layers
    assert rkv.kv_bytes_per_token == 32 * token_bytes
    assert rkv.page_bytes == 32 * 16 * token_bytes


def test_mla_cache_dtypes() -> None:
    shape = SHAPES["DeepSeek-V3"]
    assert rank_kv(shape, kv_cache_dtype="fp8").kv_bytes_per_token == 61 * 576
    assert rank_kv(shape, kv_cache_dtype="fp8_ds_mla").kv_bytes_per_token == 61 * 656
    with pytest.raises(InputError):
        rank_kv(shape, kv_cache_dtype="nvfp4")
    with pytest.raises(InputError):
        rank_kv(SHAPES["Llama-3.1-8B"], kv_cache_dtype="fp8_ds_mla")


def test_unknown_cache_dtype_lists_the_valid_ones() -> None:
    with pytest.raises(InputError) as err:
        rank_kv(SHAPES["Llama-3.1-8B"], kv_cache_dtype="int4")
    assert err.value.field == "engine.kv_cache_dtype"
    assert all(name in err.value.message for name in KV_CACHE_DTYPES)


@pytest.mark.parametrize("bad", [{"tp": 0}, {"pp": -1}, {"dcp": 0}, {"block_size": 0}, {"dcp": 3}])
def test_bad_layout_values_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(InputError):
        rank_kv(SHAPES["Llama-3.1-8B"], **bad)  # type: ignore[arg-type]


def test_hybrid_groups_gemma3_gpt_oss_jamba_nemotron() -> None:
    gemma3 = rank_kv(SHAPES["Gemma-3-12B-it"])  # 40 sliding + 8 full → 6 groups of 8
    assert (gemma3.n_groups, gemma3.group_size) == (6, 8)
    assert gemma3.page_bytes == 8 * 16 * 8 * 256 * 2 * 2
    gpt = rank_kv(SHAPES["gpt-oss-120b"])  # 18 + 18 → 2 groups of 18
    assert (gpt.n_groups, gpt.group_size, gpt.block_size) == (2, 18, 16)
    jamba = rank_kv(SHAPES["Jamba-1.5-Mini"])  # 4 attention + 28 Mamba → 8 groups of 4
    assert (jamba.n_groups, jamba.group_size) == (8, 4)
    nemo = rank_kv(SHAPES["Nemotron-H-56B-Base-8K"])  # 10 + 54 (padded to 60) → 7 groups of 10
    assert (nemo.n_groups, nemo.group_size) == (7, 10)
    assert [g.num_layers for g in nemo.groups if g.kind == "mamba"] == [9, 9, 9, 9, 9, 9]


def test_hybrid_mamba_block_size_is_raised_and_the_state_page_padded() -> None:
    rkv = rank_kv(SHAPES["Qwen3-Next-80B-A3B"], tp=2)
    assert rkv.block_size == 544  # log 15: "Setting attention block size to 544 tokens"
    assert rkv.mamba_page_padding_pct is not None and round(rkv.mamba_page_padding_pct, 2) == 1.49
    assert rkv.page_bytes_per_layer == 544 * 1 * 256 * 2 * 2
    assert (rkv.n_groups, rkv.group_size) == (4, 12)
    assert rkv.mamba_state_bytes_per_request == 36 * (3 * 4096 + 16 * 128 * 128) * 2
    assert rank_kv(SHAPES["Qwen3-Next-80B-A3B"], tp=2, block_size=1024).block_size == 1024


def test_per_request_worst_cases() -> None:
    gemma2 = rank_kv(SHAPES["Gemma-2-9B-it"])  # 21 sliding (4096) + 21 full → 2 groups
    full, sliding = math.ceil(8192 / 16), math.ceil(min(4096 - 1 + 2048, 8192) / 16) + 1
    assert gemma2.per_request_blocks(8192, 2048) == full + sliding
    assert gemma2.per_request_bytes(8192, 2048) == (full + sliding) * gemma2.page_bytes
    scout = rank_kv(SHAPES["Llama-4-Scout-17B-16E"])  # 36 chunked (8192) + 12 full → 4 groups of 12
    assert scout.n_groups == 4
    chunk = math.ceil(min(8192 + 8192, 131072) / 16)
    assert scout.per_request_blocks(131072, 8192) == 3 * chunk + 131072 // 16
    nano = rank_kv(SHAPES["NVIDIA-Nemotron-3-Nano-30B-A3B"])  # 6 attention + 23 Mamba → 5 groups of 6
    assert nano.per_request_blocks(100, 512) == math.ceil(100 / nano.block_size) + 4


def test_dcp_splits_each_sequence() -> None:
    rkv = rank_kv(SHAPES["DeepSeek-V3"], tp=8, dcp=8, block_size=64)
    assert rkv.per_request_blocks(131072, 8192) == 131072 // 8 // 64
    assert rkv.tokens_for_blocks(1000) == 1000 * 64 * 8


def test_concurrency_and_kv_cache_size() -> None:
    rkv = rank_kv(SHAPES["Llama-3.1-8B"])
    assert rkv.max_concurrency(2000, 20000, 8192) == 2000 / 1250
    assert rkv.kv_cache_size_tokens(2000, 20000, 8192) == 32000
    assert rkv.tokens_for_blocks(2000) == 32000


def test_uniform_quick_mode() -> None:
    rkv = rank_kv_uniform(131072)
    assert rkv.page_bytes == 2 * 1024**2
    assert rkv.blocks_for(44 * 1024**3) == 22528
    assert rkv.tokens_for_blocks(22528) == 360448  # seed 000: 44 GiB at 128 KiB/token
    with pytest.raises(InputError):
        rank_kv_uniform(0)


def test_largest_max_model_len_is_the_boundary() -> None:
    rkv = rank_kv(SHAPES["Llama-3.1-8B"])
    kv = 3 * 1024**3 + 12345
    best = rkv.largest_max_model_len(kv, 8192)
    assert best == kv // rkv.page_bytes * 16
    assert rkv.fits(kv, best, 8192) and not rkv.fits(kv, best + 1, 8192)
    assert rkv.largest_max_model_len(1000, 8192) == 0
    assert rkv.largest_max_model_len(10**15, 8192) == 131072  # capped at max_position_embeddings


# --- properties -------------------------------------------------------------------------------

NAMES = sorted(SHAPES)
ranks = st.builds(
    lambda name, bs: rank_kv(SHAPES[name], block_size=bs),
    st.sampled_from(NAMES),
    st.sampled_from([16, 32, 64]),
)


@given(name=st.sampled_from(NAMES), dtype=st.sampled_from(["auto", "fp8", "float32", "nvfp4"]))
def test_bytes_per_token_never_grow_with_tp(name: str, dtype: str) -> None:
    shape: ModelShape = SHAPES[name]
    if shape.is_mla and dtype == "nvfp4":
        return
    seen: list[int] = []
    for tp in (1, 2, 4, 8, 16, 32, 64):
        try:
            seen.append(rank_kv(shape, tp=tp, kv_cache_dtype=dtype).kv_bytes_per_token)
        except InputError:
            continue
    assert seen == sorted(seen, reverse=True)


@given(rkv=ranks, a=st.integers(-(2**40), 2**42), b=st.integers(0, 2**42))
def test_blocks_are_monotone_and_fit(rkv: RankKV, a: int, b: int) -> None:
    assert rkv.blocks_for(a) >= 0
    assert rkv.blocks_for(a) <= rkv.blocks_for(a + b)
    assert rkv.blocks_for(a) * rkv.page_bytes <= max(a, 0)
    assert (rkv.blocks_for(a) + 1) * rkv.page_bytes > a


@given(rkv=ranks, mml=st.integers(1, 1 << 20), extra=st.integers(0, 1 << 16), mnbt=st.integers(1, 1 << 16))
def test_per_request_blocks_monotone_in_max_model_len(rkv: RankKV, mml: int, extra: int, mnbt: int) -> None:
    assert rkv.per_request_blocks(mml, mnbt) <= rkv.per_request_blocks(mml + extra, mnbt)


@given(rkv=ranks, kv=st.integers(0, 2**38), mnbt=st.sampled_from([512, 2048, 8192]))
def test_largest_max_model_len_fits_and_one_more_does_not(rkv: RankKV, kv: int, mnbt: int) -> None:
    upper = 1 << 20
    best = rkv.largest_max_model_len(kv, mnbt, upper=upper)
    if best == 0:
        assert not rkv.fits(kv, 1, mnbt)
        return
    assert rkv.fits(kv, best, mnbt)
    assert best == upper or not rkv.fits(kv, best + 1, mnbt)


@given(
    rkv=ranks,
    kv=st.integers(-(2**20), 2**40),
    mnbt=st.sampled_from([1, 512, 2048, 8192]),
    upper=st.integers(1, 1 << 22),
)
def test_largest_max_model_len_closed_form_equals_the_search(rkv: RankKV, kv: int, mnbt: int, upper: int) -> None:
    # Full-attention specs take the closed form; every spec must agree with vLLM's binary search.
    assert rkv.largest_max_model_len(kv, mnbt, upper=upper) == rkv.search_max_model_len(kv, mnbt, upper)


@given(kv=st.integers(0, 2**40), dcp=st.sampled_from([1, 2, 4]), bs=st.sampled_from([16, 64]))
def test_largest_max_model_len_closed_form_with_dcp(kv: int, dcp: int, bs: int) -> None:
    rkv = rank_kv(SHAPES["Llama-3.1-8B"], tp=8, dcp=dcp, block_size=bs)
    assert rkv.largest_max_model_len(kv, 2048, upper=1 << 21) == rkv.search_max_model_len(kv, 2048, 1 << 21)


def test_all_sliding_model_uses_the_window_rule() -> None:
    phi3 = rank_kv(SHAPES["Phi-3-mini-4k-instruct"])  # sliding_window 2047 on every layer
    assert (phi3.n_groups, phi3.group_size) == (1, 32)
    assert phi3.per_request_blocks(4096, 2048) == math.ceil(min(2047 - 1 + 2048, 4096) / 16) + 1


def test_hybrid_groups_are_global_and_projected_onto_pp_stages() -> None:
    # kv_cache_utils: layers[i::num_groups] so that every stage gets a share of every group.
    stages = rank_kv_stages(SHAPES["Qwen3-Next-80B-A3B"], tp=2, pp=2)
    for stage in stages:
        assert stage.n_groups == 4 and [g.num_layers for g in stage.groups] == [6, 6, 6, 6]
        assert stage.page_bytes == 6 * stage.page_bytes_per_layer and stage.block_size == 544
    assert rank_kv(SHAPES["Qwen3-Next-80B-A3B"], tp=2, pp=2).per_request_blocks(262144, 8192) == 482 + 3


def test_modelopt_checkpoint_kv_scheme_resolves_auto() -> None:
    base = {"num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2}
    quant = {"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
    shape = shape_from_config({**base, "quantization_config": quant})
    assert shape.checkpoint_kv_cache_dtype == "fp8"
    assert rank_kv(shape).kv_bytes_per_token == 2 * 2 * 2 * 64 * 1
    assert rank_kv(shape, kv_cache_dtype="bfloat16").kv_bytes_per_token == 2 * 2 * 2 * 64 * 2


@pytest.mark.parametrize("m", MODELS, ids=[m["name"] for m in MODELS])
def test_parameter_count_is_near_the_model_card(m: dict[str, Any]) -> None:
    # Model-card totals are round ("80B", "1T", "30B-A3B"): 5 % covers the rounding, not our formula.
    assert SHAPES[m["name"]].params_total / 1e9 == pytest.approx(m["params_total_b"], rel=0.05)


def test_disabling_the_hybrid_manager_sizes_windows_as_full_attention() -> None:
    scout = rank_kv(SHAPES["Llama-4-Scout-17B-16E"], hybrid_kv_cache_manager=False)
    assert (scout.n_groups, scout.group_size) == (1, 48)
    assert scout.per_request_blocks(131072, 8192) == 131072 // 16
    assert scout.kv_bytes_per_token == rank_kv(SHAPES["Llama-4-Scout-17B-16E"]).kv_bytes_per_token
    phi3 = rank_kv(SHAPES["Phi-3-mini-4k-instruct"], hybrid_kv_cache_manager=False)  # all sliding: one spec
    assert phi3.groups[0].kind == "sliding"
    with pytest.raises(InputError):
        rank_kv(SHAPES["Qwen3-Next-80B-A3B"], hybrid_kv_cache_manager=False)
