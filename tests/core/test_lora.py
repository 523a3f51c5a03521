"""LoRA slots (issue 15 item 1) against vLLM's create_lora_weights shapes, its limits, and a real log."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main
from app.core.errors import InputError
from app.core.lora import LoraSpec, allowed_ranks, check_lora, lora_terms
from app.core.model_config import shape_from_config
from app.ingest.catalogue import get_model
from app.services.plans import run_plan

PUBLIC = Path(__file__).parents[1] / "data" / "vllm-logs" / "public"
V = (0, 27, 1)


def shape(slug: str):  # type: ignore[no-untyped-def]
    return shape_from_config(get_model(slug).config)


def vllm_tensors(cfg: dict[str, int], loras: int, r: int, tp: int) -> list[tuple[int, ...]]:
    """The stacked tensors vLLM allocates for a dense Llama-style model, written out shape by shape
    as in vllm/lora/layers (@28be48fa9): MergedQKVParallelLinearWithLoRA (3 slices),
    RowParallelLinearWithLoRA (o_proj, down_proj), MergedColumnParallelLinearWithLoRA (gate_up),
    VocabParallelEmbeddingWithLoRA and LogitsProcessorWithLoRA (whole vocabulary)."""
    h, heads, kv, d = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    inter, vocab, layers = cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    out: list[tuple[int, ...]] = []
    for _ in range(layers):
        q_out, kv_out = heads * d // tp, max(1, kv // tp) * d
        out += [(loras, 1, r, h)] * 3 + [(loras, 1, q_out, r), (loras, 1, kv_out, r), (loras, 1, kv_out, r)]
        out += [(loras, 1, r, heads * d // tp), (loras, 1, h, r)]  # o_proj: input sharded, output whole
        out += [(loras, 1, r, h)] * 2 + [(loras, 1, inter // tp, r)] * 2  # gate_up: two slices
        out += [(loras, 1, r, inter // tp), (loras, 1, h, r)]  # down_proj
    out += [(loras, vocab, r), (loras, 1, h, r)]  # embedding
    out += [(loras, 1, r, h), (loras, 1, vocab, r)]  # LM head
    return out


@pytest.mark.parametrize(("tp", "loras", "r"), [(1, 4, 64), (2, 4, 64), (4, 1, 16), (8, 8, 8)])
def test_slots_match_vllm_tensor_shapes(tp: int, loras: int, r: int) -> None:
    raw = get_model("llama-3.1-8b").config
    keys = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size",
            "num_hidden_layers")  # fmt: skip
    cfg = {k: int(str(raw[k])) for k in keys}
    cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    elems = sum(math.prod(t) for t in vllm_tensors(cfg, loras, r, tp))
    terms = lora_terms(shape("llama-3.1-8b"), LoraSpec(loras, r), tp, 1, 0, V, 8192)
    punica = 5 * 8192 * 8
    assert terms.slot_bytes == elems * 2 + punica
    assert terms.profile_bytes == 3 * 8192 * r * 4  # the qkv shrink buffer, fp32
    assert terms.not_counted == ()


def test_extra_vocabulary_until_012() -> None:
    # Log public/17 (v0.11.0 dev, granite-4-micro with --enable-lora) warns "`lora_extra_vocab_size` is
    # deprecated and will be removed in v0.12.0": 0.11 still allocates the 256 extra rows.
    text = (PUBLIC / "17-v0110dev-granite-4-micro-lora-tp1.log").read_text()
    assert "`lora_extra_vocab_size` is deprecated and will be removed in v0.12.0" in text
    s, spec = shape("llama-3.1-8b"), LoraSpec(1, 16)
    old, new = lora_terms(s, spec, 1, 1, 0, (0, 11, 0), 2048), lora_terms(s, spec, 1, 1, 0, (0, 12, 0), 2048)
    vocab, h = s.vocab_size or 0, s.hidden_size
    padded = -(-vocab // 256) * 256
    # embedding: 256 more A rows + a [1, 256, hidden] tensor; LM head: B padded to 256 rows + the same tensor
    extra = (256 * 16 + 256 * h) + ((padded - vocab) * 16 + 256 * h)
    assert old.slot_bytes - new.slot_bytes == extra * 2


def test_pipeline_stages_split_layers_and_vocab() -> None:
    s, spec = shape("llama-3.1-8b"), LoraSpec(2, 32)
    whole = lora_terms(s, spec, 1, 1, 0, V, 2048)
    first, last = lora_terms(s, spec, 1, 2, 0, V, 2048), lora_terms(s, spec, 1, 2, 1, V, 2048)
    punica = 5 * 2048 * 8
    assert first.slot_bytes + last.slot_bytes - 2 * punica == whole.slot_bytes - punica
    assert dict(first.modules).get("lm_head") is None and dict(last.modules).get("embed_tokens") is None


def test_target_modules_restrict_and_packed_names_match() -> None:
    s = shape("llama-3.1-8b")
    only_q = lora_terms(s, LoraSpec(1, 8, target_modules=("q_proj",)), 1, 1, 0, V, 2048)
    assert [n for n, b in only_q.modules if b and n != "punica indices"] == ["qkv_proj"]
    with pytest.raises(InputError) as exc:
        lora_terms(s, LoraSpec(1, 8, target_modules=("nonexistent",)), 1, 1, 0, V, 2048)
    assert exc.value.field == "engine.lora.target_modules"


@pytest.mark.parametrize(
    ("version", "rank", "ok"),
    [((0, 5, 3), 128, False), ((0, 5, 5), 256, True), ((0, 7, 3), 512, False), ((0, 8, 0), 512, True),
     ((0, 11, 0), 1, False), ((0, 11, 1), 1, True), (V, 48, False), (V, 320, True)],
)  # fmt: skip
def test_allowed_ranks_by_version(version: tuple[int, int, int], rank: int, ok: bool) -> None:
    assert (rank in allowed_ranks(version)) is ok
    if not ok:
        with pytest.raises(InputError) as exc:
            check_lora(LoraSpec(1, rank), version, "x")
        assert exc.value.field == "engine.lora.max_lora_rank"


def test_cpu_slots_below_gpu_slots_refused_with_vllms_reason() -> None:
    with pytest.raises(InputError) as exc:
        check_lora(LoraSpec(4, 16, max_cpu_loras=2), V, "0.27.1")
    assert exc.value.field == "engine.lora.max_cpu_loras"
    assert exc.value.message == "max_cpu_loras (2) must be >= max_loras (4)."


_SLUGS = ("llama-3.1-8b", "qwen3-8b", "qwen3-30b-a3b", "mistral-7b-v0.3", "gemma-2-9b-it", "phi-4")


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(_SLUGS), st.integers(1, 16), st.sampled_from(allowed_ranks(V)), st.sampled_from((1, 2, 4)))
def test_more_slots_never_lower_the_bytes(slug: str, loras: int, r: int, tp: int) -> None:
    s = shape(slug)
    a = lora_terms(s, LoraSpec(loras, r), tp, 1, 0, V, 2048)
    b = lora_terms(s, LoraSpec(loras + 1, r), tp, 1, 0, V, 2048)
    assert b.slot_bytes > a.slot_bytes


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(_SLUGS), st.integers(1, 8), st.sampled_from(allowed_ranks(V)), st.sampled_from((1, 2, 4)))
def test_more_tp_never_raises_per_rank_bytes(slug: str, loras: int, r: int, tp: int) -> None:
    s = shape(slug)
    if s.num_attention_heads % (2 * tp):
        return
    a = lora_terms(s, LoraSpec(loras, r), tp, 1, 0, V, 2048)
    b = lora_terms(s, LoraSpec(loras, r), 2 * tp, 1, 0, V, 2048)
    assert b.slot_bytes <= a.slot_bytes


PLAN = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}}


def test_plan_row_is_inside_the_budget_and_flags_deploy_it() -> None:
    off = run_plan(PLAN, with_levers=False)
    on = run_plan({**PLAN, "engine": {"lora": {"max_loras": 4, "max_lora_rank": 64, "max_cpu_loras": 8}}},
                  with_levers=False)  # fmt: skip
    rank = on["ranks"][0]
    assert rank["lora_row_bytes"] == rank["lora_bytes"] + rank["lora_profile_bytes"]
    assert off["ranks"][0]["kv_bytes"] - rank["kv_bytes"] == rank["lora_row_bytes"]
    assert off["ranks"][0]["lora_bytes"] is None
    assert on["flags"][-4:] == ["--enable-lora", "--max-loras 4", "--max-lora-rank 64", "--max-cpu-loras 8"]
    assert on["engine"]["lora"] == {"max_loras": 4, "max_lora_rank": 64, "max_cpu_loras": 8, "target_modules": None}
    assert "lora" in on["explain"]["kv_bytes"]["formula"]


def test_measured_rows_hold_the_runs_lora_and_a_whatif_moves_the_room() -> None:
    # A measured run (rows of a log) that had LoRA on: its KV room already nets the slots.
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "engine": {"max_model_len": 8192, "lora": {"max_loras": 2}},
           "ranks": [{"total": "80 GiB", "kv_room": "50 GiB"}]}  # fmt: skip
    same = run_plan(doc, with_levers=False)["ranks"][0]
    assert same["kv_bytes"] == 50 * 2**30 and same["lora_row_bytes"] == 0
    more = run_plan({**doc, "whatif": {"max_loras": 6}}, with_levers=False)["ranks"][0]
    s = shape("llama-3.1-8b")
    t2, t6 = lora_terms(s, LoraSpec(2, 16), 1, 1, 0, V, 8192), lora_terms(s, LoraSpec(6, 16), 1, 1, 0, V, 8192)
    assert 50 * 2**30 - more["kv_bytes"] == more["lora_row_bytes"] == t6.total - t2.total


def test_bad_lora_input_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**PLAN, "engine": {"lora": {"max_lora_rank": 48}}}))
    assert main(["plan", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert "engine.lora.max_lora_rank" in err and "Traceback" not in err
    path.write_text(json.dumps({"model": {"kv_bytes_per_token": 1024}, "gpu": {"total": "80 GiB"},
                                "engine": {"max_model_len": 4096, "lora": {}}}))  # fmt: skip
    assert main(["plan", str(path), "--json"]) == 2
    assert "engine.lora" in capsys.readouterr().err
