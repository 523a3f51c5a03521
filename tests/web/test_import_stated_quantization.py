"""An imported run whose log states its checkpoint's quantization is not offered fp8 weights.

A colleague's walk: importing public 32 (vLLM 0.19.0, RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic
TP4; its engine config line prints `quantization=compressed-tensors`) with the bf16 catalogue
model llama-3.1-70b listed the lever "quantization bfloat16 → fp8 weights +107,728 tokens": the
what-if re-estimated the MEASURED weights row (16.96 GiB/rank, already fp8) from the bf16
config as 8.74 GiB. The log's quantization now reaches the plan (model.quantization), the lever is
not offered, and the what-if never re-estimates that measured row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .support import TestClient

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
SAME = {"Sec-Fetch-Site": "same-origin"}


def _imported(client: TestClient, log: str, model: str) -> tuple[str, dict[str, Any]]:
    text = (LOGS / log).read_text()
    response = client.post("/import.json", data={"text": text, "model": model}, headers=SAME)
    assert response.status_code == 200, response.text
    plan = response.json()["plans"][0]
    assert plan["error"] is None, plan["error"]
    result: dict[str, Any] = client.get(plan["url"].replace("/plan?", "/plan.json?", 1)).json()
    return plan["url"], result


def test_a_log_stating_compressed_tensors_is_not_offered_fp8_weights(client: TestClient) -> None:
    log = "32-v0190-llama33-70b-fp8dyn-h100-tp4.log"
    assert "quantization=compressed-tensors" in (LOGS / log).read_text()
    url, result = _imported(client, log, "llama-3.1-70b")
    assert result["model"]["dtype"] == "bfloat16"  # the chosen catalogue model is the bf16 original
    assert "quantization" not in [lv["knob"] for lv in result["levers"]]
    assert "quantization" not in [lv["knob"] for lv in result["start_levers"]]
    assert result["levers"]  # the other levers are still offered
    # the what-if asked for by hand is refused, naming the log's method, not re-estimated
    asked = client.get(url.replace("/plan?", "/plan.json?", 1) + "&quant=fp8")
    assert asked.status_code == 422, asked.text
    assert "quantization=compressed-tensors" in asked.text


def test_a_bf16_run_is_still_offered_fp8_weights(client: TestClient) -> None:
    """The lever stays for a run that states no quantization (quantization=None): non-vacuous."""
    log = "29-v0190-llama31-8b-h100-tp1-mml16k.log"
    assert "quantization=None" in (LOGS / log).read_text()
    _, result = _imported(client, log, "llama-3.1-8b")
    (lever,) = [lv for lv in result["levers"] if lv["knob"] == "quantization"]
    assert lever["change"] == "bfloat16 → fp8 weights" and lever["tokens_gained"] > 0


def _quantization(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result["model"].items() if "quantization" in k}


def test_the_imported_record_says_the_quantization_its_log_states(client: TestClient) -> None:
    """public 34 (RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8) imported with the bf16 catalogue
    model: its JSON said `checkpoint_quantization: null` (the config's), against its own log."""
    log = "34-v0190-qwen25-7b-w8a8-h100-tp1.log"
    assert "quantization=compressed-tensors" in (LOGS / log).read_text()
    _, result = _imported(client, log, "qwen2.5-7b-instruct")
    assert _quantization(result) == {"quantization": "compressed-tensors",
                                     "checkpoint_quantization": "compressed-tensors",
                                     "checkpoint_quantization_source": "log"}


def test_a_kernel_line_states_the_method_when_no_engine_config_line_does(client: TestClient) -> None:
    """vLLM 0.6.5 prints no engine config line in this excerpt, only
    "Using MarlinLinearKernel for GPTQMarlinLinearMethod" (gptq_marlin.py, GPTQMarlinConfig.get_name)."""
    log = "41-v065-phi4-autoround-gptq-int4-80gb-class-tp1-util015.log"
    assert "with config:" not in (LOGS / log).read_text()
    _, result = _imported(client, log, "phi-4")
    assert _quantization(result) == {"quantization": "gptq_marlin", "checkpoint_quantization": "gptq_marlin",
                                     "checkpoint_quantization_source": "log"}


def test_online_fp8_is_the_runs_not_the_checkpoints(client: TestClient) -> None:
    """`--quantization fp8` on a bf16 checkpoint (public 30): loaded as fp8, the checkpoint stays bf16."""
    _, result = _imported(client, "30-v0190-llama31-8b-online-fp8-h100-tp1.log", "llama-3.1-8b")
    assert _quantization(result) == {"quantization": "fp8", "checkpoint_quantization": None,
                                     "checkpoint_quantization_source": None}


def test_a_config_that_says_otherwise_is_shown_beside_the_logs(client: TestClient) -> None:
    doc = {"model": {"catalogue": "qwen3-30b-a3b-fp8", "quantization": "compressed-tensors"},
           "gpu": {"name": "H100 80GB"}}
    result = client.post("/api/v1/plan", json=doc).json()
    assert _quantization(result) == {"quantization": "compressed-tensors",
                                     "checkpoint_quantization": "compressed-tensors",
                                     "checkpoint_quantization_source": "log", "config_quantization": "fp8"}
    plain = client.post("/api/v1/plan", json={**doc, "model": {"catalogue": "qwen3-30b-a3b-fp8"}}).json()
    assert _quantization(plain) == {"quantization": "fp8", "checkpoint_quantization": "fp8",
                                    "checkpoint_quantization_source": "config"}
