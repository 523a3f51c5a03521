"""A plan that forces an AWQ/GPTQ checkpoint's plain kernels (`engine.quantization: awq | gptq`): its estimated
activation row holds the dequantized weight (app.core.dequant_linear); a method other than the checkpoint's is
refused as vLLM refuses it; an imported log whose engine config line resolves `quantization=awq` carries it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.errors import InputError
from app.ingest.catalogue import get_model
from app.services.imports import import_log, plan_from_log_run
from app.services.plan_inputs import plan_input

GIB = 1024**3
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
LOG_65 = (Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "public"
          / "65-v0190-llama31-70b-awq-2xa100-40gb-tp2-forced-awq.log")


def _doc(quantization: str | None) -> dict[str, Any]:
    config = {**get_model("llama-3.1-70b").config_dict(), "quantization_config": AWQ}
    engine: dict[str, Any] = {"max_model_len": 8192, "gpu_memory_utilization": 0.9, "max_num_batched_tokens": 2048}
    if quantization:
        engine["quantization"] = quantization
    return {"model": {"config": config}, "gpu": {"name": "A100 40GB"}, "layout": {"tp": 2}, "engine": engine,
            "vllm_version": "0.19.0"}  # fmt: skip


def test_forced_awq_adds_the_dequantized_gate_up_to_the_activation_row() -> None:
    plain = plan_input(_doc(None)).ranks[0].activation
    forced = plan_input(_doc("awq")).ranks[0].activation
    assert plain is not None and forced is not None and forced.source == "estimated"
    assert forced.bytes > plain.bytes
    assert abs(forced.bytes / GIB - 0.66) < 0.01  # 0.23 forward + 0.44 (8192 × 28672 × 2 B) against 0.46
    assert "--quantization awq" in forced.note


def test_a_method_other_than_the_checkpoints_is_refused() -> None:
    with pytest.raises(InputError) as err:
        plan_input(_doc("gptq"))
    assert err.value.field == "engine.quantization" and "awq" in err.value.message


def test_an_imported_forced_awq_log_carries_the_method() -> None:
    """public/65's engine config line resolves `quantization=awq` (with --quantization awq forced; awq_marlin
    otherwise): the plan built from the log keeps it, so its estimated rows take the plain kernel's term."""
    text = LOG_65.read_text()
    assert "quantization=awq," in text
    config = get_model("llama-3.1-70b").config_dict()
    doc = plan_from_log_run(import_log(text, config), 0, config)
    assert doc["engine"]["quantization"] == "awq"
    assert plan_input(doc).engine.quantization == "awq"


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}


def test_forced_gptq_holds_the_dequantized_weight_only_before_auto_gptq() -> None:
    """vLLM PR #38288 (fa2a33b89, 2026-05-14) deleted the plain GPTQ kernel: from 0.23 `--quantization gptq`
    resolves to auto_gptq (Marlin), so the forced plan's activation row is the checkpoint default's."""
    def activation(version: str, quantization: str | None) -> int:
        doc = _doc(quantization)
        doc["model"]["config"] = {**doc["model"]["config"], "quantization_config": GPTQ}
        doc["vllm_version"] = version
        cell = plan_input(doc).ranks[0].activation
        assert cell is not None
        return cell.bytes

    assert activation("0.19.0", "gptq") > activation("0.19.0", None)
    assert activation("0.27.1", "gptq") == activation("0.27.1", None)
