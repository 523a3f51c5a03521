"""`vllm serve` command lines, Kubernetes args lists and vLLM --config YAML read into a plan.

Golden inputs are real command lines from public issues (cited beside each)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.errors import InputError
from app.ingest.vllm_serve import read_serve, read_vllm_config


def _flags(items: list[dict[str, Any]]) -> list[tuple[str | None, str | None]]:
    return [(i["flag"], i["value"]) for i in items]


def test_issue_example() -> None:
    r = read_serve("vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 --max-model-len 32768")
    assert r.document() == {"model": {"catalogue": "llama-3.1-70b", "name": "meta-llama/Llama-3.1-70B-Instruct"},
                            "layout": {"tp": 4},
                            "engine": {"max_model_len": 32768}}
    assert r.other_flags == [] and r.unknown_flags == []


def test_405b_awq_a6000() -> None:
    # https://github.com/vllm-project/vllm/issues/6689 (aisensiy, 2024-07): -q awq, =false, removed flags
    cmd = """vllm serve Meta-Llama-3___1-405B-Instruct-AWQ-INT4 \\
    --port 8080 \\
    --host 0.0.0.0 \\
    --served-model-name llama-3.1-405b \\
    --trust-remote-code \\
    --max-model-len 8192 -q awq \\
    --tensor-parallel-size 8 \\
    --enable-chunked-prefill=false \\
    --disable-log-requests \\
    --disable-log-stats"""
    r = read_serve(cmd)
    assert r.model == "Meta-Llama-3___1-405B-Instruct-AWQ-INT4" and r.catalogue is None
    # -q awq forces the checkpoint's plain AWQ kernels (not awq_marlin): a plan input since stop 29, whose
    # estimated activation holds the dequantized weight (app.core.dequant_linear)
    assert r.document() == {"layout": {"tp": 8}, "engine": {"max_model_len": 8192, "quantization": "awq"}}
    assert _flags(r.other_flags) == [("--port", "8080"), ("--host", "0.0.0.0"),
                                     ("--served-model-name", "llama-3.1-405b"), ("--trust-remote-code", None),
                                     ("--enable-chunked-prefill", "false"),
                                     ("--disable-log-requests", None), ("--disable-log-stats", None)]
    removed = {i["flag"] for i in r.other_flags if i["removed_from_vllm"]}
    assert "--disable-log-requests" in removed
    assert any("not in the catalogue" in n for n in r.notes)


def test_qwen3_coder_dp8_expert_parallel() -> None:
    # https://github.com/vllm-project/recipes/pull/12: `-dp=8` (short alias with =), --enable-expert-parallel
    r = read_serve("vllm serve /tmp/model/Qwen3-Coder-480B-A35B-Instruct-FP8 --served-model-name "
                   "Qwen3-Coder-480B-A35B-FP8 -dp=8  --enable-expert-parallel --enable-auto-tool-choice "
                   "--tool-call-parser qwen3_coder --gpu-memory-utilization 0.95")
    # --enable-expert-parallel is a plan flag (layout.expert_parallel), so the deploy command keeps it
    assert r.document() == {"layout": {"dp": 8, "expert_parallel": True}, "engine": {"gpu_memory_utilization": 0.95}}
    assert ("--enable-expert-parallel", None) not in _flags(r.other_flags)
    assert ("--tool-call-parser", "qwen3_coder") in _flags(r.other_flags)


def test_env_prefix_and_removed_swap_space() -> None:
    # https://github.com/vllm-project/vllm/issues/15469 (vLLM 0.7.2)
    r = read_serve("CUDA_VISIBLE_DEVICES=0,1 VLLM_USE_V1=1 VLLM_WORKER_MULTIPROC_METHOD=spawn vllm serve "
                   "/home/work/anyujie/Qwen/Qwen2.5-VL-3B-Instruct --gpu-memory-utilization 0.9 --swap-space 16 "
                   "--max-model-len 4096 --tensor-parallel-size 2 --port 8091 --disable-custom-all-reduce")
    assert r.document() == {"layout": {"tp": 2}, "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 4096}}
    swap = next(i for i in r.other_flags if i["flag"] == "--swap-space")
    assert swap["value"] == "16" and swap["removed_from_vllm"] is True


def test_python_module_entrypoint() -> None:
    # https://github.com/vllm-project/vllm/issues/2248 (vLLM 0.4.1)
    r = read_serve("python -m vllm.entrypoints.openai.api_server --dtype float16 --trust-remote-code --model "
                   "/models/deepseek-coder-33b-instruct  --served-model-name deepseek-coder-33b-instruct "
                   "--port 8000 --host 0.0.0.0 --tensor-parallel-size 2")
    assert r.model == "/models/deepseek-coder-33b-instruct" and r.document() == {"layout": {"tp": 2}}
    assert ("--dtype", "float16") in _flags(r.other_flags)


def test_unsloth_70b_tp8_background_job() -> None:
    # https://github.com/ovg-project/kvcached/issues/210: --no-enable-prefix-caching, trailing `&`
    r = read_serve("vllm serve unsloth/Llama-3.1-70B-Instruct \\\n  --disable-log-requests \\\n"
                   "  --no-enable-prefix-caching \\\n  --port 8001 \\\n  --tensor-parallel-size 8 \\\n"
                   "  --enable-sleep-mode &\n\nvllm serve unsloth/Llama-3.3-70B-Instruct --port 8002")
    # --no-enable-prefix-caching is a plan field since issue 15 item 6 (engine.enable_prefix_caching).
    assert r.document() == {"model": {"catalogue": "llama-3.1-70b", "name": "unsloth/Llama-3.1-70B-Instruct"},
                            "layout": {"tp": 8}, "engine": {"enable_prefix_caching": False}}
    assert ("--no-enable-prefix-caching", None) not in _flags(r.other_flags)
    assert any("unsloth/Llama-3.1-70B-Instruct" in n and "variant" in n for n in r.notes)


def test_docker_image_args_with_equals_and_underscores() -> None:
    # https://github.com/vllm-project/vllm/issues/6746 (docker run … vllm/vllm-openai:latest …)
    cmd = """docker run -d --restart=always --runtime=nvidia --gpus '"device=0,1,2,3,4,5,6,7"' \\
    --shm-size=10.24gb -p 5020:5020 --network host --name llama31-405b \\
    vllm/vllm-openai:latest \\
        --port=5020 \\
        --host=0.0.0.0 \\
        --model=meta-llama/Meta-Llama-3.1-405B-Instruct-FP8 \\
        --seed 1234 \\
        --tensor-parallel-size=8 \\
        --max-log-len=100 \\
        --max_num_seqs=32 \\
        --gpu-memory-utilization 0.98 \\
        --enable_chunked_prefill=True \\
        --download-dir=$HOME/.cache/huggingface/hub &>> logs.vllm_server.llama31_405b2.txt"""
    r = read_serve(cmd)
    assert r.model == "meta-llama/Meta-Llama-3.1-405B-Instruct-FP8"
    assert r.document()["layout"] == {"tp": 8}
    assert r.document()["engine"] == {"max_num_seqs": 32, "gpu_memory_utilization": 0.98}
    assert ("--enable-chunked-prefill", "True") in _flags(r.other_flags)


def test_kubernetes_args_list_and_aliases() -> None:
    args = ["--model", "Qwen/Qwen3-8B", "-tp", "2", "-pp=2", "--max-model-len=32k", "--max-num-batched-tokens",
            "2K", "--kv-cache-dtype", "fp8", "--block-size", "32", "--enforce-eager", "-q", "fp8",
            "--kv-cache-memory-bytes", "20G", "--decode-context-parallel-size", "2", "--frobnicate", "7"]
    r = read_serve(args)
    assert r.document() == {
        "model": {"catalogue": "qwen3-8b", "name": "Qwen/Qwen3-8B"}, "layout": {"tp": 2, "pp": 2, "dcp": 2},
        "engine": {"max_model_len": 32000, "max_num_batched_tokens": 2048, "kv_cache_dtype": "fp8",
                   "block_size": 32, "enforce_eager": True, "quantization": "fp8",
                   "kv_cache_memory_bytes": 20 * 2**30}}
    assert r.unknown_flags == [{"flag": "--frobnicate", "value": "7", "why": "not a flag of vllm serve"}]


def test_command_and_args_list_from_a_pod_spec() -> None:
    r = read_serve(["vllm", "serve", "Qwen/Qwen3-14B", "--tensor-parallel-size=2", "--max-model-len", "auto"])
    # `auto`: vLLM fits the length to the KV memory (app.core.plan._auto_fit), not the model's default
    assert r.document() == {"model": {"catalogue": "qwen3-14b", "name": "Qwen/Qwen3-14B"}, "layout": {"tp": 2},
                            "engine": {"max_model_len_auto": True}}
    assert not any("left to vLLM's default" in n for n in r.notes)


def test_vllm_config_yaml_flat_and_nested() -> None:
    text = """model: meta-llama/Meta-Llama-3.1-8B
