"""vLLM /metrics and DCGM exporter text: golden tests on real text (tests/data/metrics/README.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.errors import InputError
from app.ingest.vllm_metrics import Histogram, length_mix, metrics_to_json, parse_metrics

DATA = Path(__file__).resolve().parents[1] / "data" / "metrics"
MIB = 1024**2


def _read(name: str) -> Any:
    return metrics_to_json(parse_metrics((DATA / name).read_text(encoding="utf-8")))


def _json(text: str) -> Any:
    return metrics_to_json(parse_metrics(text))


def test_cache_config_info_v011_engine_label() -> None:
    # https://github.com/vllm-project/vllm/issues/28924 (vLLM 0.11.0)
    (rep,) = _read("vllm-0.11-cache-config-engine.prom")["replicas"]
    assert rep["replica"] == {"engine": "0"}
    assert (rep["num_gpu_blocks"], rep["block_size"], rep["cache_dtype"]) == (9271, 16, "auto")
    assert rep["gpu_memory_utilization"] == 0.65
    assert rep["kv_cache_memory_bytes"] is None and rep["num_gpu_blocks_override"] is None
    assert rep["cache_config"]["prefix_caching_hash_algo"] == "sha256"


def test_cache_config_info_first_format_inline() -> None:
    # The line in https://github.com/vllm-project/vllm/pull/3100 (the PR that added the metric).
    text = ('vllm:cache_config_info{block_size="16",cache_dtype="auto",gpu_memory_utilization="0.9",'
            'num_cpu_blocks="7281",num_gpu_blocks="24188",sliding_window="None",swap_space_bytes="4294967296"} 1.0')
    (rep,) = _json(text)["replicas"]
    assert (rep["num_gpu_blocks"], rep["block_size"], rep["gpu_memory_utilization"]) == (24188, 16, 0.9)
    assert rep["replica"] == {}


def test_kv_cache_usage_v1_name() -> None:
    # https://github.com/vllm-project/production-stack/issues/617 (vLLM 0.10.0, GLM-4.5)
    (rep,) = _read("vllm-0.10-glm45-engine0.prom")["replicas"]
    assert rep["model_name"] == "zai-org/GLM-4.5" and rep["replica"] == {"engine": "0"}
    assert rep["kv_cache_usage"] == pytest.approx(9.75010481363281e-06)


def test_gpu_cache_usage_v0_name_and_other_series_ignored() -> None:
    # https://github.com/vllm-project/production-stack/issues/318: process_* series are not vLLM's
    (rep,) = _read("vllm-v0-qwen-coder-router.prom")["replicas"]
    assert rep["model_name"] == "Qwen/Qwen2.5-Coder-32B-Instruct"
    assert rep["kv_cache_usage"] == 0.0 and rep["requests_running"] == 0.0 and rep["requests_waiting"] == 0.0


def test_two_data_parallel_engines_are_two_replicas() -> None:
    # https://github.com/vllm-project/vllm/pull/22227 (engine="0" and engine="1", untyped excerpt)
    reps = _read("vllm-dp2-qwen3-8b-generation-tokens.prom")["replicas"]
    assert [r["replica"] for r in reps] == [{"engine": "0"}, {"engine": "1"}]
    mix0 = reps[0]["length_mix"]["output_tokens"]
    assert mix0["lengths"] == [20000, 20000, 20000] and mix0["requests"] == 3
    mix1 = reps[1]["length_mix"]["output_tokens"]
    assert mix1["lengths"] == [500]  # one request in (200, 500]; the excerpt ends at le=1000


def test_lora_adapter_histograms_add_up_on_one_engine() -> None:
    # https://github.com/vllm-project/vllm/pull/11117
    (rep,) = _read("vllm-v0-lora-prompt-tokens.prom")["replicas"]
    assert rep["model_names"] == ["sql-lora", "meta-llama/Llama-2-7b-hf"]
    assert rep["length_mix"]["prompt_tokens"]["lengths"] == [5]


def test_dcgm_mig_instances_and_plain_gpus() -> None:
    # https://github.com/NVIDIA/dcgm-exporter/issues/317 and pull/736
    mig = _read("dcgm-a30-mig.prom")["gpus"]
    assert len(mig) == 6 and {g["mig_instance"] for g in mig} == {"3", "4", "5", "6"}
    assert all(g["free_bytes"] == 6012 * MIB and g["name"] == "NVIDIA A30" for g in mig)
    gpus = _read("dcgm-rtx2000-a30.prom")["gpus"]
    assert [(g["index"], g["free_bytes"], g["hostname"]) for g in gpus] == [
        (1, 11275 * MIB, "dcgm-exporter-wwwjh"), (2, 2207 * MIB, "dcgm-exporter-wwwjh")]


def test_dcgm_total_is_free_plus_used_plus_reserved() -> None:
    text = ('DCGM_FI_DEV_FB_FREE{gpu="0",modelName="NVIDIA H100 80GB HBM3"} 81000\n'
            'DCGM_FI_DEV_FB_USED{gpu="0",modelName="NVIDIA H100 80GB HBM3"} 4\n'
            'DCGM_FI_DEV_FB_RESERVED{gpu="0",modelName="NVIDIA H100 80GB HBM3"} 555\n')
    (gpu,) = _json(text)["gpus"]
    assert gpu["total_bytes"] == (81000 + 4 + 555) * MIB and gpu["used_bytes"] == 4 * MIB


@pytest.mark.parametrize("text", ["", "   ", "hello world\nthis is not metrics",
                                  '# HELP up Up\n# TYPE up gauge\nup{job="x"} 1\n'])
def test_no_vllm_series_names_what_was_expected(text: str) -> None:
    with pytest.raises(InputError) as err:
        parse_metrics(text)
    assert "vllm:cache_config_info" in err.value.message and err.value.field == "metrics"


def test_junk_lines_are_skipped_and_counted() -> None:
    text = "$ curl localhost:8000/metrics\n" + (DATA / "vllm-0.11-cache-config-engine.prom").read_text()
    out = _json(text)
    assert out["skipped_lines"] == [1] and out["replicas"][0]["num_gpu_blocks"] == 9271


def test_length_mix_keeps_the_histogram_mean_for_the_inf_bucket() -> None:
    # 2 requests ≤ 100, 1 above 1000: the sum leaves 5000 − 2·100 = 4800 for the +Inf one.
    hist = Histogram(buckets={100.0: 2.0, 1000.0: 2.0, float("inf"): 3.0}, total=5000.0, count=3.0)
    mix = length_mix(hist)
    assert mix is not None and mix["lengths"] == [100, 100, 4800] and mix["mean_tokens"] == pytest.approx(5000 / 3)


def test_length_mix_scales_to_the_limit_by_largest_remainder() -> None:
    hist = Histogram(buckets={10.0: 1.0, 20.0: 2.0, 50.0: 3.0, float("inf"): 3.0}, total=100.0, count=3.0)
    big = Histogram(buckets={k: v * 1000 for k, v in hist.buckets.items()}, total=100_000.0, count=3000.0)
    mix = length_mix(big, limit=10)
    assert mix is not None and len(mix["lengths"]) == 10
    assert sorted(set(mix["lengths"])) == [10, 20, 50]


# A sample no engine can have: NaN/±Inf (Prometheus allows them on the wire), a negative count or MiB,
# a usage fraction above 1, a bucket edge that is no token length, cache_config_info numbers that
# overflow. Before, each raised from int()/round() (a 500 on POST /api/v1/import/metrics, a traceback
# from `kvledger import-metrics`) or, for a negative DCGM free MiB or a bucket at le="-5", gave a
# negative total and lengths of -4 tokens. Now each is left out and named with why.
@pytest.mark.parametrize(
    ("text", "series", "reason"),
    [
        ('vllm:request_prompt_tokens_bucket{le="100"} 5\nvllm:request_prompt_tokens_bucket{le="+Inf"} +Inf\n'
         "vllm:request_prompt_tokens_count +Inf\n", 'vllm:request_prompt_tokens_bucket{le="+Inf"}',
         "not a finite number"),
        ('vllm:request_prompt_tokens_bucket{le="100"} NaN\n', 'vllm:request_prompt_tokens_bucket{le="100"}',
         "not a finite number"),
        ('vllm:request_prompt_tokens_bucket{le="-5"} 5\nvllm:request_prompt_tokens_bucket{le="+Inf"} 7\n',
         'vllm:request_prompt_tokens_bucket{le="-5"}', "bucket edge le='-5' is not a token length"),
        ('vllm:request_prompt_tokens_bucket{le="1e300"} 5\n', 'vllm:request_prompt_tokens_bucket{le="1e300"}',
         "is not a token length"),
        ('DCGM_FI_DEV_FB_FREE{gpu="0"} +Inf\nDCGM_FI_DEV_FB_USED{gpu="0"} 5\n', 'DCGM_FI_DEV_FB_FREE{gpu="0"}',
         "not a finite number"),
        ('DCGM_FI_DEV_FB_FREE{gpu="0"} -5\nDCGM_FI_DEV_FB_USED{gpu="0"} 5\n', 'DCGM_FI_DEV_FB_FREE{gpu="0"}',
         "negative"),
        ('vllm:kv_cache_usage_perc{engine="0"} 1.5\n', 'vllm:kv_cache_usage_perc{engine="0"}', "above 1"),
        ('vllm:num_requests_running{engine="0"} 1e300\n', 'vllm:num_requests_running{engine="0"}', "larger than"),
        ('vllm:cache_config_info{block_size="16",num_gpu_blocks="inf"} 1\n',
         'vllm:cache_config_info{num_gpu_blocks="inf"}', "not a finite number"),
        ('vllm:cache_config_info{block_size="16",gpu_memory_utilization="1.5"} 1\n',
         'vllm:cache_config_info{gpu_memory_utilization="1.5"}', "outside 0 … 1"),
    ],
)
def test_a_sample_no_engine_can_have_is_named_and_not_used(text: str, series: str, reason: str) -> None:
    out = _json(text)
    (refused,) = [r for r in out["refused"] if r["series"] == series]
    assert reason in refused["reason"]
    for rep in out["replicas"]:
        for mix in rep["length_mix"].values():
            assert mix is None or all(1 <= n <= 10**7 for n in mix["lengths"])
        assert rep["num_gpu_blocks"] is None or rep["num_gpu_blocks"] >= 0
    for gpu in out["gpus"]:
        assert gpu["free_bytes"] is None and gpu["total_bytes"] is None


def test_a_good_sample_beside_a_refused_one_is_still_read() -> None:
    out = _json('vllm:cache_config_info{block_size="16",num_gpu_blocks="inf"} 1\n'
                'DCGM_FI_DEV_FB_FREE{gpu="0"} 100\nDCGM_FI_DEV_FB_USED{gpu="0"} 28\n')
    (rep,) = out["replicas"]
    assert (rep["block_size"], rep["num_gpu_blocks"], out["refused_count"]) == (16, None, 1)
    assert out["gpus"][0]["total_bytes"] == 128 * MIB


def test_a_histogram_sum_that_no_lengths_add_up_to_is_not_a_length() -> None:
    out = _json('vllm:request_prompt_tokens_bucket{le="100"} 5\nvllm:request_prompt_tokens_bucket{le="+Inf"} 6\n'
                "vllm:request_prompt_tokens_count 6\nvllm:request_prompt_tokens_sum 1e12\n")
    mix = out["replicas"][0]["length_mix"]["prompt_tokens"]
    assert mix["lengths"] == [100] * 5 + [101] and "not a length" in mix["note"]


def test_a_dcgm_gpu_label_of_unicode_digits_has_no_index() -> None:
    out = _json('DCGM_FI_DEV_FB_FREE{gpu="\u00b2"} 100\nDCGM_FI_DEV_FB_USED{gpu="\u00b2"} 28\n')
    assert (out["gpus"][0]["index"], out["gpus"][0]["gpu"]) == (None, "\u00b2")
