"""The leave-one-out evaluation of the estimated rows (bench/bench_estimates_loo.py) on every
real start-up log in the repository: accuracy, start-up failures, coverage, calibration."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_estimates_loo import PLAUSIBLE_UTIL, calibration_without, evaluate, summary, unstated_rows
from estimate_cases import CASES, SKIPS, real_logs

from app.core.calibration import DEFAULT

# The target is a leave-one-out median of 3 % on cards ≥ 24 GB (bench/RESULTS-estimates.md
# records the current figures). The threshold sits about one point above the recorded median, so a
# change that makes the model worse on runs it was not fitted to fails here, while one more real
# log (which moves a median of a dozen runs by about half a point) does not by itself.
LOO_MEDIAN_THRESHOLD = 0.03
# The worst-case target (≤ 15 %) over the runs that state their inputs, with the weights they log and with
# estimated weights (RESULTS-estimates.md: 13.5 %, public/28, both ways; file 18 was 18.4 % estimated).
LOO_WORST_THRESHOLD = 0.15
# Start-up failures predicted to fail before KV sizing ends (bench/RESULTS-estimates.md counts the sampler warm-up's
# "at risk" too); public/43 (Qwen2.5-72B GPTQ on v0.6.4.post1) is missed: 4.09 GiB of whole-device non-torch memory
# the model does not count.
FAILURES_PREDICTED = 7


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
    assert len(failures) >= 8 and len(predicted) >= FAILURES_PREDICTED, [r["case"] for r in failures]
    # no run that started is predicted to fail
    assert all(r["predicted_start"] for r in rows if not r["fails"] and r["logged_kv"])


def test_default_calibration_is_the_in_sample_fit() -> None:
    assert calibration_without(None) == DEFAULT


def test_loo_worst_on_runs_that_state_their_inputs() -> None:
    for mode in ("measured", "estimated"):
        s = summary(evaluate(mode))
        assert s["loo_worst"] is not None and float(s["loo_worst"]) <= LOO_WORST_THRESHOLD, (mode, s)  # type: ignore[arg-type]


def test_cases_with_inputs_not_stated_are_scored_apart() -> None:
    known = {"gpu_memory_utilization", "max_model_len", "gpu", "tp", "pp", "vllm_version", "model"}
    unstated = [c for c in CASES if c.unstated]
    assert unstated and all(set(c.unstated) <= known for c in unstated)
    rows = evaluate("measured")
    stated, every = summary(rows), summary(rows, with_unstated=True)
    apart = [r for r in rows if r["unstated"] and "loo_err" in r and r["gpu"]]
    assert int(every["cases"]) == int(stated["cases"]) + len(apart)  # type: ignore[call-overload]
    table = unstated_rows("measured")
    assert [r["case"] for r in table] == [c.key for c in unstated]
    for r in table:
        utilization = "gpu_memory_utilization" in str(r["unstated"])
        assert set(r["starts_over"]) == (set(PLAUSIBLE_UTIL) if utilization else {r["assumed"]})  # type: ignore[call-overload]
        if "err_over" in r:  # more utilization never gives less KV
            errs = [r["err_over"][u] for u in PLAUSIBLE_UTIL]  # type: ignore[index]
            assert errs == sorted(errs)
