"""Formats the ten real logs do not cover: one fixture per format, exact values asserted."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .ingest_helpers import EXTRA, codes, parsed, rank, read, runs


def gib(x: float) -> int:
    return round(x * 2**30)


def load(name: str) -> dict[str, Any]:
    return parsed(read(EXTRA / name))


def one_run(name: str) -> dict[str, Any]:
    out = runs(load(name))
    assert len(out) == 1
    return out[0]


def test_v0_three_line_block_driver_and_worker() -> None:
    run = one_run("v073-v0-three-line-tp2.log")
    assert run["vllm_version"] == "0.7.3"
    assert run["version"]["stated_source"] == "engine config line"
    s = run["settings"]
    assert (s["model"], s["max_model_len"], s["tensor_parallel_size"], s["dtype"]) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        8192,
        2,
        "bfloat16",
    )
    assert s["enforce_eager"] is False and s["enable_prefix_caching"] is False and s["kv_cache_dtype"] == "auto"
    assert s["gpu_memory_utilization"] == 0.9
    driver, worker = rank(run, "driver"), rank(run, "pid=4242")
    assert worker["pid"] == 4242
    assert driver["weights_bytes"] == gib(7.5122) and driver["tolerance"]["weights_bytes"] == 53687
    assert (driver["total_bytes"], driver["requested_bytes"]) == (gib(23.68), gib(21.31))
    assert (driver["non_torch_bytes"], driver["activation_bytes"], driver["kv_bytes"]) == (
        gib(0.31),
        gib(1.22),
        gib(12.27),
    )
    assert (worker["non_torch_bytes"], worker["activation_bytes"], worker["kv_bytes"]) == (
        gib(0.25),
        gib(0.47),
        gib(13.08),
    )
    assert worker["evidence"]["kv_bytes"] == {"line": 8, "printed": "13.08 GiB"}
    assert driver["cuda_graph_bytes"] == gib(0.31) and worker["profile_seconds"] == 4.87
    e = run["engine"]
    assert (e["num_gpu_blocks"], e["max_concurrency"], e["max_concurrency_tokens"]) == (12564, 24.54, 8192)
    assert e["num_cpu_blocks"] == 4096 and e["init_seconds"] == 28.55
    assert run["semantics"]["cuda_graphs_inside_budget"] is False
    # '# cuda blocks' and an unbracketed 'worker.py:267]' header date the log to 0.7.3 … <0.8.0
    assert (run["version"]["inferred_min"], run["version"]["inferred_max_exclusive"]) == ("0.7.3", "0.8.0")


def test_v0_one_line_duration_variant() -> None:
    run = one_run("v065-duration-variant.log")
    d = rank(run, "driver")
    assert (d["total_bytes"], d["kv_bytes"], d["non_torch_bytes"]) == (gib(79.15), gib(53.37), gib(0.52))
    assert d["profile_seconds"] == 4.52 and d["peak_torch_bytes"] == gib(17.35)
    assert run["engine"]["num_gpu_blocks"] == 27325 and run["settings"]["max_model_len"] == 32768
    assert (run["version"]["inferred_min"], run["version"]["inferred_max_exclusive"]) == ("0.6.4", "0.6.6")


def test_ansi_nested_cut_pp_dp_and_ray_serve_prefixes() -> None:
    # the fixture gathers prefixes of two eras: '(VllmWorker rank=N …)' (v0.7–v0.10.0) on lines 1-4,
    # '(Worker_… pid=N)' (v0.10.2+) from line 5 on; no engine start prints both, so two runs
    old_style, new_style = runs(load("ansi-nested-cut-prefixes.log"))
    assert sorted(r["rank"] for r in old_style["ranks"]) == ["DP1_rank=1", "rank=0", "rank=1", "rank=4"]
    run = {"ranks": old_style["ranks"] + new_style["ranks"]}
    assert rank(run, "rank=0")["kv_bytes"] == gib(20.51)
    assert rank(run, "rank=1")["pid"] == 5432
    assert rank(run, "rank=4")["kv_bytes"] == gib(19.90)  # prefix cut at the front
    nested = rank(run, "DP1_rank=1")  # (EngineCore_1 …) (VllmWorker rank=1 …)
    assert (nested["pid"], nested["kv_bytes"], nested["parallel"]) == (5442, gib(18.25), {"DP": 1, "rank": 1})
    assert rank(run, "PP1_TP0")["weights_bytes"] == gib(30.125)
    assert rank(run, "DP1_TP1")["parallel"] == {"DP": 1, "TP": 1}
    serve = rank(run, "Worker")
    assert (serve["pid"], serve["kv_bytes"], serve["tolerance"]["kv_bytes"]) == (65043, gib(60), gib(0.05))


def test_ray_prefixes_ip_and_repeated() -> None:
    run = one_run("ray-repeated-untagged.log")
    w = rank(run, "pid=2211 ip=10.0.0.2")
    assert (w["pid"], w["ip"], w["weights_bytes"]) == (2211, "10.0.0.2", gib(12.3456))
    untagged = rank(run, "pid=3301 ip=10.0.0.3")
    assert (untagged["kv_bytes"], untagged["activation_bytes"]) == (gib(55.20), gib(2.10))
    assert rank(run, "driver")["weights_bytes"] == gib(12.3456)
    assert run["engine"]["num_gpu_blocks"] == 45219
    ray = [f for f in run["findings"] if f["code"] == "ray_deduplicated_lines"]
    assert ray and ray[0]["repeated"] == 6


def test_docker_compose_kubectl_prefixes_and_num_gpu_blocks_is() -> None:
    run = one_run("docker-compose-kubectl.log")
    assert rank(run, "TP0")["kv_bytes"] == gib(30.12) and rank(run, "TP1")["pid"] == 89
    e = run["engine"]
    assert (e["kv_tokens"], e["max_concurrency"], e["max_concurrency_tokens"], e["num_gpu_blocks"]) == (
        1234560,
        9.42,
        131072,
        77160,
    )
    assert all(r["rank"] != "APIServer" for r in run["ranks"])


def test_crlf_and_progress_bars_keep_line_numbers() -> None:
    run = one_run("crlf-progress-bars.log")
    assert run["vllm_version"] == "0.11.0"
    tp0, tp1 = rank(run, "TP0"), rank(run, "TP1")
    assert tp0["weights_bytes"] == gib(7.1234) and tp0["evidence"]["weights_bytes"]["line"] == 2
    assert tp1["weights_bytes"] == gib(7.1234) and tp1["evidence"]["weights_bytes"]["line"] == 4
    assert tp0["kv_bytes"] == gib(12.34) and tp0["evidence"]["kv_bytes"]["line"] == 5


def test_glued_prefixes_orphan_line_negative_value_and_error() -> None:
    run = one_run("glued-prefixes-negative.log")
    assert rank(run, "TP6_EP6")["kv_bytes"] == gib(10.64)  # the writer whose text follows
    assert rank(run, "driver")["kv_bytes"] == gib(10.65)  # unprefixed: never guessed by adjacency
    assert rank(run, "TP0_EP0")["kv_bytes"] == -42949673
    err = [f for f in run["findings"] if f["code"] == "no_kv_memory"]
    assert err and err[0]["line"] == 4 and err[0]["severity"] == "error"


@pytest.mark.parametrize("name", ["hard-wrapped-fold80.log", "hard-wrapped-words100.log"])
def test_hard_wrapped_paste(name: str) -> None:
    run = one_run(name)
    tp0 = rank(run, "TP0_EP0")
    assert (tp0["kv_bytes"], tp0["weights_bytes"], tp0["non_torch_bytes"]) == (11465081548, gib(27.72), gib(0.18))
    assert (tp0["free_at_start_bytes"], tp0["total_bytes"], tp0["cuda_graph_bytes"]) == (
        gib(43.93),
        gib(44.42),
        gib(3.45),
    )
    assert tp0["suggested_kv_bytes_full"] == 11851036160
    assert rank(run, "TP2_EP2")["evidence"]["kv_bytes"]["line"] == 3  # the record's first physical line
    assert len(run["ranks"]) == 8 and run["engine"]["num_gpu_blocks"] == 14834


def test_v021_estimate_hint_recovery_debug_and_new_info_suggestion() -> None:
    run = one_run("v021-cg-estimate-debug-suggestion.log")
    assert run["vllm_version"] == "0.21.1"
    assert run["semantics"]["cuda_graphs_inside_budget"] is True
    s = run["settings"]
    assert (s["gpu_memory_utilization"], s["max_model_len"], s["kv_cache_dtype"], s["max_num_seqs"]) == (
        0.92,
        16384,
        "fp8",
        64,
    )
    assert s["non_default_args"]["tensor_parallel_size"] == 2
    tp0, tp1 = rank(run, "TP0"), rank(run, "TP1")
    assert tp0["cuda_graph_estimate_bytes"] == gib(0.17)
    total = gib(23.56)
    assert tp1["total_bytes"] == total
    assert tp1["cuda_graph_estimate_bytes"] == round((0.92 - 0.9129) * total)  # from the util hint
    assert tp1["util_equivalent_without_cg"] == 0.9129 and tp1["util_suggested"] == 0.9271
    assert tp1["evidence"]["cuda_graph_estimate_bytes"]["line"] == 4
    # DEBUG suggestion (GiB in parentheses, in-use in GiB)
    assert (tp1["weights_bytes"], tp1["activation_bytes"], tp1["non_torch_bytes"]) == (gib(14.37), gib(1.21), gib(0.3))
    assert tp1["suggested_kv_bytes_requested"] == 6155747328 and tp1["kv_bytes"] == gib(5.6)
    assert tp1["cuda_graph_estimate_piecewise_graphs"] == 67
    # INFO variant with "consumed memory (weights + non-torch)"
    assert tp0["consumed_bytes"] == gib(14.67) and tp0["weights_bytes"] is None
    assert tp0["kv_bytes"] == gib(5.52) and tp0["free_at_start_bytes"] == gib(23.31)
    e = run["engine"]  # the combined one-line form
    assert (e["kv_tokens"], e["max_concurrency_tokens"], e["max_concurrency"]) == (394633, 16384, 24.09)


def test_kv_cache_memory_bytes_and_repeated_startup_error() -> None:
    run = one_run("kv-cache-memory-bytes-error.log")  # the error re-raised by the API server is one run
    assert run["vllm_version"] == "0.26.0"
    assert run["semantics"]["kv_cache_memory_bytes_set"] is True
    s = run["settings"]
    assert (s["kv_cache_memory_bytes"], s["max_model_len"], s["tensor_parallel_size"]) == (4294967296, 1048576, 4)
    assert s["quantization"] == "none" and s["evidence"]["quantization"]["printed"] == "quantization=None"
    tp3 = rank(run, "TP3")
    assert (tp3["kv_bytes"], tp3["free_at_start_bytes"]) == (gib(4.0), gib(93.95))
    errs = [f for f in run["findings"] if f["code"] == "max_seq_len_exceeds_kv"]
    assert len(errs) == 1
    assert (errs[0]["max_model_len"], errs[0]["needed_kv_bytes"], errs[0]["available_kv_bytes"]) == (
        1048576,
        gib(144.0),
        gib(4.0),
    )
    assert errs[0]["estimated_max_model_len"] == 29120 and errs[0]["line"] == 5


def test_multiple_starts_each_error_ends_its_run() -> None:
    out = runs(load("multiple-starts-errors.log"))
    assert len(out) == 4
    first, second, third, fourth = out
    assert codes(first) == ["free_memory_below_utilization"]
    err = first["findings"][0]
    assert (err["free_at_start_bytes"], err["total_bytes"], err["requested_bytes"]) == (
        gib(12.18),
        gib(23.56),
        gib(21.67),
    )
    assert err["gpu_memory_utilization"] == 0.92 and err["device"] == "cuda:0"
    assert first["settings"]["enforce_eager"] is True and first["lines"] == [1, 3]
    assert codes(second) == ["no_kv_memory"] and second["lines"][0] == 4
    # its config states TP 1 × PP 1: the worker in the EngineCore process is TP0 (vllm_log_rank_index._in_engine)
    assert rank(second, "TP0")["weights_bytes"] == gib(21.0) and rank(second, "TP0")["process"] == "EngineCore_DP0"
    assert rank(third, "EngineCore_DP0")["pid"] == 22 and third["engine"]["kv_tokens"] == 123456
    # the same process label with a new pid is a restart
    assert rank(fourth, "EngineCore_DP0")["pid"] == 23 and fourth["engine"]["kv_tokens"] == 122000


def test_v0_repeat_without_markers_starts_new_run() -> None:
    text = (
        "Loading model weights took 1.0000 GB\n# GPU blocks: 100, # CPU blocks: 10\n"
        "Loading model weights took 2.0000 GB\n# GPU blocks: 50, # CPU blocks: 10\n"
    )
    out = runs(parsed(text))
    assert [r["engine"]["num_gpu_blocks"] for r in out] == [100, 50]
    assert rank(out[1], "driver")["weights_bytes"] == gib(2.0)


def test_no_memory_lines_gives_empty_runs_and_a_finding() -> None:
    out = parsed("hello\nINFO 01-01 00:00:00 [x.py:1] Starting server\n")
    assert out["runs"] == []
    (f,) = out["findings"]
    assert f["code"] == "no_vllm_memory_lines" and "Available KV cache memory" in f["message"]


def test_json_contract_fields_are_null_when_not_stated() -> None:
    run = one_run("v065-duration-variant.log")
    d = rank(run, "driver")
    for field in (
        "free_at_start_bytes",
        "requested_bytes",
        "weights_bytes",
        "activation_bytes",
        "cuda_graph_bytes",
        "cuda_graph_estimate_bytes",
        "kv_tokens",
        "num_gpu_blocks",
        "max_concurrency",
    ):
        assert d[field] is None, field
    assert run["engine"]["kv_tokens"] is None and run["engine"]["block_size"] is None
    assert run["settings"]["model"] is None and run["vllm_version"] is None


def test_error_reraised_by_api_server_creates_no_rank() -> None:
    text = (
        "(APIServer pid=9) ERROR 08-01 09:00:09 [api_server.py:1] ValueError: Free memory on device (1.0/23.56 GiB) "
        "on startup is less than desired GPU memory utilization (0.92, 21.67 GiB).\n"
    )
    (run,) = runs(parsed(text))
    assert run["ranks"] == [] and codes(run) == ["free_memory_below_utilization"]
    assert run["findings"][0]["rank"] == "APIServer" and run["findings"][0]["free_at_start_bytes"] == gib(1.0)


def test_repeated_equal_length_lines_are_not_taken_for_a_hard_wrap() -> None:
    idle = (
        "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, "
        "Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%"
    )
    text = "\n".join([idle] * 50 + ["Loading model weights took 1.0000 GB", "# GPU blocks: 7, # CPU blocks: 1"]) + "\n"
    out = parsed(text)
    assert out["findings"] == []
    (run,) = runs(out)
    assert rank(run, "driver")["evidence"]["weights_bytes"]["line"] == 51


def test_negative_kv_gets_a_finding_and_debug_free_lines() -> None:
    run = one_run("glued-prefixes-negative.log")
    (neg,) = [f for f in run["findings"] if f["code"] == "negative_kv_memory"]
    assert (neg["rank"], neg["kv_bytes"], neg["line"]) == ("TP0_EP0", -42949673, 3)
    text = (
        "(Worker pid=5) DEBUG 06-11 10:11:13 [v1/worker/gpu_worker.py:469] Initial free memory: 23.45 GiB; "
        "Requested memory: 0.920000 (util), 21.57 GiB\n"
        "(Worker pid=5) DEBUG 06-11 10:11:13 [v1/worker/gpu_worker.py:475] Free memory after profiling: 4.12 GiB "
        "(total), 2.24 GiB (within requested)\n"
    )
    (run,) = runs(parsed(text))
    w = rank(run, "Worker")
    assert (w["free_at_start_bytes"], w["requested_bytes"], w["free_after_profile_bytes"]) == (
        gib(23.45),
        gib(21.57),
        gib(4.12),
    )
    assert run["settings"]["gpu_memory_utilization"] == 0.92
    assert run["settings"]["tolerance"]["gpu_memory_utilization"] == pytest.approx(5e-7)


def test_non_default_args_odd_values_stay_json() -> None:
    text = (
        "(APIServer pid=1) INFO 01-01 00:00:00 [utils.py:1] non-default args: {'model': 'm', 'x': 1e999, 'y': {1, 2}}\n"
    )
    text += "Available KV cache memory: 1.0 GiB\n"
    (run,) = runs(parsed(text))
    args = run["settings"]["non_default_args"]
    assert args["x"] == "inf" and args["model"] == "m" and args["y"] == "{1, 2}"
    assert run["settings"]["model"] == "m"


def test_data_parallel_engines_are_named() -> None:
    text = (
        "(EngineCore_DP0 pid=1) INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: 1,000 tokens\n"
        "(EngineCore_DP1 pid=2) INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: 900 tokens\n"
    )
    (run,) = runs(parsed(text))
    assert run["engine"]["kv_tokens"] == 900
    (f,) = [f for f in run["findings"] if f["code"] == "several_engines"]
    assert f["engines"] == 2


def test_collapsed_paste_attributes_each_record_to_its_own_prefix() -> None:
    # an issue body whose newlines were lost: records glued on one line, some unprefixed
    text = (
        "INFO 02-05 09:11:53 model_runner.py:1118] Loading model weights took 18.4303 GB "
        "(RayWorkerWrapper pid=1039658) INFO 02-05 09:11:53 model_runner.py:1118] Loading model weights took "
        "18.4303 GB (RayWorkerWrapper pid=962641) INFO 05-28 10:18:37 [gpu_model_runner.py:1549] Model loading "
        "took 7.5123 GiB and 3.765386 seconds INFO 05-28 10:18:40 [kv_cache_utils.py:637] GPU KV cache size: "
        "1,014,384 tokens INFO 05-28 10:18:40 [kv_cache_utils.py:640] Maximum concurrency for 131,072 tokens "
        "per request: 7.74x"
    )
    # two starts glued (02-05 and 05-28, V0 and V1 lines): three months pass before the driver's
    # KV line, so it starts another run (vllm_log_runs `_START_DAYS`)
    first, run = runs(parsed(text))
    assert rank(first, "driver")["weights_bytes"] == gib(18.4303)
    assert rank(first, "pid=1039658")["weights_bytes"] == gib(18.4303)
    ray = rank(first, "pid=962641")
    assert ray["weights_bytes"] == gib(7.5123) and ray["kv_tokens"] is None  # the KV line was unprefixed
    assert run["engine"]["kv_tokens"] == 1014384 and run["engine"]["max_concurrency"] == 7.74


def test_same_error_from_two_ranks_stays_in_one_run() -> None:
    text = (
        "(Worker_TP0 pid=1) ERROR 01-01 00:00:00 [utils.py:1] ValueError: Free memory on device cuda:0 "
        "(20.0/23.56 GiB) on startup is less than desired GPU memory utilization (0.92, 21.67 GiB).\n"
        "(Worker_TP1 pid=2) ERROR 01-01 00:00:00 [utils.py:1] ValueError: Free memory on device cuda:1 "
        "(12.5/23.56 GiB) on startup is less than desired GPU memory utilization (0.92, 21.67 GiB).\n"
        "(EngineCore_DP0 pid=3) ERROR 01-01 00:00:01 [core.py:1] ValueError: Free memory on device cuda:1 "
        "(12.5/23.56 GiB) on startup is less than desired GPU memory utilization (0.92, 21.67 GiB).\n"
    )
    (run,) = runs(parsed(text))
    assert codes(run) == ["free_memory_below_utilization"] * 2
    assert rank(run, "TP0")["free_at_start_bytes"] == gib(20.0)
    assert rank(run, "TP1")["free_at_start_bytes"] == gib(12.5)


def _read_value_by_character(s: str, i: int) -> tuple[str, int]:
    """The engine-config value reader, one character at a time: a value ends at a comma outside
    brackets or at a close bracket with no open one (the `)` that ends V0's config list)."""
    n = len(s)
    if i < n and s[i] in "'\"":
        j = s.find(s[i], i + 1)
        j = n if j < 0 else j
        return s[i + 1 : j], j + 1
    depth, j = 0, i
    while j < n:
        c = s[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth <= 0:
                break
            depth -= 1
        elif c == "," and depth <= 0:
            break
        j += 1
    return s[i:j].strip(), j


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab =,()[]{}'\"x\t", max_size=40), st.integers(0, 45))
def test_config_values_read_as_one_character_at_a_time(s: str, i: int) -> None:
    """The config reader jumps from bracket to comma by regex; it ends every value where the
    character-by-character reading ends it (unbalanced, nested, quoted, at and past the end)."""
    from app.ingest.vllm_log_config import _read_value

    i = min(i, len(s))
    assert _read_value(s, i) == _read_value_by_character(s, i)


def test_an_engine_config_value_in_other_digits_loses_that_value_not_the_line() -> None:
    """max_seq_len=8² (a garbled paste): str.isdigit() took '8²' and int() raised, so the whole engine
    config line was a parser_error and the run lost its stated vLLM version (0.24.0) and model."""
    text = ("(EngineCore pid=1) INFO 07-09 21:27:35 [core.py:114] Initializing a V1 LLM engine (v0.24.0) with "
            "config: model='m', max_seq_len=8\u00b2, tensor_parallel_size=1\n"
            "(EngineCore pid=1) INFO 07-09 21:29:51 [gpu_worker.py:508] Available KV cache memory: 11.92 GiB\n")
    out = parsed(text)
    assert "parser_error" not in [f["code"] for f in out["findings"]]
    (run,) = runs(out)
    assert (run["vllm_version"], run["settings"]["model"], run["settings"]["max_model_len"]) == ("0.24.0", "m", None)
    assert run["settings"]["tensor_parallel_size"] == 1


def test_api_servers_of_api_server_count_are_api_servers_not_ranks() -> None:
    """--api-server-count > 1 names its processes `ApiServer_{i}` (vllm/v1/utils.py:218 @28be48fa9;
    real lines in vllm-project/vllm#45150): they were read as GPU workers labelled by pid, so an
    error one re-raised was put on a rank 'pid=N' and a figure under that prefix made a rank."""
    from app.ingest.vllm_log_prefix import API, identity_before

    line = "(ApiServer_2 pid=3873984) INFO 06-10 11:11:20 [api_server.py:579] Supported tasks: ['generate']"
    ident = identity_before(line, line.index("INFO"))
    assert (ident.kind, ident.label) == (API, "ApiServer_2")
    text = (
        "(Worker_TP0 pid=11) INFO 06-10 11:10:00 [gpu_worker.py:1] Available KV cache memory: 10.0 GiB\n"
        "(ApiServer_0 pid=21) INFO 06-10 11:10:01 [gpu_worker.py:1] Available KV cache memory: 10.0 GiB\n"
    )
    (run,) = runs(parsed(text))
    assert [r["rank"] for r in run["ranks"]] == ["TP0"]
