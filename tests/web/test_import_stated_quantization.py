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
