"""VLLM_USE_FLASHINFER_SAMPLER on by default from v0.21 (vLLM b92ef9ec5, PR #40376, 2026-04-29).

On CUDA the sampler then takes FlashInfer's top-k/top-p path when
`FlashInferBackend.supports_compute_capability(cc)` (7.5 ≤ cc ≤ 12.1, vllm/v1/attention/backends/flashinfer.py
@28be48fa9) and falls back to the native path otherwise; =0 keeps native. At 8+ rows both paths hold 14 B a
logit from v0.17 (the Triton kernel), so the default shows below 8 rows: the profile run's sampler term and the
warm-up gate. An unknown card keeps the native path, the larger peak there.
"""

from __future__ import annotations

from typing import Any

from app.core.estimates import activation_for_stage
from app.core.model_config import shape_from_config
from app.core.plan import Engine, Layout, estimate_context
from app.core.profile_run import ProfileInputs, flashinfer_sampler_in_use, sampler_warmup, warmup_need
from app.ingest.catalogue import get_model
from app.services.plans import run_plan

QWEN = shape_from_config(get_model("qwen2.5-7b-instruct").config_dict())
VOCAB = 152_064  # Qwen2.5's vocabulary, already a multiple of 64 (pad_vocab_size leaves it)
ROWS = 4
# independent counts per logit at 4 rows: FlashInfer holds bf16 logits 2 + fp32 4 + masked 4 + probs 4;
# the native path (below 8 rows, no Triton kernel) sorts: bf16 2 + fp32 4 + sorted values 4 + int64 indices 8,
# beside the 2-127-row sort's two int2 index-and-segment buffers (8 + 8) and radix alternates (4 + 8)
FLASHINFER_4 = ROWS * VOCAB * (2 + 4 + 4 + 4)
NATIVE_4 = ROWS * VOCAB * (2 + 4 + 4 + 8 + 8 + 8 + 4 + 8)


def _ctx_sampler(version: str, gpu: str | None, stated: bool | None) -> int:
    engine = Engine(0.9, "auto", 16, max_model_len=8192, max_num_batched_tokens=2048, max_num_seqs=ROWS,
                    flashinfer_sampler=stated)  # fmt: skip
    ctx = estimate_context(Layout(tp=1), engine, version, gpu_name=gpu)
    return activation_for_stage(QWEN, ctx, True).sampler


def test_hand_count_at_four_rows() -> None:
    assert FLASHINFER_4 == 8_515_584 and NATIVE_4 == 27_979_776


def test_h100_takes_flashinfer_by_default_from_v021_and_native_before() -> None:
    assert _ctx_sampler("0.21.0", "H100 80GB", None) == FLASHINFER_4
    assert _ctx_sampler("0.27.1", "H100 80GB", None) == FLASHINFER_4
    assert _ctx_sampler("0.20.1", "H100 80GB", None) == NATIVE_4


def test_out_of_range_or_unknown_cards_and_an_explicit_zero_keep_native() -> None:
    assert flashinfer_sampler_in_use(None, (0, 21, 0), (7, 0)) == (
        False, "VLLM_USE_FLASHINFER_SAMPLER not set: on by default from v0.21 (PR #40376) on compute capability "
        "7.5–12.1; the card is 7.0, so vLLM falls back to native")  # fmt: skip
    assert flashinfer_sampler_in_use(None, (0, 21, 0), (7, 5))[0] is True  # T4: the range's low end
    assert flashinfer_sampler_in_use(None, (0, 21, 0), (12, 1))[0] is True  # GB10: its high end
    assert flashinfer_sampler_in_use(None, (0, 21, 0), (12, 2))[0] is False
    assert _ctx_sampler("0.21.0", "Tesla V100-SXM2-32GB", None) == NATIVE_4  # capability not in the table
    assert _ctx_sampler("0.21.0", None, None) == NATIVE_4
    assert _ctx_sampler("0.21.0", "H100 80GB", False) == NATIVE_4  # VLLM_USE_FLASHINFER_SAMPLER=0
    assert _ctx_sampler("0.20.1", "H100 80GB", True) == FLASHINFER_4


def test_the_warm_up_is_sized_on_the_same_path() -> None:
    hidden = 2 * ROWS * QWEN.hidden_size * 2  # the dummy hidden states and their rand_like copy, bf16
    assert warmup_need(QWEN, ROWS, (0, 21, 0), True) == FLASHINFER_4 + hidden
    assert warmup_need(QWEN, ROWS, (0, 21, 0)) == NATIVE_4 + hidden
    w = sampler_warmup(QWEN, ProfileInputs(1, 2048, ROWS, (0, 21, 0), flashinfer_sampler=True), 0, 0, 0)
    assert w is not None and w.need == FLASHINFER_4 + hidden


def _gate_need(version: str, gpu: str | None, stated: bool | None = None) -> str:
    engine: dict[str, Any] = {"gpu_memory_utilization": 0.9, "max_model_len": 8192, "max_num_batched_tokens": 2048,
                              "max_num_seqs": ROWS}  # fmt: skip
    if stated is not None:
        engine["flashinfer_sampler"] = stated
    rows = {"total": "79.19 GiB", "free_at_start": "78.68 GiB", "weights": "14.19 GiB", "non_torch": "0.25 GiB",
            "cuda_graphs": "0.50 GiB", "activation": "1.40 GiB"}  # fmt: skip
    doc: dict[str, Any] = {"model": {"catalogue": "qwen2.5-7b-instruct"}, "vllm_version": version, "engine": engine,
                           "ranks": [rows]}  # fmt: skip
    if gpu is not None:
        doc["gpu"] = {"name": gpu}
    result = run_plan(doc, with_levers=False, check=True)
    gate = next(c for c in result["checks"] if c["check"] == "sampler_warmup")
    return str(gate["reason"])


def test_the_warm_up_gate_follows_the_card_and_version() -> None:
    from app.core.units import fmt_bytes

    hidden = 2 * ROWS * QWEN.hidden_size * 2
    fast, native = f"needs {fmt_bytes(FLASHINFER_4 + hidden)};", f"needs {fmt_bytes(NATIVE_4 + hidden)};"
    assert fast != native
    assert fast in _gate_need("0.21.0", "H100 80GB")
    assert native in _gate_need("0.20.1", "H100 80GB")
    assert native in _gate_need("0.21.0", None)
    assert native in _gate_need("0.21.0", "H100 80GB", False)


def _notes(version: str, gpu: str | None) -> list[str]:
    doc: dict[str, Any] = {"model": {"catalogue": "qwen2.5-7b-instruct"}, "vllm_version": version,
                           "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192, "max_num_seqs": ROWS}}
    doc["gpu"] = {"name": gpu} if gpu is not None else {"total": "79.19 GiB"}  # no name: capability unknown
    return [n for n in run_plan(doc, with_levers=False)["notes"] if "VLLM_USE_FLASHINFER_SAMPLER" in n]


def test_the_plan_notes_say_which_path_was_assumed_and_why() -> None:
    (h100,) = _notes("0.21.0", "H100 80GB")
    assert "on by default from v0.21 (PR #40376)" in h100 and "the card is 9.0" in h100
    assert "FlashInfer's top-k/top-p path, 14 B per logit" in h100
    (unknown,) = _notes("0.21.0", None)
    assert "capability is not known" in unknown and "PyTorch's native top-k/top-p path" in unknown
    assert _notes("0.20.1", "H100 80GB") == []  # before the change, not set means native, as before
