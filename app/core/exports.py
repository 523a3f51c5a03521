"""A computed plan in the formats people deploy: `vllm serve`, vLLM `--config` YAML, a KServe
InferenceService, vLLM production-stack Helm values, llm-d model-service values, and the per-rank
ledger as CSV.

Every format is rendered from the plan JSON's `vllm_args` (the (flag, value) pairs of
`app.core.vllm_flags.plan_flags`, the one plan → vLLM flag mapping); YAML is written by PyYAML.
Where a chart has its own key for a flag, the key is looked up by the vLLM flag name:
- production-stack (vllm-project/production-stack helm/templates/deployment-vllm-multi.yaml,
  commit a6c01db05f65): `vllmConfig.tensorParallelSize` (it also mounts /dev/shm for TP),
  every other flag in `vllmConfig.extraArgs`; the template writes `--enable-prefix-caching` when
  `enablePrefixCaching` is true and `--no-enable-prefix-caching` otherwise, so that key carries the
  plan's setting and neither flag is repeated in `extraArgs`;
- llm-d model-service (llm-d-incubation/llm-d-modelservice charts/llm-d-modelservice/templates/
  _helpers.tpl `vllmServeModelCommand`, commit 3051935eb5a4): `parallelism.tensor` and
  `parallelism.data`/`dataLocal` become `--tensor-parallel-size`/`--data-parallel-size`, the
  model is `modelArtifacts.uri: hf://ID`, the rest go in the container's `args`;
- KServe (serving.kserve.io/v1beta1): the Hugging Face runtime (`modelFormat: huggingface`),
  whose server takes vLLM's engine flags after `--model_name`/`--model_id`.
"""

from __future__ import annotations

import csv
import io
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from app.core.vllm_flags import MODEL_FLAG, FlagValue, args_list, config_mapping, flag_words

FORMATS = ("serve", "vllm-config", "kserve", "production-stack", "llm-d", "csv")
IMAGE = "vllm/vllm-openai"
IMAGE_TAG = "latest"
CSV_COLUMNS = ("rank", "total_bytes", "free_at_start_bytes", "requested_bytes", "headroom_bytes", "weights_bytes",
               "non_torch_bytes", "cuda_graph_bytes", "activation_bytes", "kv_bytes", "blocks", "tokens",
               "raw_tokens", "stranded_bytes", "will_start", "binding")
_PRODUCTION_STACK_KEYS = {"--tensor-parallel-size": "tensorParallelSize"}
_PREFIX_FLAGS = ("--enable-prefix-caching", "--no-enable-prefix-caching")
_LLM_D_PARALLELISM = {"--tensor-parallel-size": "tensor", "--data-parallel-size": "data"}


@dataclass(frozen=True)
class Export:
    text: str
    media_type: str
    filename: str
    notes: tuple[str, ...] = ()


class ExportError(ValueError):
    """A format this plan cannot be written in (e.g. no model to serve)."""


def pairs_of(result: Mapping[str, Any]) -> list[tuple[str, FlagValue]]:
    return [(str(a["flag"]), None if a["value"] is None else str(a["value"])) for a in result.get("vllm_args", [])]


def env_of(result: Mapping[str, Any]) -> dict[str, str]:
    """The environment the plan's engine was sized with, in every format: LMCache's sizes (`kv_offload_env`),
    ``VLLM_MLA_DISABLE=1`` when the plan sets ``engine.mla_disable`` (vllm/envs.py, read by
    ``ModelConfig.use_mla``: full K/V, app.core.mla_rules) and ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``
    when it sets ``engine.estimate_cudagraphs`` (vllm/envs.py, PR #30515; app.core.versions), and
    ``VLLM_USE_FLASHINFER_SAMPLER=1/0`` when it sets ``engine.flashinfer_sampler`` (vllm/envs.py; "1" takes
    FlashInfer's sampler only where FlashInfer is installed, as the plan assumed: app.core.profile_run), and
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` when it sets ``engine.allow_long_max_model_len`` (vllm/envs.py: without
    it vLLM refuses a max_model_len above the model's derived length, app.core.max_len rule 5)."""
    offload = result.get("kv_offload_env")
    env = {str(k): str(v) for k, v in offload.items()} if isinstance(offload, Mapping) else {}
    engine = result.get("engine")
    if isinstance(engine, Mapping):
        if engine.get("mla_disable") is True:
            env["VLLM_MLA_DISABLE"] = "1"
        estimate = engine.get("estimate_cudagraphs")
        if isinstance(estimate, bool):
            env["VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"] = "1" if estimate else "0"
        sampler = engine.get("flashinfer_sampler")
        if isinstance(sampler, bool):
            env["VLLM_USE_FLASHINFER_SAMPLER"] = "1" if sampler else "0"
        if engine.get("allow_long_max_model_len") is True:
            env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
    return env


