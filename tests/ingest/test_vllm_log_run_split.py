"""Two engine starts in one file are two runs: golden tests on the real public logs 20, 21 and 36
(tests/data/vllm-logs/public/; the numbers are the ones index.json states per run), and the
rules' edges on synthetic lines of the same formats.

- public/20: a PR's before/after output, the later start pasted first: the header time of the
  same (unprefixed) process steps back from 02-20 00:01:02 to 02-19 23:56:55.
- public/21: run 1 prints its concurrency for 100,000 tokens; run 2's max-seq-len error is for
  221,000 (vLLM checks the KV memory of every worker before it prints the concurrency line,
  kv_cache_utils.py `get_kv_cache_configs` @72c99f2a, so the error cannot be the same start's).
- public/36: the same start-up error under `EngineCore_DP0` from pid 972, then pid 738 (two CI
  jobs); the third, unprefixed quote of pid 738's error is the same message and is dropped.
"""

from __future__ import annotations

from typing import Any

from .ingest_helpers import LOGS, codes, parsed, read, runs

GIB = 2**30
PUBLIC = LOGS / "public"


def _doc(prefix: str) -> dict[str, Any]:
    (path,) = PUBLIC.glob(f"{prefix}-*.log")
    return parsed(read(path))


def _engine(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run["engine"].items() if v is not None and k not in ("tolerance", "evidence")}


def test_public_20_before_and_after_starts_are_two_runs() -> None:
    first, second = runs(_doc("20"))
    assert first["lines"] == [1, 2] and second["lines"] == [4, 5]
    assert _engine(first) == {"num_gpu_blocks": 127626, "max_concurrency": 997.08, "max_concurrency_tokens": 2048}
    assert _engine(second) == {"kv_tokens": 2042016, "max_concurrency": 997.08, "max_concurrency_tokens": 2048}
    assert first["settings"]["max_model_len"] == second["settings"]["max_model_len"] == 2048


def test_public_21_start_then_failed_start_with_a_longer_max_model_len() -> None:
    first, second = runs(_doc("21"))
    assert first["lines"] == [1, 3] and second["lines"] == [5, 5]
    assert first["settings"]["max_model_len"] == 100000
    assert _engine(first)["kv_tokens"] == 230528
    (driver,) = first["ranks"]
    assert abs(driver["kv_bytes"] - 10.55 * GIB) <= 0.005 * GIB
    assert codes(first) == []
    assert second["settings"]["max_model_len"] == 221000
    assert codes(second) == ["max_seq_len_exceeds_kv"]
    numbers = second["findings"][0]
    assert numbers["estimated_max_model_len"] == 122080
    assert abs(numbers["available_kv_bytes"] - 5.59 * GIB) <= 0.005 * GIB


def test_public_36_two_ci_jobs_are_two_failed_runs() -> None:
    first, second = runs(_doc("36"))
    assert codes(first) == codes(second) == ["free_memory_below_utilization"]
    assert [r["pid"] for r in first["ranks"]] == [972]
    assert [r["pid"] for r in second["ranks"]] == [738]
    free = [abs(run["ranks"][0]["free_at_start_bytes"] / GIB - x) for run, x in ((first, 1.53), (second, 1.54))]
    assert max(free) <= 0.005


def _line(stamp: str, msg: str, prefix: str = "") -> str:
    return f"{prefix}INFO {stamp} [kv_cache_utils.py:1] {msg}\n"


def test_time_moving_forward_and_new_year_keep_one_run() -> None:
    text = (_line("12-31 23:59:58", "GPU KV cache size: 1,000 tokens")
            + _line("01-01 00:00:01", "Maximum concurrency for 100 tokens per request: 10.00x"))
    assert len(runs(parsed(text))) == 1


def test_time_of_another_process_may_lag_without_splitting() -> None:
    text = (_line("01-01 10:00:05", "Available KV cache memory: 10.00 GiB", "(VllmWorker rank=0 pid=1) ")
            + _line("01-01 10:00:01", "Available KV cache memory: 10.00 GiB", "(VllmWorker rank=1 pid=2) "))
    (run,) = runs(parsed(text))
    assert len(run["ranks"]) == 2


def test_same_length_error_after_concurrency_stays_in_the_run() -> None:
    text = ("Maximum concurrency for 4,096 tokens per request: 1.50x\n"
            "ValueError: To serve at least one request with the models's max seq len (4096), (2.00 GiB KV cache "
            "is needed, which is larger than the available KV cache memory (1.00 GiB).\n")
    (run,) = runs(parsed(text))
    assert codes(run) == ["max_seq_len_exceeds_kv"]


# ---------------------------------------------------------------- issue 17 item 8: CUDA-graph lines


def test_public_32_opt_in_advice_is_read_per_rank() -> None:
    # "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1). This will become the default in v0.19." wording
    (run,) = runs(_doc("32"))
    by_rank = {r["rank"]: r for r in run["ranks"]}
    assert (by_rank["TP0"]["util_equivalent_without_cg"], by_rank["TP0"]["util_suggested"]) == (0.8015, 0.9985)
    assert (by_rank["TP1"]["util_equivalent_without_cg"], by_rank["TP1"]["util_suggested"]) == (0.8033, 0.9967)
    assert run["semantics"]["cuda_graphs_inside_budget"] is True


def test_public_31_estimate_printed_but_not_subtracted() -> None:
    # "In v0.19, CUDA graph memory profiling will be enabled by default … To try it now … increase
    # --gpu-memory-utilization from 0.7000 to 0.7021": the estimate is not in this run's budget
    (run,) = runs(_doc("31"))
    assert run["semantics"]["cuda_graphs_inside_budget"] is False
    assert run["ranks"][0]["util_suggested"] == 0.7021
