"""nvidia-smi output → per-GPU measured total and free memory, the spread alert, and a plan."""

from __future__ import annotations

import json
from pathlib import Path

from app.services.imports import import_nvidia_smi
from app.services.plans import run_plan
from app.web.plan.workflows import nvidia_smi_document

SMI = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi" / "table-r550-4gpu.txt"


def test_free_spread_alert_and_measured_ranks() -> None:
    text = SMI.read_text(encoding="utf-8")
    parsed = import_nvidia_smi(text)
    json.dumps(parsed)
    assert [f["code"] for f in parsed["findings"] if f["code"] != "gpu_preset_total"] == ["free_memory_spread"]
    assert sum(f["code"] == "gpu_preset_total" for f in parsed["findings"]) == len(parsed["gpus"])
    doc = nvidia_smi_document(text, "llama-3.1-70b")
    result = run_plan(doc)
    assert len(result["ranks"]) == 4 and result["layout"]["tp"] == 4
    assert result["ranks"][0]["sources"]["free_at_start_bytes"] == "measured"
    assert result["ranks"][0]["sources"]["weights_bytes"] == "estimated"
    codes = {w["code"] for w in result["warnings"]}
    assert {"free_memory_spread", "estimated_rows"} <= codes