def _model(pairs: Sequence[tuple[str, FlagValue]], fmt: str) -> str:
    for flag, value in pairs:
        if flag == MODEL_FLAG and value:
            return value
    raise ExportError(f"{fmt} needs the model to serve: the plan names none (give model.catalogue, or a config "
                      "with _name_or_path, or model.name as a Hugging Face id or a local path)")


def missing_model(result: Mapping[str, Any]) -> str | None:
    """Why no deploy file of this plan can be written (no model to serve), or None: the check
    every format's writer makes first, without writing any (the plan page only links the files)."""
    try:
        _model(pairs_of(result), "a deploy file")
    except ExportError as exc:
        return str(exc)
    return None


def _rest(pairs: Sequence[tuple[str, FlagValue]], skip: Mapping[str, str] | None = None) -> list[tuple[str, FlagValue]]:
    return [(f, v) for f, v in pairs if f != MODEL_FLAG and (skip is None or f not in skip)]


def _value(pairs: Sequence[tuple[str, FlagValue]], flag: str, default: int = 1) -> int:
    for f, v in pairs:
        if f == flag and v is not None:
            return int(v)
    return default


def gpus_per_engine(pairs: Sequence[tuple[str, FlagValue]]) -> int:
    """GPUs one deployment needs: TP × PP × DP (each data-parallel rank holds a full TP×PP group)."""
    return (_value(pairs, "--tensor-parallel-size") * _value(pairs, "--pipeline-parallel-size")
            * _value(pairs, "--data-parallel-size"))


def k8s_name(model: str) -> str:
    """A DNS-1123 label from a model id (`meta-llama/Llama-3.1-70B` → `llama-3-1-70b`), ≤ 45 characters."""
    tail = model.rstrip("/").rsplit("/", 1)[-1].lower()
    name = re.sub(r"[^a-z0-9-]+", "-", tail).strip("-")[:45].strip("-")
    return name if name and name[0].isalpha() else f"m-{name}".strip("-")


Env = Mapping[str, str]


def _env_list(env: Env) -> list[dict[str, str]]:
    """A Kubernetes container's `env` entries."""
    return [{"name": k, "value": v} for k, v in env.items()]


def serve_command(pairs: Sequence[tuple[str, FlagValue]], env: Env | None = None) -> str:
    """`vllm serve MODEL \\` then one flag per line, every word shell-quoted; the environment the
    plan needs (LMCache's sizes, `kv_offload_env`) as `NAME=value \\` lines before it."""
    model = _model(pairs, "serve")
    lines = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()] + [f"vllm serve {shlex.quote(model)}"]
    lines += ["  " + " ".join(shlex.quote(w) for w in flag_words(f, v)) for f, v in _rest(pairs)]
    return " \\\n".join(lines) + "\n"


def _yaml(data: object) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def vllm_config(pairs: Sequence[tuple[str, FlagValue]], env: Env | None = None) -> str:
    """vLLM's `--config` file: `vllm serve --config FILE` (the model is its `model` key); a file
    cannot set the environment, so what the plan needs there is a comment above it."""
    header = "".join(f"# set in the engine's environment: {k}={v}\n" for k, v in (env or {}).items())
    return header + _yaml({"model": _model(pairs, "vllm-config"), **config_mapping(_rest(pairs))})


def kserve(pairs: Sequence[tuple[str, FlagValue]], env: Env | None = None) -> str:
    model = _model(pairs, "kserve")
    name = k8s_name(model)
    gpus = gpus_per_engine(pairs)
    doc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {"predictor": {"model": {
            "modelFormat": {"name": "huggingface"},
            "args": [f"--model_name={name}", f"--model_id={model}", *args_list(_rest(pairs))],
            "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
            **({"env": _env_list(env)} if env else {}),
        }}},
    }
    return _yaml(doc)


