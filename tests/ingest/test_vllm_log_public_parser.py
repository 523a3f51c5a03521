"""Importer defects found on the public vLLM logs (tests/data/vllm-logs/public/), as golden tests
on the real files; the expected numbers are the ones index.json states for each file.

- caret-notation ANSI colour codes around the process prefix (`^[[0;36m(EngineCore_DP0 …)^[[0;0m`,
  as pasted into an issue) are stripped like real escapes, so the rank is identified: file 42.
- the parallel layout from the worker prefixes, as lower bounds (or exact where vLLM's naming
  rule fixes it), and the engine-config line's size when stated: files 33, 13, 09, 35.
- num_gpu_blocks_override: blocks are the override and a finding says so, warning when the
  token line counts the profiled blocks instead: file 26.
"""

from __future__ import annotations

from typing import Any

from .ingest_helpers import LOGS, parsed, rank, read, runs

GIB = 2**30
PUBLIC = LOGS / "public"


def _doc(prefix: str) -> dict[str, Any]:
    (path,) = PUBLIC.glob(f"{prefix}-*.log")
    return parsed(read(path))


def test_caret_notation_ansi_prefix_names_the_engine_core_rank() -> None:
    doc = _doc("42")
    (run,) = runs(doc)
    assert [r["rank"] for r in run["ranks"]] == ["EngineCore_DP0"]
    r = rank(run, "EngineCore_DP0")
    assert r["pid"] == 70073
    assert abs(r["weights_bytes"] - 64.38 * GIB) <= 0.005 * GIB  # 'Model loading took 64.38 GiB'
    assert r["weights_load_seconds"] == 14.380607


def test_caret_and_real_escape_codes_parse_alike() -> None:
    text = read(next(PUBLIC.glob("42-*.log")))
    assert parsed(text.replace("^[", "\x1b"))["runs"] == parsed(text)["runs"]


def _layout(run: dict[str, Any]) -> dict[str, tuple[object, object]]:
    return {k: (v["value"], v["at_least"]) for k, v in run["layout"].items()}


def test_dp_ep_worker_prefixes_give_tp_exactly_and_dp_ep_lower_bounds() -> None:
    # public/33 (index: TP 4, DP ≥ 2 with DP1 seen, EP = DP × TP): Worker_DP1_TP2_EP6 → TP = (6 − 2) / 1
    (run,) = runs(_doc("33"))
    assert _layout(run) == {"tp": (4, 4), "pp": (None, None), "dp": (None, 2), "ep": (None, 8)}
    assert run["layout"]["tp"]["basis"].startswith("derived")
    # public/13 (index: TP 2, DP 4, EP 8; only DP1_TP1_EP3 printed): TP exact, DP and EP bounded below
    (run,) = runs(_doc("13"))
    assert _layout(run) == {"tp": (2, 2), "pp": (None, None), "dp": (None, 2), "ep": (None, 4)}


def test_worker_tp_prefix_is_a_lower_bound_of_two() -> None:
    # public/09 (index: TP 2): only Worker_TP0 printed; v0.10.2+ names carry _TP only when tp_size > 1
    (run,) = runs(_doc("09"))
    assert _layout(run)["tp"] == (None, 2)


def test_engine_config_tensor_parallel_size_is_the_size() -> None:
    (run,) = runs(_doc("35"))  # v0.4.2 engine-config line: tensor_parallel_size=1
    assert _layout(run)["tp"] == (1, 1)
    assert run["layout"]["tp"]["basis"].startswith("stated")


def test_stated_size_wins_over_prefix_bounds() -> None:
    text = read(next(PUBLIC.glob("33-*.log")))
    config = (
        "INFO 05-11 08:26:00 [core.py:1] Initializing a V1 LLM engine (v0.21.0) with config: "
        "model='m', tensor_parallel_size=8, pipeline_parallel_size=1, data_parallel_size=2\n"
    )
    (run,) = runs(parsed(config + text))
    assert _layout(run)["tp"] == (8, 8)
    assert _layout(run)["dp"] == (2, 2)
    assert _layout(run)["ep"] == (16, 16)


