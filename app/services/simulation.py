"""Simulation documents: resolve `{"plan": {...}}` to the binding rank's block pool, then ramp."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from app.core.errors import InputError
from app.core.gpu_perf import gpu_perf
from app.core.gpus import find_preset
from app.core.sim.cost import CostModel, ReplicaShape, roofline_cost

JSON = dict[str, Any]


def resolve_pool(doc: Mapping[str, Any]) -> JSON:
    """The simulation document with `plan` replaced by the pool of the plan's binding rank."""
    if not isinstance(doc, Mapping):
        raise InputError("", "a simulation document must be a JSON object")
    if "plan" not in doc:
        return dict(doc)
    if "pool" in doc:
        raise InputError("pool", "give either plan or pool, not both")
    from app.services.plans import run_plan

    try:
        result = run_plan(doc["plan"], with_levers=False)
    except InputError as exc:
        raise exc.under("plan") from None
    out = {k: v for k, v in doc.items() if k != "plan"}
    out["pool"] = {"blocks": result["blocks"], "block_size": result["block_size"]}
    out["pool_source"] = (
        f"plan: binding rank {result['binding_rank']}, {result['blocks']:,} blocks of {result['block_size']} tokens"
    )
    scheduler = dict(out.get("scheduler") or {})
    scheduler.setdefault("max_num_seqs", result["engine"]["max_num_seqs"])
    scheduler.setdefault("max_num_batched_tokens", result["engine"]["max_num_batched_tokens"])
    scheduler.setdefault("enable_prefix_caching", result["engine"]["enable_prefix_caching"])
    out["scheduler"] = scheduler
    cost, source = plan_step_cost(doc["plan"], result)
    given = out.get("cost_model")
    out["cost_model"] = {**cost, **(given if isinstance(given, Mapping) else {})}
    if isinstance(given, Mapping) and given:
        source += f"; given: {', '.join(sorted(str(k) for k in given))}"
    out["cost_source"] = source
    tier = plan_tier(result)
    if tier is not None and "kv_tier" not in out:
        out["kv_tier"] = tier
        out["pool_source"] += (f"; offload tier {result['kv_tiers'][1]['name']}: {tier['blocks']:,} blocks, "
                               f"{tier['block_load_s'] * 1e6:.1f} µs per block back")
    return out


#: Bytes one weight takes in the checkpoint, by quantization method (else the model dtype's).
_BYTES_PER_PARAM = {"fp8": 1.0, "fbgemm_fp8": 1.0, "modelopt": 1.0, "awq": 0.5, "awq_marlin": 0.5, "gptq": 0.5,
                    "gptq_marlin": 0.5, "mxfp4": 0.53, "modelopt_fp4": 0.56, "bitsandbytes": 0.5}
_DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0}


def _gpu_preset_name(plan_doc: object) -> str | None:
    gpu = plan_doc.get("gpu") if isinstance(plan_doc, Mapping) else None
    name = gpu.get("name") if isinstance(gpu, Mapping) else None
    preset = find_preset(name) if isinstance(name, str) else None
    return preset.name if preset is not None else None


def plan_step_cost(plan_doc: object, result: Mapping[str, Any]) -> tuple[JSON, str]:
    """The simulator's step cost for a plan: a roofline from its weights and KV per rank, its
    pipeline depth and its GPU preset's datasheet figures (app.core.gpu_perf); the illustrative
    8B defaults, saying why, where the plan's GPU or model shape is not known."""
    name = _gpu_preset_name(plan_doc)
    perf = gpu_perf(name) if name is not None else None
    weights = max((r.get("weights_bytes") or 0 for r in result.get("ranks") or []), default=0)
    model = result.get("model") or {}
    quant = model.get("checkpoint_quantization") or model.get("quantization")
    per_param = _BYTES_PER_PARAM.get(str(quant), _DTYPE_BYTES.get(str(model.get("dtype")), 2.0))
    if perf is None or not weights or not result.get("kv_bytes_per_token"):
        why = ("the plan names no GPU preset with sourced bandwidth" if perf is None
               else "the plan's weights or KV bytes per token are not known")
        return asdict(CostModel()), f"illustrative step cost (an 8B bf16 model on a ~1 TB/s card): {why}"
    shape = ReplicaShape(int(weights), int(result["kv_bytes_per_token"]), int(result["layout"]["pp"]), per_param)
    cost, why = roofline_cost(shape, perf.hbm_bytes_per_s, perf.bf16_flops)
    return asdict(cost), f"{why}; {name}: {perf.source}"


def plan_tier(result: Mapping[str, Any]) -> JSON | None:
    """The plan's first offload tier as the simulator's `kv_tier`: its tokens in GPU blocks, and one block's
    transfer (block_size × per-rank bytes per token over the tier's assumed link, app.core.kv_tiers)."""
    tiers = result.get("kv_tiers") or []
    if len(tiers) < 2 or not tiers[1].get("bandwidth_bytes_per_s"):
        return None
    block_size = result["block_size"]
    load_s = block_size * result["kv_bytes_per_token"] / tiers[1]["bandwidth_bytes_per_s"]
    return {"blocks": tiers[1]["tokens"] // block_size, "block_load_s": load_s}


def run_simulation(
    doc: Mapping[str, Any],
    *,
    max_work: int | None,
    progress: Callable[[float], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> JSON:
    """Run a simulation document; bad input raises InputError naming the field."""
    from app.core.sim.io import simulate_from_json

    return simulate_from_json(resolve_pool(doc), max_work=max_work, progress=progress, cancel=cancel)
