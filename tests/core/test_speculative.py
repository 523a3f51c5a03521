"""Speculative decoding (issue 15 item 2): draft weights, the draft's KV in the pool, lookahead, refusals."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.errors import InputError
from app.core.model_config import shape_from_config
from app.core.speculative import SpecSpec, draft_weight_bytes
from app.core.weights_tensor import VLLM_ONLY, Geometry, checkpoint_bytes, tensor_bytes
from app.ingest.catalogue import get_model
from app.services.plans import run_plan

GPU = {"name": "H100 80GB"}


def plan(model: str, spec: dict[str, Any], **engine: Any) -> dict[str, Any]:
    return run_plan({"model": {"catalogue": model}, "gpu": GPU,
                     "engine": {"max_model_len": 32768, **engine, "speculative": spec}}, with_levers=False)  # fmt: skip


def test_mtp_layer_is_the_checkpoints_extra_layer() -> None:
    # Independent path: the whole checkpoint as weights_tensor counts it (MTP layers included, embed and
    # head copies, norms) minus the same checkpoint without its MTP layer, less what vLLM shares (the
    # embedding copy) and the three norms; at TP1.
    s = shape_from_config(get_model("deepseek-v3").config)
    m = s.weights
    assert m is not None and m.mtp_layers == 1 and m.mtp_embed_copies == 2
    extra = checkpoint_bytes(m) - checkpoint_bytes(replace(m, mtp_layers=0))
    embed = m.tensors.first[0]
    shared = (embed.rows * embed.cols + 3 * s.hidden_size) * embed.dtype_bytes
    # vLLM also builds the MLA layer's absorbed copy (W_UK_T), which a checkpoint does not store.
    last = m.tensors.layers[m.tensors.layer_index[-1]]
    copies = sum(
        tensor_bytes(t, Geometry()) for t in last if t.name.startswith("self_attn.W_UK_T") or t.group in VLLM_ONLY
    )
    got, note = draft_weight_bytes(s, SpecSpec("mtp", 1), 1)
    assert got == extra - shared + copies
    assert "MTP" in note


def test_mtp_draft_kv_joins_the_mla_pool_and_moves_blocks() -> None:
    off = run_plan({"model": {"catalogue": "deepseek-v3"}, "layout": {"tp": 8}, "gpu": {"name": "H200"},
                    "engine": {"max_model_len": 32768}}, with_levers=False)  # fmt: skip
    on = run_plan({"model": {"catalogue": "deepseek-v3"}, "layout": {"tp": 8}, "gpu": {"name": "H200"},
                   "engine": {"max_model_len": 32768, "speculative": {"method": "mtp", "num_speculative_tokens": 3}}},
                  with_levers=False)  # fmt: skip
    latent = (512 + 64) * 2  # one MLA latent per token per layer, bf16 (kv_lora_rank + qk_rope_head_dim)
    assert off["kv_bytes_per_token"] == 61 * latent
    assert on["draft_kv_bytes_per_token"] == latent and on["kv_bytes_per_token"] == 62 * latent
    rank = on["ranks"][0]
    assert rank["speculative_row_bytes"] == rank["speculative_bytes"] > 0
    assert off["ranks"][0]["kv_bytes"] - rank["kv_bytes"] == rank["speculative_bytes"]
    assert on["blocks"] == rank["kv_bytes"] // (62 * latent * 16)
    assert on["engine"]["speculative"]["lookahead_tokens_per_request"] == 3


def test_draft_model_has_its_own_geometry_in_one_block() -> None:
    out = plan("llama-3.1-8b", {"method": "draft_model", "model": {"catalogue": "llama-3.2-1b"},
                                "num_speculative_tokens": 4})  # fmt: skip
    target = 32 * 2 * 8 * 128 * 2  # Llama-3.1-8B: 32 layers × K,V × 8 heads × 128 × bf16
    draft = 16 * 2 * 8 * 64 * 2  # Llama-3.2-1B: 16 layers × K,V × 8 heads × 64 × bf16
    assert out["draft_kv_bytes_per_token"] == draft and out["kv_bytes_per_token"] == target + draft
    assert out["blocks"] == out["ranks"][0]["kv_bytes"] // ((target + draft) * 16)
    flag = out["flags"][-1]
    name, value = shlex.split(flag)
    assert name == "--speculative-config"
    assert json.loads(value) == {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct",
                                 "num_speculative_tokens": 4}  # fmt: skip


def test_lookahead_slots_divide_the_concurrency_ceiling() -> None:
    base = {"method": "draft_model", "model": {"catalogue": "llama-3.2-1b"}, "num_speculative_tokens": 5}
    out = run_plan({"model": {"catalogue": "llama-3.1-8b"}, "gpu": GPU, "policy": {"avg_live_tokens": 3000},
                    "engine": {"max_model_len": 32768, "max_num_seqs": 8192, "speculative": base}},
                   with_levers=False)  # fmt: skip
    assert out["concurrency_ceiling"] == out["schedulable_tokens"] // (3000 + 5)
    assert "lookahead" in out["explain"]["concurrency_ceiling"]["formula"]
    ngram = run_plan({"model": {"catalogue": "llama-3.1-8b"}, "gpu": GPU, "policy": {"avg_live_tokens": 3000},
                      "engine": {"max_model_len": 32768, "max_num_seqs": 8192,
                                 "speculative": {"method": "ngram", "num_speculative_tokens": 5}}},
                     with_levers=False)  # fmt: skip
    # ngram: no weights, no draft KV, no lookahead (Scheduler sets num_lookahead_tokens for EAGLE/MTP/draft only)
    assert ngram["ranks"][0]["speculative_bytes"] == 0 and ngram["draft_kv_bytes_per_token"] == 0
    assert ngram["concurrency_ceiling"] == ngram["schedulable_tokens"] // 3000


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 30))
def test_more_speculative_tokens_never_raise_concurrency(k: int) -> None:
    def ceiling(n: int) -> int:
        out = run_plan({"model": {"catalogue": "deepseek-v3"}, "layout": {"tp": 8}, "gpu": {"name": "H200"},
                        "policy": {"avg_live_tokens": 2000}, "engine": {"max_model_len": 16384, "max_num_seqs": 8192,
                        "speculative": {"method": "mtp", "num_speculative_tokens": n}}}, with_levers=False)  # fmt: skip
        value = out["concurrency_ceiling"]
        assert isinstance(value, int)
        return value

    assert ceiling(k + 1) <= ceiling(k)


@pytest.mark.parametrize(
    ("spec", "field", "needle"),
    [
        ({"method": "mtp", "num_speculative_tokens": 1}, "engine.speculative.method", "MTP layers"),
        ({"method": "medusa", "num_speculative_tokens": 1}, "engine.speculative.method", "eagle"),
        ({"method": "eagle", "num_speculative_tokens": 3}, "engine.speculative.model", "without speculative model"),
        ({"method": "ngram", "num_speculative_tokens": 0}, "engine.speculative.num_speculative_tokens", "1"),
        ({"method": "ngram", "num_speculative_tokens": 65}, "engine.speculative.num_speculative_tokens", "64"),
        ({"method": "ngram"}, "engine.speculative.num_speculative_tokens", "required"),
        ({"method": "draft_model", "model": {"catalogue": "qwen3-8b"}, "num_speculative_tokens": 2},
         "engine.speculative.model", "same vocabulary size"),
    ],
)  # fmt: skip
def test_refused_with_vllms_reason(spec: dict[str, Any], field: str, needle: str) -> None:
    with pytest.raises(InputError) as exc:
        plan("llama-3.1-8b", spec)
    assert exc.value.field == field and needle in exc.value.message


def test_mtp_defaults_to_the_checkpoints_layers_and_measured_weights_hold_the_draft() -> None:
    doc = {"model": {"catalogue": "deepseek-v3"}, "layout": {"tp": 8}, "gpu": {"name": "H200"},
           "engine": {"max_model_len": 16384, "speculative": {"method": "mtp"}}}  # fmt: skip
    out = run_plan(doc, with_levers=False)
    assert out["engine"]["speculative"]["num_speculative_tokens"] == 1  # n_predict
    measured = run_plan({"model": {"catalogue": "llama-3.1-8b"}, "engine": {"max_model_len": 8192,
                         "speculative": {"method": "draft_model", "model": {"catalogue": "llama-3.2-1b"},
                                         "num_speculative_tokens": 3}},
                         "ranks": [{"total": "80 GiB", "weights": "17.5 GiB", "non_torch": "1 GiB",
                                    "activation": "2 GiB", "cuda_graphs": "1 GiB"}]}, with_levers=False)  # fmt: skip
    rank = measured["ranks"][0]
    assert rank["speculative_row_bytes"] == 0 and rank["sources"]["speculative_row_bytes"] == "derived"
    assert rank["speculative_bytes"] > 2 * 2**30


def test_eagle_heads_share_the_targets_embedding_and_add_their_fc() -> None:
    # A one-layer Llama head (the EAGLE-LLaMA3 shape; synthetic config built from Llama-3.1-8B's).
    config = {**get_model("llama-3.1-8b").config, "num_hidden_layers": 1}
    head = shape_from_config(config)
    target = shape_from_config(get_model("llama-3.1-8b").config)
    h, vocab = 4096, 128256
    full, _ = draft_weight_bytes(target, SpecSpec("draft_model", 3, head), 1)
    eagle, _ = draft_weight_bytes(target, SpecSpec("eagle", 3, head), 1)
    eagle3, _ = draft_weight_bytes(target, SpecSpec("eagle3", 3, head), 1)
    embed = vocab * h * 2
    assert full - eagle == 2 * embed - 2 * h * h * 2  # EAGLE-1: embedding and LM head shared, fc 2h → h added
    assert eagle3 - eagle == embed + h * h * 2  # EAGLE-3 keeps its LM head; its fc is 3h → h
    out = run_plan({"model": {"catalogue": "llama-3.1-8b"}, "gpu": GPU, "engine": {"max_model_len": 8192,
                    "speculative": {"method": "eagle", "model": {"config": config, "name": "org/eagle-head"},
                                    "num_speculative_tokens": 2}}}, with_levers=False)  # fmt: skip
    assert out["draft_kv_bytes_per_token"] == 1 * 2 * 8 * 128 * 2
    assert out["ranks"][0]["speculative_bytes"] == eagle
    assert json.loads(shlex.split(out["flags"][-1])[1])["model"] == "org/eagle-head"
