"""The leave-one-out evaluation of the estimated rows (bench/bench_estimates_loo.py) on every
real start-up log in the repository: accuracy, start-up failures, coverage, calibration."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_estimates_loo import calibration_without, evaluate, summary
from estimate_cases import CASES, SKIPS, real_logs

from app.core.calibration import DEFAULT

# The target is a leave-one-out median of 3 % on cards ≥ 24 GB (bench/RESULTS-estimates.md
# records the current figures). The threshold sits about one point above the recorded median, so a
# change that makes the model worse on runs it was not fitted to fails here, while one more real
# log (which moves a median of a dozen runs by about half a point) does not by itself.
LOO_MEDIAN_THRESHOLD = 0.03
# Start-up failures predicted (bench/RESULTS-estimates.md): 6 of 7; public/43 (Qwen2.5-72B GPTQ on
# v0.6.4.post1) is missed: 4.09 GiB of whole-device non-torch memory the model does not count.
FAILURES_PREDICTED = 6


def test_every_real_log_is_scored_or_has_a_reason() -> None:
    accounted = {c.log for c in CASES} | {s.log for s in SKIPS}
    assert set(real_logs()) <= accounted, sorted(set(real_logs()) - accounted)
    assert all(s.reason for s in SKIPS)


def test_loo_median_on_real_logs() -> None:
    for mode in ("measured", "estimated"):
        s = summary(evaluate(mode))
        assert int(s["cases"]) >= 5  # type: ignore[call-overload]
        assert s["loo_median"] is not None and float(s["loo_median"]) <= LOO_MEDIAN_THRESHOLD, (mode, s)  # type: ignore[arg-type]


def test_start_up_failures_predicted() -> None:
    rows = evaluate("measured")
    failures = [r for r in rows if r["fails"]]
    predicted = [r for r in failures if not r["predicted_start"]]
    assert len(failures) >= 7 and len(predicted) >= FAILURES_PREDICTED, [r["case"] for r in failures]
    # no run that started is predicted to fail
    assert all(r["predicted_start"] for r in rows if not r["fails"] and r["logged_kv"])


def test_default_calibration_is_the_in_sample_fit() -> None:
    assert calibration_without(None) == DEFAULT
