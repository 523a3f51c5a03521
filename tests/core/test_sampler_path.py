"""The V1 sampler's top-k/top-p path sizes the profile run's sampler peak (app.core.profile_run).

PyTorch's native path sorts the whole vocabulary (38 B per logit at 128+ rows); FlashInfer's
(`flashinfer_sample` → `top_k_top_p_sampling_from_logits`, "top_k_first": a masked fp32 copy and its
softmax) holds the model-dtype logits (2), their fp32 copy (4), the masked logits (4) and the probs
(4). The log says which path the sampler took; six committed v0.10.1.1 A100 logs
(tests/data/vllm-logs/public/58-63) showed the estimate ~1 GiB high wherever FlashInfer sampled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.exports import env_of
from app.core.model_config import shape_from_config
from app.core.profile_run import (
    FLASHINFER_SAMPLER_BYTES,
    ProfileInputs,
    activation_terms,
    sampler_bytes_per_logit,
    sort_bytes_per_element,
)
from app.ingest.catalogue import get_model
from app.ingest.vllm_log import parse_vllm_log
from app.ingest.vllm_log_model import log_parse_to_json
from app.services import imports, plans

PUBLIC = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "public"
FLASHINFER_LOG = PUBLIC / "58-v01011-qwen2-7b-a100-80gb-tp1-util025-wrapped.log"
NATIVE_LOG = PUBLIC / "62-v01011-qwen2-7b-2xa100-40gb-ray-2-nodes-tp2-util05-wrapped.log"


def test_flashinfer_peak_is_the_four_tensors_it_holds() -> None:
    model_dtype, fp32_logits, masked, probs = 2, 4, 4, 4
    assert FLASHINFER_SAMPLER_BYTES == model_dtype + fp32_logits + masked + probs == 14
    for version in ((0, 8, 0), (0, 10, 1), (0, 16, 0), (0, 19, 0)):
        assert sampler_bytes_per_logit(version, True, 256, flashinfer=True) == 14
    # the native sort: logits (2), fp32 (4), sorted values (4), int64 indices (8) and the sort's temporaries
    assert sampler_bytes_per_logit((0, 10, 1), True, 256) == 2 + 4 + 4 + 8 + sort_bytes_per_element(256)


def test_v0_and_old_versions_ignore_the_flag() -> None:
    # V0's sampler is not TopKTopPSampler: the flag changes nothing there
    v0 = sampler_bytes_per_logit((0, 6, 3), False, 256)
    assert sampler_bytes_per_logit((0, 6, 3), False, 256, flashinfer=True) == v0
    assert sampler_bytes_per_logit((0, 6, 1), True, 256, flashinfer=True) == 40


def test_activation_drops_by_the_sort_on_qwen2_7b() -> None:
    shape = shape_from_config(get_model("qwen2.5-7b-instruct").config_dict())
    native = activation_terms(shape, ProfileInputs(1, 2048, 256, (0, 10, 1)))
    fast = activation_terms(shape, ProfileInputs(1, 2048, 256, (0, 10, 1), flashinfer_sampler=True))
    vocab = -(-152_064 // 64) * 64  # Qwen2's vocabulary, padded to 64 (pad_vocab_size)
    assert native.sampler - fast.sampler == 256 * vocab * (sampler_bytes_per_logit((0, 10, 1), True, 256) - 14)
    assert fast.sampler == 256 * vocab * 14
    assert fast.peak < native.peak


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("INFO 09-03 00:36:44 [topk_topp_sampler.py:50] Using FlashInfer for top-p & top-k sampling.", True),
        ("WARNING 09-03 04:38:28 [topk_topp_sampler.py:61] FlashInfer is not available. Falling back to the "
         "PyTorch-native implementation of top-p & top-k sampling. For the best performance, please install "
         "FlashInfer.", False),
        ("WARNING 09-03 04:38:28 [topk_topp_sampler.py:55] FlashInfer is available, but it is not enabled. Falling "
         "back to the PyTorch-native implementation of top-p & top-k sampling. For the best performance, please set "
         "VLLM_USE_FLASHINFER_SAMPLER=1.", False),
        ("WARNING 05-01 10:00:00 [topk_topp_sampler.py:44] FlashInfer version >= 0.2.3 required. Falling back to "
         "default sampling implementation.", False),
        ("INFO 05-01 10:00:00 [topk_topp_sampler.py:62] FlashInfer top-p/top-k sampling not supported on compute "
         "capability 7.0; falling back to PyTorch-native sampler. Set VLLM_USE_FLASHINFER_SAMPLER=0 to silence.",
         False),
        ("INFO 05-01 10:00:00 [topk_topp_sampler.py:71] FlashInfer top-p/top-k sampling disabled via "
         "VLLM_USE_FLASHINFER_SAMPLER=0; using PyTorch-native sampler.", False),
    ],
)
def test_the_log_line_states_the_path(line: str, value: bool) -> None:
    text = line + "\nINFO 09-03 00:37:00 [gpu_worker.py:276] Available KV cache memory: 5.01 GiB\n"
    runs = json.loads(json.dumps(log_parse_to_json(parse_vllm_log(text))))["runs"]
    assert runs[0]["settings"]["flashinfer_sampler"] is value


def _imported(path: Path) -> dict[str, Any]:
    config = get_model("qwen2.5-7b-instruct").config_dict()
    _, docs = imports.read_log(path.read_text(encoding="utf-8"), config)
    doc, error = docs[0]
    assert doc is not None, error
    return doc


def test_real_logs_carry_the_path_into_the_plan() -> None:
    fast = _imported(FLASHINFER_LOG)
    assert fast["engine"]["flashinfer_sampler"] is True
    assert plans.run_plan(fast, with_levers=False)["engine"]["flashinfer_sampler"] is True
    # public/62 (FlashInfer not installed): one Ray start-up, one run (tests/ingest/test_vllm_log_ray_runs.py)
    parsed = log_parse_to_json(parse_vllm_log(NATIVE_LOG.read_text(encoding="utf-8")))
    native = json.loads(json.dumps(parsed))["runs"][0]
    assert native["settings"]["flashinfer_sampler"] is False


def _plan(flag: bool | None) -> dict[str, Any]:
    engine: dict[str, Any] = {"gpu_memory_utilization": 0.25, "max_model_len": 16384, "max_num_batched_tokens": 2048}
    if flag is not None:
        engine["flashinfer_sampler"] = flag
    doc = {"model": {"catalogue": "qwen2.5-7b-instruct"}, "gpu": {"name": "A100 80GB"}, "vllm_version": "0.10.1",
           "engine": engine}
    return plans.run_plan(doc, with_levers=False)


def test_an_estimated_plan_gains_the_sort_as_kv() -> None:
    native, unstated, fast = _plan(False), _plan(None), _plan(True)
    assert unstated["ranks"][0]["kv_bytes"] == native["ranks"][0]["kv_bytes"]  # not stated: the sort
    seqs = native["engine"]["max_num_seqs"]
    rows = min(seqs, 2048)
    sort = rows * (-(-152_064 // 64) * 64) * (sampler_bytes_per_logit((0, 10, 1), True, rows) - 14)
    assert fast["ranks"][0]["kv_bytes"] - native["ranks"][0]["kv_bytes"] == sort


def test_the_deploy_files_set_the_sampler_the_plan_was_sized_with() -> None:
    assert env_of(_plan(True))["VLLM_USE_FLASHINFER_SAMPLER"] == "1"
    assert env_of(_plan(False))["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    assert "VLLM_USE_FLASHINFER_SAMPLER" not in env_of(_plan(None))
