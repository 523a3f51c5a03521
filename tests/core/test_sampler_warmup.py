"""The V1 sampler warm-up after KV sizing (app.core.profile_run `sampler_warmup`, app.core.checks gate).

Evidence: tests/data/vllm-logs/38 and 53 (v0.19.0, gpt-oss-20b on H100, util 0.95, 1024 sequences) sized
and allocated the KV cache, captured the CUDA graphs, then ran out of memory "warming up sampler with
1024 dummy requests"; 25 (gemma-2-27b-it, the same sweep) started.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.model_config import shape_from_config
from app.core.profile_run import RETAINED_AFTER_PROFILE, ProfileInputs, Warmup, sampler_warmup, warmup_need
from app.ingest.catalogue import get_model
from app.services.plans import run_plan

GIB = 2**30
LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
GPT_OSS = shape_from_config(get_model("gpt-oss-20b").config)


def _gib(text: str, pattern: str) -> float:
    m = re.search(pattern, text)
    assert m, pattern
    return float(m.group(1))


def _logged(name: str) -> dict[str, float]:
    """The rows the warm-up depends on, as the log prints them (GiB)."""
    text = (LOGS / name).read_text(encoding="utf-8")
    return {
        "free": _gib(text, r"Initial free memory: ([0-9.]+) GiB"),
        "requested": _gib(text, r"Requested memory: [0-9.]+ \(util\), ([0-9.]+) GiB"),
        "activation": _gib(text, r"torch peak memory increase: ([0-9.]+)GiB"),
        "graphs": _gib(text, r"Graph capturing finished in \d+ secs, took ([0-9.]+) GiB"),
    }


def _warmup_from_log(name: str, shape: Any) -> Warmup:
    row = _logged(name)
    inp = ProfileInputs(1, 8192, 1024, (0, 19, 0))
    cushion = round((row["free"] - row["requested"]) * GIB)
    w = sampler_warmup(shape, inp, cushion, round(row["activation"] * GIB), round(row["graphs"] * GIB))
    assert w is not None
    return w


def test_need_is_the_sampler_over_the_warm_up_rows() -> None:
    # independent count: 1024 rows × gpt-oss's 201,088 logits × (bf16 logits 2 + fp32 4 + probs 4 + noise 4)
    # beside two 1024 × 2880 bf16 hidden-state tensors
    assert warmup_need(GPT_OSS, 1024, (0, 19, 0)) == 1024 * 201088 * 14 + 2 * 1024 * 2880 * 2
    # log 38's failed allocation is one fp32 logits tensor of those rows: 786.00 MiB
    text = (LOGS / "38-v0190-gpt-oss-20b-h100-tp1-sampler-oom-after-kv.log").read_text(encoding="utf-8")
    tried = _gib(text, r"Tried to allocate ([0-9.]+) MiB")
    assert tried == pytest.approx(1024 * 201088 * 4 / 2**20, abs=0.5)


def test_the_logged_rows_put_both_failures_at_risk_and_the_gemma_run_clear() -> None:
    assert _warmup_from_log("38-v0190-gpt-oss-20b-h100-tp1-sampler-oom-after-kv.log", GPT_OSS).state == "at_risk"
    assert _warmup_from_log("53-v0190-gpt-oss-20b-h100-tp2-sampler-oom-after-kv.log", GPT_OSS).state == "at_risk"
    gemma = shape_from_config(get_model("gemma-2-27b-it").config)
    assert _warmup_from_log("25-v0190-gemma-2-27b-it-h100-tp1.log", gemma).state == "fits"


def test_states_follow_the_measured_retained_range() -> None:
    lo, hi = RETAINED_AFTER_PROFILE
    assert Warmup(need=GIB, left=GIB + lo - 1, rows=1).state == "fails"
    assert Warmup(need=GIB, left=GIB + hi - 1, rows=1).state == "at_risk"
    assert Warmup(need=GIB, left=GIB + hi, rows=1).state == "fits"


def test_no_warm_up_where_vllm_runs_none() -> None:
    base = ProfileInputs(1, 8192, 1024, (0, 19, 0))
    for inp in (
        ProfileInputs(1, 8192, 1024, (0, 7, 3)),  # before PR #13776 (v0.8)
        ProfileInputs(1, 8192, 1024, (0, 19, 0), v1=False),
        ProfileInputs(1, 8192, 1024, (0, 19, 0), last_stage=False),
    ):
        assert sampler_warmup(GPT_OSS, inp, GIB, GIB, 0) is None
    assert sampler_warmup(GPT_OSS, base, GIB, GIB, 0) is not None


def _need(n: int, tokens: int) -> int:
    w = sampler_warmup(GPT_OSS, ProfileInputs(1, tokens, n, (0, 19, 0)), 0, 0, 0)
    assert w is not None
    return w.need


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 2048), st.integers(1, 2048), st.integers(256, 16384))
def test_more_sequences_never_need_less_on_one_sampler_path(seqs: int, extra: int, tokens: int) -> None:
    # From v0.17 (PR #33538) batches of 8+ rows take the in-place Triton top-k/top-p kernel and fewer
    # take the sort path (profile_run.sampler_bytes_per_logit): monotone on each side of 8 rows.
    more = seqs + extra
    if (seqs < 8) != (more < 8):
        more = 7 if seqs < 8 else more
    assert _need(more, tokens) >= _need(seqs, tokens)


def test_eight_rows_switch_to_the_triton_kernel_and_need_less_per_row() -> None:
    # vLLM's own discontinuity, not a defect of the estimate: 7 sort-path rows outweigh 8 Triton rows
    assert _need(7, 8192) > _need(8, 8192)


def test_the_plan_gate_names_the_warm_up() -> None:
    rows = {"total": "79.19 GiB", "free_at_start": "78.68 GiB", "weights": "13.64 GiB", "non_torch": "0.25 GiB",
            "cuda_graphs": "1.84 GiB", "activation": "2.87 GiB"}  # fmt: skip
    doc: dict[str, Any] = {"model": {"catalogue": "gpt-oss-20b"}, "vllm_version": "0.19.0",
           "engine": {"gpu_memory_utilization": 0.95, "max_model_len": 8192, "max_num_batched_tokens": 8192,
                      "max_num_seqs": 1024},
           "ranks": [rows]}  # fmt: skip
    result = run_plan(doc, with_levers=False, check=True)
    gate = next(c for c in result["checks"] if c["check"] == "sampler_warmup")
    assert gate["state"] == "at_risk" and "1,024 dummy requests" in gate["reason"] and "at risk" in gate["reason"]
    assert gate["ok"], "at risk warns; only a warm-up short with the least retention measured fails the gate"
    easy = run_plan({**doc, "engine": {**doc["engine"], "max_num_seqs": 64}}, with_levers=False, check=True)
    assert next(c for c in easy["checks"] if c["check"] == "sampler_warmup")["ok"]
    tight = {**doc, "engine": {**doc["engine"], "gpu_memory_utilization": 0.97}}
    short = run_plan(tight, with_levers=False, check=True)
    gate = next(c for c in short["checks"] if c["check"] == "sampler_warmup")
    assert gate["state"] == "fails" and not gate["ok"] and not short["checks_pass"]


# What separates the two warm-up failures from the runs that started (bench/estimate_warmup.py): the rule
# read from vLLM's code, fed with each log's own retained memory, and what the config alone cannot give.
def _warmup_rows() -> dict[str, dict[str, Any]]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from estimate_warmup import warmup_rows

    return {str(r["log"])[:2]: r for r in warmup_rows()}


def test_the_code_rule_with_each_logs_retained_memory_decides_every_v019_run() -> None:
    rows = _warmup_rows()
    assert len(rows) >= 18 and {k for k, r in rows.items() if r["failed"]} == {"38", "53"}
    for key, r in rows.items():
        assert (r["margin"] < r["retained"]) == r["failed"], key


def test_no_threshold_on_the_margin_separates_the_failures() -> None:
    rows = _warmup_rows()
    failed_margin = max(r["margin"] for r in rows.values() if r["failed"])  # log 38: 1.78 GiB
    started_below = {k for k, r in rows.items() if not r["failed"] and r["margin"] < failed_margin}
    assert started_below == {"31", "32", "36"}  # started with 0.86, 0.98 and 1.23 GiB


def test_the_retained_memory_is_not_a_function_of_the_config() -> None:
    rows = _warmup_rows()
    # 35 and 53: gpt-oss-20b TP2, the same engine but utilization (0.90 / 0.95), which acts only after the
    # "Free memory after profiling" measurement; 33 and 34: Qwen2.5-7B, the same shapes, weights and peak
    assert abs(rows["35"]["retained"] - rows["53"]["retained"]) > 0.2 * GIB
    assert rows["33"]["need"] == rows["34"]["need"]
    assert abs(rows["33"]["retained"] - rows["34"]["retained"]) > 0.7 * GIB
    # the measured range the gate uses is these logs' own
    retained = [r["retained"] for r in rows.values()]
    assert (min(retained), max(retained)) == pytest.approx(RETAINED_AFTER_PROFILE, abs=0.01 * GIB)
