"""In Chromium: nvidia-smi's four H100s with 12,545 MiB in use on GPU0, planned from the home page. At
vLLM's 0.92 GPU0 will not start; what would make it start offered fp8 KV and fp8 weights (neither lowers
the request) and "a larger card: H100 NVL 94GB", whose link opened the same failing plan. Now it offers
the utilization every GPU's free memory holds, and following it the plan starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e
SMI = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi" / "table-r550-4gpu.txt"


def test_the_free_memory_lever_makes_the_plan_start(page: Any) -> None:
    page.goto("/")
    page.fill("#home-smi", SMI.read_text())
    page.select_option("#home-smi-model", "llama-3.1-70b")
    with page.expect_navigation():
        page.click("button:has-text('Plan on these GPUs')")
    page.wait_for_selector("[data-kpi=starts]")
    assert page.inner_text("[data-kpi=starts] .value").strip() == "no"
    knobs = page.eval_on_selector_all("tr[data-knob][data-starts]", "rs => rs.map(r => r.dataset.knob)")
    assert "gpu" not in knobs and "gpu_memory_utilization" in knobs
    with page.expect_navigation():
        page.click("tr[data-knob=gpu_memory_utilization] a")
    page.wait_for_url("**util=0.84**")
    page.wait_for_selector("[data-kpi=starts]")
    assert page.inner_text("[data-kpi=starts] .value").strip() == "yes"