def test_num_gpu_blocks_override_is_the_block_count_and_a_finding_says_so() -> None:
    # public/26 (index: override 100, profiled 333,325, 5,333,200 tokens = 333,325 × 16, 40.69x @ 131,072)
    (run,) = runs(_doc("26"))
    engine = run["engine"]
    assert engine["num_gpu_blocks"] == 100
    assert engine["num_gpu_blocks_profiled"] == 333325
    assert engine["kv_tokens"] == 5333200
    assert engine["max_concurrency"] == 40.69
    (f,) = [f for f in run["findings"] if f["code"] == "num_gpu_blocks_override"]
    assert f["severity"] == "warning"
    assert f["block_size"] == 5333200 // 333325 == 16
    assert f["kv_tokens_of_override"] == 100 * 16


def test_override_with_consistent_tokens_is_an_info_finding() -> None:
    text = (
        "INFO 06-11 10:47:44 [kv_cache_utils.py:660] Overriding num_gpu_blocks=333325 with "
        "num_gpu_blocks_override=100\n"
        "INFO 06-11 10:47:44 [kv_cache_utils.py:715] GPU KV cache size: 1,600 tokens\n"
    )
    (run,) = runs(parsed(text))
    (f,) = [f for f in run["findings"] if f["code"] == "num_gpu_blocks_override"]
    assert f["severity"] == "info" and run["engine"]["num_gpu_blocks"] == 100


def test_graph_profiling_minimal_cache_override_is_not_the_engines() -> None:
    # public/65's worker lines with the two override lines its stored copy drops (kuuroooo/MindSafe, v0.19.0):
    # vllm/v1/worker/gpu_model_runner.py _init_minimal_kv_cache_for_profiling @4dd49b06f logs them with 0
    # profiled blocks before the CUDA-graph estimate; the engine's own cache is the tokens line's
    w0, w1 = "(Worker_TP0 pid=139223) INFO 04-30 11:21:15", "(Worker_TP1 pid=139224) INFO 04-30 11:21:15"
    text = (
        f"{w0} [kv_cache_utils.py:829] Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512\n"
        f"{w1} [kv_cache_utils.py:829] Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512\n"
        f"{w0} [gpu_model_runner.py:5876] Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 "
        "(largest=256)\n"
        "(Worker_TP0 pid=139223) INFO 04-30 11:21:18 [gpu_worker.py:436] Available KV cache memory: 15.96 GiB\n"
        "(EngineCore pid=139159) INFO 04-30 11:21:18 [kv_cache_utils.py:1319] GPU KV cache size: 104,608 tokens\n"
    )
    (run,) = runs(parsed(text))
    assert run["engine"]["num_gpu_blocks"] is None
    assert run["engine"]["kv_tokens"] == 104608
    assert not [f for f in run["findings"] if f["code"] == "num_gpu_blocks_override"]


def test_negative_graph_capture_figure_is_not_a_pool_size() -> None:
    # public/74 and 75 (Zzsf11/VideoCuttingAgent, v0.12.0, TP2): 'took -0.22 GiB' / '-0.26 GiB' is the free-memory
    # delta around the capture (GPUModelRunner.capture_model @9ae3c55b1), not a pool: no negative graph row, a finding
    for prefix, printed in (("74", "-0.22"), ("75", "-0.26")):
        (run,) = runs(_doc(prefix))
        (tp0,) = run["ranks"]
        assert tp0["rank"] == "TP0" and tp0.get("cuda_graph_bytes") is None
        assert tp0["graph_capture_seconds"] in (3.0, 5.0)
        (f,) = [f for f in run["findings"] if f["code"] == "graph_capture_free_memory_rose"]
        assert f["severity"] == "info" and f["rank"] == "TP0"
        assert f["free_memory_delta_bytes"] == round(float(printed) * GIB)
        assert f"took {printed} GiB" in f["message"]


def test_positive_graph_capture_figure_stays_the_pool() -> None:
    # public/76, the same server's later start-up: 'took 0.15 GiB' is read as the rank's pool
    (run,) = runs(_doc("76"))
    (tp0,) = run["ranks"]
    assert tp0["cuda_graph_bytes"] == round(0.15 * GIB)
    assert not [f for f in run["findings"] if f["code"] == "graph_capture_free_memory_rose"]
