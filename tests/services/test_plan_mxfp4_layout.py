"""The card picks the MXFP4 weight layout of an estimated plan: vLLM loads gpt-oss through Marlin
below compute capability 9.0 (quantization/mxfp4.py `get_mxfp4_backend`), which holds more bytes.
Checked against file 24 (v0.19.0, gpt-oss-20b on an A100 80GB: "Model loading took 13.72 GiB")."""

from __future__ import annotations

import pytest

from app.core.estimates import mxfp4_backend_for
from app.services.plan_inputs import plan_input

GIB = 1024**3


def _weights(gpu: str) -> float:
    doc = {"model": {"catalogue": "gpt-oss-20b"}, "gpu": {"name": gpu}, "layout": {"tp": 1},
           "engine": {"max_model_len": 131072, "gpu_memory_utilization": 0.65}, "vllm_version": "0.19.0"}  # fmt: skip
    rank = plan_input(doc).ranks[0]
    assert rank.weights is not None and rank.weights.source == "estimated"
    return rank.weights.bytes / GIB


def test_a100_takes_marlin_and_matches_the_log() -> None:
    assert _weights("A100 80GB") == pytest.approx(13.72, rel=0.01)
    assert _weights("H100 80GB") < _weights("A100 80GB")  # Triton layout on Hopper


def test_backend_rule() -> None:
    assert mxfp4_backend_for((8, 0)) == mxfp4_backend_for((8, 9)) == "marlin"
    assert mxfp4_backend_for((9, 0)) == mxfp4_backend_for((10, 0)) == mxfp4_backend_for(None) == "triton"
