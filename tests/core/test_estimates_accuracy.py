"""Estimated rows against real vLLM runs (bench/bench_estimates.py): median error under 5 %."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_estimates import errors


def test_estimated_kv_close_to_logged_runs() -> None:
    rows = errors()
    assert len(rows) >= 6
    abs_errors = [abs(err) for *_, err in rows]
    assert statistics.median(abs_errors) < 0.05
    text_only = [abs(err) for case, _, _, err in rows if "vl" not in case.model.lower()]
    assert max(text_only) < 0.10