def production_stack(
    pairs: Sequence[tuple[str, FlagValue]], env: Env | None = None, prefix_caching: bool | None = None
) -> str:
    """Helm values; `prefix_caching` is the plan's effective setting (vLLM's default when the flags
    leave it out): the chart writes `--enable-prefix-caching` or `--no-enable-prefix-caching` from
    `enablePrefixCaching` itself, so neither flag goes in `extraArgs` as well."""
    model = _model(pairs, "production-stack")
    stated = [f for f, _ in pairs if f in _PREFIX_FLAGS]
    enabled = stated[-1] == _PREFIX_FLAGS[0] if stated else prefix_caching is not False
    vllm: dict[str, object] = {"enablePrefixCaching": enabled}
    for flag, key in _PRODUCTION_STACK_KEYS.items():
        if any(f == flag for f, _ in pairs):
            vllm[key] = _value(pairs, flag)
    vllm["extraArgs"] = args_list([(f, v) for f, v in _rest(pairs, _PRODUCTION_STACK_KEYS) if f not in _PREFIX_FLAGS])
    spec = {"name": k8s_name(model), "repository": IMAGE, "tag": IMAGE_TAG, "modelURL": model, "replicaCount": 1,
            "requestCPU": 8, "requestMemory": "32Gi", "requestGPU": gpus_per_engine(pairs), "vllmConfig": vllm,
            **({"env": _env_list(env)} if env else {})}
    return _yaml({"servingEngineSpec": {"modelSpec": [spec]}})


def llm_d(pairs: Sequence[tuple[str, FlagValue]], env: Env | None = None) -> tuple[str, tuple[str, ...]]:
    model = _model(pairs, "llm-d")
    parallelism = {key: _value(pairs, flag) for flag, key in _LLM_D_PARALLELISM.items()}
    parallelism["dataLocal"] = parallelism["data"]
    container = {"name": "vllm", "image": "ghcr.io/llm-d/llm-d-cuda:latest", "modelCommand": "vllmServe",
                 "args": args_list(_rest(pairs, _LLM_D_PARALLELISM)), **({"env": _env_list(env)} if env else {})}
    doc = {"modelArtifacts": {"name": model, "uri": f"hf://{model}"},
           "decode": {"create": True, "replicas": 1, "parallelism": parallelism, "containers": [container]},
           "prefill": {"create": False}}
    notes: tuple[str, ...] = ()
    if _value(pairs, "--pipeline-parallel-size") > 1:
        notes = ("llm-d's chart requests dataLocal × tensor accelerators per pod; with pipeline parallelism "
                 "add the extra GPUs (or nodes) yourself",)
    header = "".join(f"# {n}\n" for n in notes)
    return header + _yaml(doc), notes


def ledger_csv(result: Mapping[str, Any]) -> str:
    """The per-rank ledger, one row per rank, bytes as integers (empty when unknown). A grouped
    result (past 1,024 ranks, `app.core.rank_groups`) has one row per listed group of identical
    ranks, with two more columns: how many ranks it stands for and their positions."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    grouped = result.get("ranks_form") == "grouped"
    writer.writerow([*CSV_COLUMNS, *(("group_count", "group_ranks") if grouped else ())])
    groups = result.get("rank_groups") or []
    for i, rank in enumerate(result.get("ranks", [])):
        row = ["" if rank.get(c) is None else rank.get(c) for c in CSV_COLUMNS]
        if grouped:
            group = groups[i] if i < len(groups) else {}
            row += [group.get("count", ""), group.get("ranks", "")]
        writer.writerow(row)
    return out.getvalue()


def export(result: Mapping[str, Any], fmt: str) -> Export:
    """The plan JSON `result` in format `fmt` (one of FORMATS); ExportError when it cannot be."""
    pairs, env = pairs_of(result), env_of(result)
    if fmt == "serve":
        return Export(serve_command(pairs, env), "text/x-shellscript", "vllm-serve.sh")
    if fmt == "vllm-config":
        return Export(vllm_config(pairs, env), "application/yaml", "vllm-config.yaml")
    if fmt == "kserve":
        return Export(kserve(pairs, env), "application/yaml", "inferenceservice.yaml")
    if fmt == "production-stack":
        engine = result.get("engine")
        prefix = engine.get("enable_prefix_caching") if isinstance(engine, Mapping) else None
        text = production_stack(pairs, env, prefix if isinstance(prefix, bool) else None)
        return Export(text, "application/yaml", "production-stack-values.yaml")
    if fmt == "llm-d":
        text, notes = llm_d(pairs, env)
        return Export(text, "application/yaml", "llm-d-values.yaml", notes)
    if fmt == "csv":
        return Export(ledger_csv(result), "text/csv", "ledger.csv")
    raise ExportError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