tensor-parallel-size: 2
max_model_len: 16384
enforce-eager: true
enable-prefix-caching: false
compilation-config:
  pass_config:
    fuse_allreduce_rms: true
port: 8000
"""
    r = read_vllm_config(text)
    assert r.document() == {"model": {"catalogue": "llama-3.1-8b", "name": "meta-llama/Meta-Llama-3.1-8B"},
                            "layout": {"tp": 2},
                            "engine": {"max_model_len": 16384, "enforce_eager": True}}
    assert ("--compilation-config", '{"pass_config": {"fuse_allreduce_rms": true}}') in _flags(r.other_flags)


@pytest.mark.parametrize("command", ["ls -la /models", "docker ps", "", "python train.py --epochs 3",
                                     "sglang serve meta-llama/Llama-3.1-8B --tp 2"])
def test_not_a_vllm_command(command: str) -> None:
    with pytest.raises(InputError) as err:
        read_serve(command)
    assert "vllm serve MODEL" in err.value.message and err.value.field == "serve"


def test_unbalanced_quote_is_named() -> None:
    with pytest.raises(InputError, match="does not split into words"):
        read_serve("vllm serve 'meta-llama/Llama-3.1-8B -tp 2")


def test_bad_flag_value_names_the_flag() -> None:
    with pytest.raises(InputError) as err:
        read_serve("vllm serve Qwen/Qwen3-8B -tp four")
    assert err.value.field == "serve -tp" and "integer" in err.value.message
    with pytest.raises(InputError, match="decimals are not allowed"):
        read_serve("vllm serve Qwen/Qwen3-8B --max-model-len 1.5K")


@pytest.mark.parametrize("text", ["tensor-parallel-size: [4", "key: value: other", "- a\n- b", "just text"])
def test_vllm_config_yaml_that_is_not_one(text: str) -> None:
    with pytest.raises(InputError) as err:
        read_vllm_config(text)
    assert "expected vLLM's --config file" in err.value.message


def test_engine_environment_prefix_fills_the_engine() -> None:
    """`VLLM_MLA_DISABLE=1 vllm serve …` was planned with the latent MLA cache: the prefix was
    dropped. The plan's engine variables (vllm/envs.py: bool(int(value))) fill the engine, under the
    name written; the others are named in a note; a value vLLM cannot read is refused by name."""
    from app.ingest.vllm_serve import ENGINE_ENV
    from app.services.plan_query import KNOBS

    assert {k.env: k.path.removeprefix("engine.") for k in KNOBS if k.env} == ENGINE_ENV  # the knob table's
    r = read_serve("VLLM_MLA_DISABLE=1 VLLM_USE_FLASHINFER_SAMPLER=0 CUDA_VISIBLE_DEVICES=0 vllm serve "
                   "deepseek-ai/DeepSeek-V2-Lite --max-model-len 32768")
    assert r.document()["engine"] == {"max_model_len": 32768, "mla_disable": True, "flashinfer_sampler": False}
    assert r.written["engine.mla_disable"] == "VLLM_MLA_DISABLE"
    assert any("CUDA_VISIBLE_DEVICES" in n for n in r.notes)
    with pytest.raises(InputError) as err:
        read_serve("VLLM_MLA_DISABLE=yes vllm serve deepseek-ai/DeepSeek-V2-Lite")
    assert err.value.field == "serve VLLM_MLA_DISABLE" and "0 or 1" in str(err.value)


@pytest.mark.parametrize(("value", "allowed"), [("1", True), ("true", True), (" TRUE ", True), ("0", False),
                                                ("yes", False), ("2", False)])  # fmt: skip
def test_allow_long_prefix_is_read_as_vllm_reads_it(value: str, allowed: bool) -> None:
    """VLLM_ALLOW_LONG_MAX_MODEL_LEN is `value.strip().lower() in ("1", "true")` in vllm/envs.py @28be48fa9,
    not bool(int(value)): "true" allows, "2" does not, nothing is refused."""
    r = read_serve(f"VLLM_ALLOW_LONG_MAX_MODEL_LEN='{value}' vllm serve Qwen/Qwen3-14B --max-model-len 65536")
    assert r.document()["engine"]["allow_long_max_model_len"] is allowed
