"""Deploy formats from one plan → vLLM flag mapping: round trips and Kubernetes required fields."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.core.errors import InputError
from app.core.exports import FORMATS, ExportError, export, pairs_of
from app.core.vllm_flags import PLAN_FLAGS, args_list, is_model_id, vllm_flag_table
from app.ingest.vllm_serve import read_serve, read_vllm_config
from app.services.plans import run_plan

DNS_1123 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
BASE = {"gpu": {"total": "80 GiB"}, "vllm_version": "0.11.0"}


def _plan(**engine: Any) -> dict[str, Any]:
    doc = {"model": {"catalogue": "llama-3.1-70b"}, "layout": {"tp": 4}, "engine": {"max_model_len": 32768, **engine},
           **BASE}
    return run_plan(doc)


def test_every_plan_flag_is_a_vllm_flag() -> None:
    table = vllm_flag_table()
    for spec in PLAN_FLAGS:
        assert spec.flag in table and not table[spec.flag].removed, spec.flag


def _without_mml_caveat(plan: dict[str, Any]) -> Any:
    """The plan without the caveat a plan that states no max_model_len carries (app.core.plan)."""
    text = json.dumps(plan)
    return json.loads(re.sub(r"\. Caveat: max_model_len was not stated(?:[^\"\\]|\\.)*", "", text))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    slug=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "deepseek-v2-lite", "gemma-2-9b-it"]),
    tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2]), dp=st.sampled_from([1, 2]),
    gmu=st.sampled_from([0.8, 0.9, 0.95]), mml=st.sampled_from([None, 4096, 16384]),
    dtype=st.sampled_from(["auto", "fp8", "fp8_e5m2"]), block=st.sampled_from([16, 32]),
    eager=st.booleans(), manual=st.sampled_from([None, "20 GiB"]), fp8w=st.booleans(),
)
def test_plan_to_serve_command_to_plan_is_the_same_plan(
    slug: str, tp: int, pp: int, dp: int, gmu: float, mml: int | None, dtype: str, block: int, eager: bool,
    manual: str | None, fp8w: bool,
) -> None:
    engine: dict[str, Any] = {"gpu_memory_utilization": gmu, "kv_cache_dtype": dtype, "block_size": block,
                              "enforce_eager": eager}
    if mml is not None:
        engine["max_model_len"] = mml
    if manual is not None:
        engine["kv_cache_memory_bytes"] = manual
    if fp8w:
        engine["quantization"] = "fp8"
    doc = {"model": {"catalogue": slug}, "layout": {"tp": tp, "pp": pp, "dp": dp}, "engine": engine, **BASE}
    try:
        first = run_plan(doc)
    except InputError:
        assume(False)
        raise
    command = export(first, "serve").text
    reading = read_serve(command)
    assert reading.unknown_flags == [] and reading.other_flags == []
    again = run_plan({**reading.document(), **BASE})
    if manual is not None:  # vLLM ignores the utilization beside a manual budget: so does the command
        assert first["engine"].pop("gpu_memory_utilization") == gmu
        again["engine"].pop("gpu_memory_utilization")
        # ... and the start lever that drops the manual budget is priced at that utilization
        for plan in (first, again):
            plan["start_levers"] = [lever for lever in plan.get("start_levers") or []
                                    if lever["knob"] != "kv_cache_memory_bytes"]
    if mml is None:  # the command states the model's default max_model_len, so the replan has no caveat
        first = _without_mml_caveat(first)
    assert again == first
    config = read_vllm_config(export(first, "vllm-config").text)
    assert config.document() == reading.document()


def test_yaml_outputs_parse_back_to_the_same_flags() -> None:
    result = _plan(kv_cache_dtype="fp8", enforce_eager=True)
    pairs = pairs_of(result)
    flags = args_list(pairs, with_model=False)
    config = yaml.safe_load(export(result, "vllm-config").text)
    assert config["model"] == "meta-llama/Meta-Llama-3.1-70B" and config["enforce-eager"] is True
    assert read_vllm_config(export(result, "vllm-config").text).document() == read_serve(
        export(result, "serve").text).document()

    isvc = yaml.safe_load(export(result, "kserve").text)
    model = isvc["spec"]["predictor"]["model"]
    assert model["args"][2:] == flags
    assert model["args"][1] == "--model_id=meta-llama/Meta-Llama-3.1-70B"

    values = yaml.safe_load(export(result, "production-stack").text)
    (spec,) = values["servingEngineSpec"]["modelSpec"]
    engine = spec["vllmConfig"]
    rebuilt = ["--tensor-parallel-size", str(engine["tensorParallelSize"]), *engine["extraArgs"]]
    assert rebuilt == flags and spec["requestGPU"] == 4 and spec["modelURL"] == "meta-llama/Meta-Llama-3.1-70B"

    llmd = yaml.safe_load(export(result, "llm-d").text)
    decode = llmd["decode"]
    rebuilt = ["--tensor-parallel-size", str(decode["parallelism"]["tensor"]), *decode["containers"][0]["args"]]
    assert rebuilt == flags and llmd["modelArtifacts"]["uri"] == "hf://meta-llama/Meta-Llama-3.1-70B"


def test_kubernetes_objects_carry_their_required_fields() -> None:
    result = _plan()
    isvc = yaml.safe_load(export(result, "kserve").text)
    # serving.kserve.io/v1beta1 InferenceService: apiVersion, kind, metadata.name, spec.predictor;
    # a predictor model needs modelFormat.name.
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1" and isvc["kind"] == "InferenceService"
    assert DNS_1123.match(isvc["metadata"]["name"]) and len(isvc["metadata"]["name"]) <= 63
    assert isvc["spec"]["predictor"]["model"]["modelFormat"]["name"] == "huggingface"
    assert isvc["spec"]["predictor"]["model"]["resources"]["limits"]["nvidia.com/gpu"] == 4
    # production-stack's deployment-vllm-multi.yaml `required`s repository and tag; name and modelURL are used.
    (spec,) = yaml.safe_load(export(result, "production-stack").text)["servingEngineSpec"]["modelSpec"]
    assert {"name", "repository", "tag", "modelURL", "requestGPU"} <= set(spec)
    assert DNS_1123.match(spec["name"])
    llmd = yaml.safe_load(export(result, "llm-d").text)
    assert llmd["decode"]["containers"][0]["modelCommand"] == "vllmServe"


def test_csv_has_one_row_per_rank() -> None:
    result = _plan()
    rows = list(csv.DictReader(io.StringIO(export(result, "csv").text)))
    assert [r["rank"] for r in rows] == [r["rank"] for r in result["ranks"]]
    assert [int(r["kv_bytes"]) for r in rows] == [r["kv_bytes"] for r in result["ranks"]]
    assert [r["binding"] for r in rows].count("True") == 1


def test_serve_command_is_shell_quoted() -> None:
    result = {"vllm_args": [{"flag": "--model", "value": "/models/my model;rm -rf"},
                            {"flag": "--tensor-parallel-size", "value": "2"}]}
    text = export(result, "serve").text
    assert "'/models/my model;rm -rf'" in text
    assert read_serve(text).model == "/models/my model;rm -rf"


def test_a_plan_without_a_model_cannot_be_served() -> None:
    result = run_plan({"model": {"kv_bytes_per_token": 131072}, "engine": {"max_model_len": 8192},
                       "ranks": [{"total": "80 GiB", "kv_room": "40 GiB"}]})
    for fmt in FORMATS:
        if fmt == "csv":
            assert export(result, fmt).text.startswith("rank,")
            continue
        with pytest.raises(ExportError, match="needs the model"):
            export(result, fmt)
    with pytest.raises(ExportError, match="expected one of"):
        export(result, "helm")


def test_a_plan_labelled_but_given_only_as_bytes_per_token_emits_no_model() -> None:
    # Seed 001's document: bytes per token and a display label, no model anyone can serve (issue 17).
    from app.web.plan.examples import SEED001

    for doc in (SEED001, {**SEED001, "model": {"kv_bytes_per_token": 262144}}):
        result = run_plan(dict(doc))
        assert all(a["flag"] != "--model" for a in result["vllm_args"])
        assert not [f for f in result["flags"] if f.startswith("--model")]
        with pytest.raises(ExportError, match="needs the model"):
            export(result, "serve")
    named = run_plan({**SEED001, "model": {"kv_bytes_per_token": 262144, "name": "org/served-model"}})
    assert export(named, "serve").text.startswith("vllm serve org/served-model")


@pytest.mark.parametrize(("name", "served"), [
    ("meta-llama/Llama-3.1-8B", True), ("gpt2", True), ("/models/my model", True), ("./ckpt", True),
    ("seed-001 (256 KiB/token per rank)", False), ("a/b/c", False), ("org--x/y", False), ("", False),
    (" gpt2", False), ("x" * 97, False),
])
def test_model_ids_are_what_vllm_serve_can_load(name: str, served: bool) -> None:
    assert is_model_id(name) is served


def _chart_command(spec: dict[str, Any]) -> list[str]:
    """The engine flags production-stack's deployment-vllm-multi.yaml (commit 010004eea56f) writes
    from a modelSpec's vllmConfig: the prefix-caching flag from enablePrefixCaching, then
    --tensor-parallel-size, then extraArgs."""
    engine = spec["vllmConfig"]
    out = ["--enable-prefix-caching" if engine["enablePrefixCaching"] else "--no-enable-prefix-caching"]
    if "tensorParallelSize" in engine:
        out += ["--tensor-parallel-size", str(engine["tensorParallelSize"])]
    return out + list(engine["extraArgs"])


@pytest.mark.parametrize(("engine", "version", "enabled"), [
    ({"enable_prefix_caching": False}, "0.11.0", False),
    ({}, "0.11.0", True),
    ({"enable_prefix_caching": True}, "0.6.4", True),
    ({}, "0.6.4", False),
])
def test_production_stack_says_prefix_caching_once_as_the_plan_has_it(
    engine: dict[str, Any], version: str, enabled: bool
) -> None:
    """A plan without prefix caching exported `enablePrefixCaching: true` and `--no-enable-prefix-caching`
    in extraArgs (the chart then ran both flags); a V0 plan (prefix caching off by default) exported
    true, which the chart turns into --enable-prefix-caching: another engine than the plan's."""
    doc = {"model": {"catalogue": "llama-3.1-70b"}, "layout": {"tp": 4}, "gpu": {"total": "80 GiB"},
           "vllm_version": version, "engine": {"max_model_len": 32768, **engine}}
    result = run_plan(doc)
    (spec,) = yaml.safe_load(export(result, "production-stack").text)["servingEngineSpec"]["modelSpec"]
    assert spec["vllmConfig"]["enablePrefixCaching"] is enabled
    command = _chart_command(spec)
    assert [f for f in command if "prefix-caching" in f] == [
        "--enable-prefix-caching" if enabled else "--no-enable-prefix-caching"]
    served = read_serve("vllm serve meta-llama/Meta-Llama-3.1-70B " + " ".join(command)).document()
    assert served["engine"].get("enable_prefix_caching", enabled) is enabled
