"""Deploy formats of a plan and the running engine's metrics beside the plan.

`export_plan` computes a plan document and writes it in one of `app.core.exports.FORMATS`.
`import_metrics` reads vLLM's /metrics text (and DCGM exporter's) and, given a plan document,
puts each engine's measured `num_gpu_blocks` beside the plan's predicted blocks on the binding
rank (vLLM gives every worker of an engine the minimum block count across its workers, so the
engine-level figure is the binding rank's); the prompt/generation histograms become a length
mix the simulator takes (`workload.prompt_tokens` / `output_tokens` as lists of lengths).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.errors import InputError
from app.core.exports import Export, ExportError, export
from app.ingest.vllm_metrics import metrics_to_json, parse_metrics
from app.ingest.vllm_serve_values import model_match
from app.services.plans import run_plan

JSON = dict[str, Any]


def export_plan(doc: object, fmt: str) -> Export:
    """The plan document `doc` in format `fmt`; InputError naming the field for bad input."""
    result = run_plan(doc, with_levers=False)
    try:
        return export(result, fmt)
    except ExportError as exc:
        raise InputError("format" if "unknown format" in str(exc) else "model", str(exc)) from None


def _comparison(replica: Mapping[str, Any], plan: Mapping[str, Any]) -> JSON:
    measured, predicted = replica.get("num_gpu_blocks"), plan.get("blocks")
    out: JSON = {"measured_blocks": measured, "predicted_blocks": predicted,
                 "measured_block_size": replica.get("block_size"), "plan_block_size": plan.get("block_size")}
    if isinstance(measured, int) and isinstance(predicted, int) and predicted > 0:
        out["difference_blocks"] = measured - predicted
        out["ratio"] = round(measured / predicted, 4)
    differ = _settings_differ(replica, plan.get("engine") or {})
    out["settings_differ"] = differ
    if differ:
        said = ", ".join(f"{d['field']} {d['engine']} (plan {d['plan']})" for d in differ)
        out["settings_note"] = (f"the engine ran with other settings than the plan: {said}; its blocks are not the "
                                "plan's to compare: plan the engine's own settings (the replica's document)")
    if replica.get("block_size") not in (None, plan.get("block_size")):
        out["note"] = ("the engine reports another block size than the plan (hybrid models report the "
                       "smallest group's, vLLM ≥ 0.11): compare tokens, not blocks")
    return out


_FP8_E4M3 = {"fp8", "fp8_e4m3"}  # vLLM's "fp8" is e4m3 on CUDA (vllm/config/cache.py CacheDType)


def _settings_differ(replica: Mapping[str, Any], engine: Mapping[str, Any]) -> list[JSON]:
    """The cache settings a replica's cache_config_info states that differ from the plan's engine."""
    differ: list[JSON] = []
    dtype, planned = replica.get("cache_dtype"), engine.get("kv_cache_dtype")
    if dtype and planned and dtype != planned and not {dtype, planned} <= _FP8_E4M3:
        differ.append({"field": "kv_cache_dtype", "engine": dtype, "plan": planned})
    manual, planned_manual = replica.get("kv_cache_memory_bytes"), engine.get("kv_cache_memory_bytes")
    if manual or planned_manual:
        if manual != planned_manual:
            differ.append({"field": "kv_cache_memory_bytes", "engine": manual, "plan": planned_manual})
        return differ  # a manual budget: the utilization does not size the pool
    util, planned_util = replica.get("gpu_memory_utilization"), engine.get("gpu_memory_utilization")
    if isinstance(util, float | int) and isinstance(planned_util, float | int) and abs(util - planned_util) > 1e-9:
        differ.append({"field": "gpu_memory_utilization", "engine": util, "plan": planned_util})
    return differ


def _document(replica: Mapping[str, Any]) -> JSON:
    """What a replica's cache_config_info says about the plan (engine settings, the model by name)."""
    engine: JSON = {}
    if replica.get("block_size"):
        engine["block_size"] = replica["block_size"]
    if replica.get("cache_dtype"):
        engine["kv_cache_dtype"] = replica["cache_dtype"]
    if replica.get("kv_cache_memory_bytes"):
        engine["kv_cache_memory_bytes"] = replica["kv_cache_memory_bytes"]
    elif replica.get("gpu_memory_utilization"):
        engine["gpu_memory_utilization"] = replica["gpu_memory_utilization"]
    doc: JSON = {"engine": engine} if engine else {}
    if replica.get("model_name"):
        slug, _ = model_match(str(replica["model_name"]))
        if slug is not None:
            doc["model"] = {"catalogue": slug, "name": replica["model_name"]}
    return doc


def _simulation_workload(replica: Mapping[str, Any]) -> JSON | None:
    mix = replica.get("length_mix") or {}
    workload = {f"{side}": mix[side]["lengths"] for side in ("prompt_tokens", "output_tokens") if mix.get(side)}
    return workload or None


def import_metrics(text: str, plan_doc: object | None = None) -> JSON:
    """Every replica's cache figures, usage and length mix; beside the plan's prediction when given."""
    out = metrics_to_json(parse_metrics(text))
    plan = None
    if plan_doc is not None:
        try:
            plan = run_plan(plan_doc, with_levers=False)
        except InputError as exc:
            raise exc.under("plan") from None
    for replica in out["replicas"]:
        replica["document"] = _document(replica)
        replica["workload"] = _simulation_workload(replica)
        if plan is not None:
            replica["plan"] = _comparison(replica, plan)
    if plan is not None:
        out["plan"] = {"binding_rank": plan["binding_rank"], "blocks": plan["blocks"],
                       "block_size": plan["block_size"], "tokens": plan["tokens"]}
    out["smi_equivalent"] = [{"index": g["index"], "name": g["name"], "total_bytes": g["total_bytes"],
                              "used_bytes": g["used_bytes"], "free_bytes": g["free_bytes"]} for g in out["gpus"]]
    return out
