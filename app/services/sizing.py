"""Sizing (issue 13): a sizing document in, the ranked deployments that serve its target out.

Every candidate engine is planned by the one plan computation: its plan document (the `plan` of
each option, what `kvledger plan` reproduces it from) goes through `plan_inputs.build_plan` and
`app.core.plan.compute`. The search, the shared-card budget rule and the ranking are in
`app.core.sizing` / `app.core.sizing_answer`; this module resolves the document, writes the plan
documents and the JSON contract (keys named by the issue: `options`, `searched`, `near_misses`).

Speed: one engine configuration is planned once for every replica count (replicas are
independent engines) — except a MoE model's, planned at each replica count, because vLLM splits the
experts over tp × dp (``FusedMoEParallelConfig.make``, fused_moe/config.py @28be48fa9) — the TP
ranks of an estimated stage share their rows, so the plan is
computed on one rank per pipeline stage (the same ledger and admission: those ranks are the same
cells), and a configuration's plan input is built once for every KV dtype (`kv_cache_dtype` moves
only the engine field the KV geometry reads).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from app.core.errors import InputError
from app.core.exports import env_of
from app.core.gpus import compute_capability
from app.core.ledger import RankInput
from app.core.max_len import long_length_note
from app.core.nontorch import fusion_max_size_mb
from app.core.plan import PlanInput, PlanResult, compute
from app.core.report import flags
from app.core.shape import default_max_model_len
from app.core.sizing import (
    MAX_CANDIDATES,
    Candidate,
    EngineConfig,
    EngineOutcome,
    Space,
    Target,
    space_size,
)
from app.core.sizing_answer import Answer, headroom, headroom_text, missing, search
from app.core.versions import CURRENT_VLLM, rules_for
from app.schemas import validate_plan
from app.services import plan_inputs, plan_query, plans
from app.sizing_schema import SizingDocument, validate_sizing

JSON = dict[str, Any]


@dataclass(eq=False)
class Sizing:
    """A validated sizing document with what every candidate shares resolved once."""

    doc: SizingDocument
    target: Target
    space: Space
    vllm_version: str
    #: The model has MoE layers: vLLM splits the experts over tp × dp (FusedMoEParallelConfig.make,
    #: fused_moe/config.py @28be48fa9), so each replica count is planned on its own.
    per_dp: bool = False
    #: vLLM's warning for a target max_model_len above the model's length, planned with the variable set
    notes: tuple[str, ...] = ()
    _built: dict[tuple[object, ...], PlanInput] = field(default_factory=dict)

    def plan_document(self, config: EngineConfig, dp: int = 1) -> JSON:
        """The plan document of one candidate (what `kvledger plan` reproduces it from): one of
        the `engines_per_gpu` `vllm serve` processes that share the candidate's GPUs, whose
        data-parallel size is `dp // engines_per_gpu` (`vllm_dp`)."""
        d, e = self.doc, self.doc.engine
        gpu: JSON = {"name": config.gpu}
        if config.free_at_start_bytes is not None:
            gpu["free_at_start"] = config.free_at_start_bytes
        dp = vllm_dp(config, dp)
        layout: JSON = {"tp": config.tp, "pp": config.pp, **({"dp": dp} if dp > 1 else {})}
        engine: JSON = {"gpu_memory_utilization": config.gpu_memory_utilization,
                        "kv_cache_dtype": config.kv_cache_dtype, "max_model_len": self.target.max_model_len}
        optional = {"quantization": config.quantization, "max_num_batched_tokens": e.max_num_batched_tokens,
                    "max_num_seqs": e.max_num_seqs, "block_size": e.block_size if e.block_size != 16 else None,
                    "enforce_eager": e.enforce_eager or None,
                    "allow_long_max_model_len": e.allow_long_max_model_len or None}  # fmt: skip
        engine.update({k: v for k, v in optional.items() if v is not None})
        policy: JSON = {"avg_live_tokens": self.target.live_tokens}
        if d.policy.growth_reserve:
            policy["growth_reserve"] = d.policy.growth_reserve
        if d.policy.operating_reserve:
            policy["operating_reserve"] = d.policy.operating_reserve
        model = d.model.model_dump(mode="json", exclude_none=True)
        return {"model": model, "gpu": gpu, "layout": layout, "engine": engine, "policy": policy,
                "vllm_version": self.vllm_version}  # fmt: skip

    def evaluate(self, config: EngineConfig, dp: int = 1) -> EngineOutcome | str:
        try:
            return outcome_of(self.engine_result(config, dp))
        except InputError as exc:
            return f"{config.label}{f' × {dp}' if dp > 1 else ''}: {exc}"

    def engine_result(self, config: EngineConfig, dp: int = 1) -> PlanResult:
        """The plan of one engine of the configuration at `dp` replicas, on one rank per pipeline stage."""
        key = (config.gpu, config.tp, config.pp, config.engines_per_gpu, config.quantization, config.card_utilization,
               dp)  # fmt: skip
        base = self._built.get(key)
        if base is None:
            doc = self.plan_document(replace(config, kv_cache_dtype="auto"), dp)
            built = plan_inputs.build_plan(validate_plan(doc))
            ranks, stages = _one_per_stage(built)
            base = self._built[key] = replace(built, ranks=ranks, rank_stages=stages)
        plan = base
        if config.kv_cache_dtype != base.engine.kv_cache_dtype:
            plan = replace(base, engine=replace(base.engine, kv_cache_dtype=config.kv_cache_dtype))
        try:
            return compute(plan)
        except InputError as exc:
            raise exc.under("engine") if exc.field in ("kv_cache_dtype", "block_size") else exc from None


def vllm_dp(config: EngineConfig, replicas: int) -> int:
    """The `--data-parallel-size` of one process of a candidate with `replicas` engines.

    vLLM gives data-parallel rank k the devices [k × world_size, (k + 1) × world_size)
    (`get_device_indices`, vllm/v1/engine/utils.py @4dd49b06f): DP ranks never share a GPU. N
    engines per GPU are therefore N separate `vllm serve` processes on the same GPUs, each a DP
    group over the distinct GPU sets (replicas ÷ N of them) — and a MoE model's experts are split
    over that group's tp × dp only, never over the engines that share a card."""
    return max(1, replicas // config.engines_per_gpu)


def _one_per_stage(plan: PlanInput) -> tuple[tuple[RankInput, ...], tuple[int, ...] | None]:
    """The ranks of an estimated engine with the TP ranks of a stage (the same cell objects,
    `estimate_ranks`) kept once, and each kept rank's PP stage (None at PP 1): the ledger and the
    minimum over ranks are the same. Two stages with equal cells stay apart: their layer counts,
    and so their blocks, can differ (app.core.stage_kv)."""
    tp, pp = plan.layout.tp, plan.layout.pp
    whole = len(plan.ranks) % (tp * pp) == 0
    out: list[RankInput] = []
    stages: list[int] = []
    for i, rank in enumerate(plan.ranks):
        stage = (i // tp) % pp if whole else 0
        if not out or not _same(rank, out[-1]) or stage != stages[-1]:
            out.append(rank)
            stages.append(stage)
    return tuple(out), (tuple(stages) if pp > 1 and whole else None)


def _same(a: RankInput, b: RankInput) -> bool:
    return all(getattr(a, f) is getattr(b, f) for f in ("total", "free_at_start", "weights", "non_torch",
                                                        "cuda_graphs", "activation", "kv_room"))  # fmt: skip


def outcome_of(result: PlanResult) -> EngineOutcome:
    adm = result.admission
    problems = [msg for lg in result.ledgers if not lg.will_start for _, msg in lg.problems]
    return EngineOutcome(
        starts=all(lg.will_start for lg in result.ledgers),
        fits_max_model_len=adm.fits_max_model_len and adm.servable_max_model_len,
        tokens=adm.tokens,
        schedulable_tokens=adm.schedulable_tokens,
        concurrency_ceiling=adm.concurrency_ceiling or 0,
        max_num_seqs=result.plan.engine.max_num_seqs,
        max_concurrency_at_max_model_len=round(adm.max_concurrency_at_max_model_len, 4),
        largest_max_model_len=adm.largest_max_model_len,
        start_problem=problems[0] if problems else "",
        no_kv_room=any(lg.kv.bytes <= 0 for lg in result.ledgers),
    )


def resolve(doc: object) -> Sizing:
    """Validate a sizing document and resolve its model, max_model_len and search space."""
    d = validate_sizing(doc)
    version = d.vllm_version or CURRENT_VLLM
    try:
        rules = rules_for(version)
    except InputError as exc:
        raise InputError("vllm_version", exc.message) from None
    allow_long = d.engine.allow_long_max_model_len
    probe = {"model": d.model.model_dump(mode="json", exclude_none=True), "gpu": {"total": 2**40},
             "vllm_version": version, "engine": {"max_model_len": d.target.max_model_len or 1,
                                                 "allow_long_max_model_len": allow_long}}  # fmt: skip
    try:
        base = plan_inputs.build_plan(validate_plan(probe))
    except InputError as exc:  # the probe carries the target's length: its error is the target's
        if exc.field != "engine.max_model_len":
            raise
        message = exc.message.removesuffix(plan_inputs.ALLOW_LONG_HOW)  # the plan page's how, said for sizing
        how = _ALLOW_LONG_HOW if message != exc.message else ""
        raise InputError("target.max_model_len", message + how) from None
    shape = base.model.shape
    mml = d.target.max_model_len or (default_max_model_len(shape)[0] if shape else None)
    if mml is None:
        raise InputError("target.max_model_len", "required: a model given as bytes per token states no length")
    if d.target.avg_live_tokens and d.target.avg_live_tokens > mml:
        raise InputError("target.avg_live_tokens", f"{d.target.avg_live_tokens:,} is more than max_model_len {mml:,}")
    o = d.options
    space = Space(
        gpus=d.presets(), tp=o.tp or plans.allowed_tp_for(base, limit=d.max_gpus), pp=o.pp,
        kv_cache_dtype=o.kv_cache_dtype, quantization=o.quantization,
        gpu_memory_utilization=o.gpu_memory_utilization or [rules.default_gpu_memory_utilization],
        engines_per_gpu=o.engines_per_gpu, max_gpus=d.max_gpus,
    )  # fmt: skip
    if (n := space_size(space)) > MAX_CANDIDATES:
        raise InputError("options", f"{n:,} candidates is more than one search takes ({MAX_CANDIDATES:,}): "
                                    "narrow gpus, max_gpus or the options lists")  # fmt: skip
    target = Target(mml, d.target.concurrency, d.target.avg_live_tokens, d.target.tokens)
    long_note = long_length_note(mml, shape.max_len) if allow_long and shape and shape.max_len else None
    return Sizing(d, target, space, version,
                  per_dp=bool(shape and shape.num_experts) or _fusion_in(space, version),
                  notes=(long_note,) if long_note else ())  # fmt: skip


#: How a sizing sets VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, said after the target's refusal.
_ALLOW_LONG_HOW = (
    "; to size runs started with it, tick 'Allow long max model len' on the size page (allow_long=true in its "
    "URL), set engine.allow_long_max_model_len: true in the sizing document or pass --allow-long-max-model-len "
    "to kvledger size"
)


def _fusion_in(space: Space, version: str) -> bool:
    """Whether a candidate's non-torch row depends on its replica count: the FlashInfer all-reduce fusion
    workspace, which vLLM builds only at data_parallel_size 1 (app.core.nontorch `fusion_max_size_mb`), so
    each replica count is then planned on its own, as for MoE models."""
    v = rules_for(version).version
    return any(fusion_max_size_mb(v, compute_capability(name), tp) is not None for (name, _), tp in
               itertools.product(space.gpus, space.tp))  # fmt: skip


def plan_url(doc: JSON) -> str:
    """The plan page of a candidate's plan document (its canonical what-if query), TP and PP
    always stated: a plan URL without them opens at the smallest layout that starts
    (app.services.layout_choice), so a TP1 row's link would open another plan."""
    query = plan_query.query_from_plan(doc)
    layout = doc.get("layout")
    for name in ("tp", "pp"):
        query.setdefault(name, str(layout.get(name, 1) if isinstance(layout, dict) else 1))
    return "/plan?" + urlencode(sorted(query.items()))


def compromises(config: EngineConfig) -> list[str]:
    out = []
    if config.quantization:
        out.append(f"weights --quantization {config.quantization}")
    if config.kv_cache_dtype != "auto":
        out.append(f"KV cache {config.kv_cache_dtype}")
    if config.engines_per_gpu > 1:
        out.append(f"{config.engines_per_gpu} engines share each GPU")
    return out


def candidate_json(sizing: Sizing, cand: Candidate, miss: str | None) -> JSON:
    c, o = cand.config, cand.outcome
    doc = sizing.plan_document(c, cand.dp)
    full = compute(plan_inputs.build_plan(validate_plan(doc)))
    return {
        "gpu": c.gpu, "gpus": cand.gpus, "tp": c.tp, "pp": c.pp, "dp": cand.dp, "engines_per_gpu": c.engines_per_gpu,
        "kv_cache_dtype": c.kv_cache_dtype, "quantization": c.quantization,
        "gpu_memory_utilization": c.gpu_memory_utilization, "card_utilization": c.card_utilization,
        "tokens": o.tokens, "schedulable_tokens": o.schedulable_tokens,
        "max_concurrency_at_max_model_len": o.max_concurrency_at_max_model_len,
        "concurrency_ceiling": cand.concurrency_ceiling, "concurrency": cand.concurrency,
        "max_num_seqs": o.max_num_seqs, "starts": o.starts, "fits_max_model_len": o.fits_max_model_len,
        # `flags` are one process's; `processes` of them run on the same GPUs (each its own --port)
        "processes": c.engines_per_gpu, "data_parallel_size": vllm_dp(c, cand.dp),
        "headroom": round(headroom(cand, sizing.target), 4) if miss is None else None,
        "headroom_text": headroom_text(headroom(cand, sizing.target) if miss is None else None),
        "meets_target": miss is None, "missing": miss, "label": c.label, "compromises": compromises(c),
        "flags": flags(full), "env": env_of({"engine": doc["engine"]}), "plan": doc, "url": plan_url(doc),
    }  # fmt: skip


def _message(sizing: Sizing, answer: Answer) -> str:
    t = sizing.target
    want = [f"max_model_len {t.max_model_len:,}"]
    if t.concurrency is not None:
        want.append(f"{t.concurrency:,} concurrent requests at {t.live_tokens:,} live tokens")
    if t.tokens is not None:
        want.append(f"{t.tokens:,} schedulable tokens")
    if answer.options:
        best = answer.options[0]
        return f"{best.config.label} × {best.dp}: {best.gpus} GPUs serve " + ", ".join(want)
    near = answer.near_misses[0][1] if answer.near_misses else "no configuration could be planned"
    return f"no deployment within max_gpus={sizing.space.max_gpus} serves " + ", ".join(want) + f"; closest: {near}"


def _point(sizing: Sizing, c: Candidate) -> JSON:
    return {"gpus": c.gpus, "concurrency": c.concurrency, "label": f"{c.config.label} × {c.dp}",
            "url": plan_url(sizing.plan_document(c.config, c.dp))}


def answer_json(sizing: Sizing, answer: Answer) -> JSON:
    t, limit = sizing.target, sizing.doc.limit
    return {
        "target": {"max_model_len": t.max_model_len, "concurrency": t.concurrency,
                   "avg_live_tokens": t.live_tokens, "tokens": t.tokens},
        "vllm_version": sizing.vllm_version, "max_gpus": sizing.space.max_gpus,
        "message": _message(sizing, answer), "notes": list(sizing.notes),
        "options": [candidate_json(sizing, c, None) for c in answer.options[:limit]],
        "feasible": len(answer.options), "searched": answer.searched, "evaluated": answer.evaluated,
        "skipped": answer.skipped,
        "near_misses": [candidate_json(sizing, c, m) for c, m in answer.near_misses],
        "excluded": [{"label": c.label, "reason": r} for c, r in answer.excluded[:20]],
        "excluded_count": len(answer.excluded),
        "pareto": [_point(sizing, c) for c in answer.pareto],
        "by_gpu": {gpu: [{"gpus": c.gpus, "concurrency": c.concurrency, "label": f"{c.config.label} × {c.dp}"}
                         for c in cands] for gpu, cands in answer.by_gpu.items()},
    }  # fmt: skip


def run_size(doc: object) -> JSON:
    """`kvledger size` / `POST /api/v1/size`: validate, search and answer."""
    sizing = resolve(doc)
    return answer_json(sizing, search(sizing.space, sizing.target, sizing.evaluate,
                                      sizing.evaluate if sizing.per_dp else None))


__all__ = ["Sizing", "missing", "resolve", "run_size"]
