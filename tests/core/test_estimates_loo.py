"""The leave-one-out evaluation of the estimated rows (bench/bench_estimates_loo.py) on every
real start-up log in the repository: accuracy, start-up failures, coverage, calibration."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_estimates_loo import PLAUSIBLE_UTIL, calibration_without, evaluate, summary, unstated_rows
from estimate_cases import CASES, SKIPS, real_logs

from app.core.calibration import DEFAULT

GIB = 1024**3

# The target is a leave-one-out median of 3 % on cards ≥ 24 GB (bench/RESULTS-estimates.md
# records the current figures). The threshold sits about one point above the recorded median, so a
# change that makes the model worse on runs it was not fitted to fails here, while one more real
# log (which moves a median of a dozen runs by about half a point) does not by itself.
LOO_MEDIAN_THRESHOLD = 0.03
# The worst-case target (≤ 15 %) over the runs that state their inputs, with the weights they log and with
# estimated weights (RESULTS-estimates.md: 13.5 %, public/28, both ways; file 18 was 18.4 % estimated).
LOO_WORST_THRESHOLD = 0.15
# Start-up failures predicted not to start, over every case (8 of 11; bench/RESULTS-estimates.md: 6 of 9 with inputs
# stated, 7 counting the sampler warm-up's "at risk" on log 53). Missed: public/43 (Qwen2.5-72B GPTQ on v0.6.4.post1,
# 4.09 GiB of whole-device non-torch memory on an A40-48Q vGPU) and logs 38/53 (the warm-up after KV sizing).
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


def test_the_missed_failures_verdicts_from_their_logs() -> None:
    """Logs 38 and 53 (gpt-oss-20b, v0.19, H100: the sampler warm-up after KV sizing ran out of memory) and
    public/43 (max_model_len does not fit), as the estimate reads them from their real log text."""
    rows = {str(r["case"]): r for r in evaluate("measured")}
    r38 = rows["38-v0190-gpt-oss-20b-h100-tp1-sampler-oom-after-kv.log#0"]
    # flagged, not predicted: with FA3's split accumulators in the captured pool (stop 29) the graph row is 2.12
    # GiB LOO against 1.84 captured (1.61 before), which takes 0.51 GiB off the margin, but the margin (1.36 GiB)
    # is still inside the allocator's measured retention: "at risk", which passes the gate as for 8 started runs
    assert (r38["fails"], r38["predicted_start"], r38["warmup"]) == ("sampler_warmup", True, "at_risk")
    graphs, logged = int(r38["rows"]["cuda_graphs"]), int(r38["measured_rows"]["cuda_graphs"])  # type: ignore[index]
    assert logged < graphs < 1.2 * logged
    r53 = rows["53-v0190-gpt-oss-20b-h100-tp2-sampler-oom-after-kv.log#0"]
    # predicted, but by the estimate's own errors: with the logged rows the margin is 0.57 GiB (at risk); the
    # graph row is 0.31 GiB over the capture (LOO +20.0 %) and the activation 0.14 under, leaving less than
    # the least retention measured
    assert (r53["fails"], r53["predicted_start"], r53["warmup"]) == ("sampler_warmup", False, "fails")
    assert int(r53["rows"]["cuda_graphs"]) > int(r53["measured_rows"]["cuda_graphs"])  # type: ignore[index]
    p43 = rows["public/43-v064post1-qwen25-72b-gptq-48gb-tp1-mml-fail.log#0"]
    assert p43["fails"] and p43["predicted_start"]
    # what is missed is the non-torch row the vGPU logs (4.09 GiB), not the weights (within 0.1 %)
    measured, estimated = p43["measured_rows"], p43["rows"]
    assert int(measured["non_torch"]) > 3 * GIB > int(estimated["non_torch"])  # type: ignore[index]
    s = summary(evaluate("measured"))
    assert (s["failures_predicted_to_fail"], s["failures_predicted"], s["failures"]) == (7, 8, 9)
    assert s["failures_at_risk_only"] == "38-v0190-gpt-oss-20b-h100-tp1-sampler-oom-after-kv.log#0"


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
