"""The application service over the pure core: documents in, JSON results out.

The CLI, the JSON API and the pages all come through here. It resolves the model (inline
config, catalogue entry or bare bytes per token), fills what the document leaves out with
vLLM's defaults for the version the plan names, builds measured or estimated rank rows, runs
the core and returns the JSON contract. Errors are `InputError`s naming the field.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.core.architectures import architecture_notes
from app.core.checks import plan_checks
from app.core.dp_layout import DPLayout, layout_notes
from app.core.errors import InputError
from app.core.estimates import EstimateContext, estimate_ranks
from app.core.gpus import find_preset
from app.core.kvspec import rank_kv
from app.core.ledger import Cell, RankInput
from app.core.lora import LoraSpec, check_lora
from app.core.model_config import shape_from_config
from app.core.nontorch import Interconnect
from app.core.plan import (
    Engine,
    Layout,
    ModelInput,
    PlanInput,
    PlanResult,
    Policy,
    check_rank_count,
    compute,
    estimate_context,
)
from app.core.report import result_to_dict
from app.core.shape import ModelShape, online_fp8_shape
from app.core.start_levers import start_levers
from app.core.versions import CURRENT_VLLM, check_block_size, rules_for, scheduler_defaults
from app.core.vision import vision_geometry
from app.core.whatif import Lever, levers, set_engine, set_max_num_batched_tokens, set_quantization, set_tp
from app.ingest.vllm_serve import serve_notes
from app.schemas import PlanDocument, RankDoc, WhatIfDoc, validate_plan, validate_whatif
from app.services.plan_layers import kv_offload, make_dp_layout, node, prefix_caching, with_dp_weights
from app.services.prepared import PureCache
from app.services.speculative_doc import speculative_spec

JSON = dict[str, Any]
LogReader = Callable[[str], str]


def resolve_model(doc: PlanDocument) -> ModelInput:
    """The model input of a document (catalogue entries pin their config's sha256)."""
    spec = doc.model
    if spec is None:
        raise InputError("model", "give model: {config: …}, {catalogue: name} or {kv_bytes_per_token: N}")
    if spec.kv_bytes_per_token is not None:
        return ModelInput(kv_bytes_per_token=spec.kv_bytes_per_token, name=spec.name, source="kv_bytes_per_token")
    index = spec.safetensors_index.model_dump() if spec.safetensors_index is not None else None
    if spec.catalogue is not None:
        from app.ingest.catalogue import get_model

        try:
            entry = get_model(spec.catalogue)
        except KeyError as exc:
            raise InputError("model.catalogue", str(exc.args[0]) if exc.args else "unknown model") from None
        shape = _catalogue_shape(entry.slug) if index is None else _shape(entry.config, "model.catalogue", index)
        return ModelInput(
            shape=shape, name=spec.name or entry.hf_id, source=f"catalogue:{entry.slug}", sha256=entry.sha256,
            multimodal="vision_config" in entry.config, vision=vision_geometry(entry.config),
        )  # fmt: skip
    config = spec.config or {}
    sha = hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    name = spec.name or _str(config.get("_name_or_path"))
    return ModelInput(
        shape=_shape(config, "model.config", index),
        name=name,
        source="config",
        sha256=sha,
        multimodal="vision_config" in config,
        vision=vision_geometry(config),
    )


@functools.lru_cache(maxsize=128)
def _catalogue_shape(slug: str) -> ModelShape:
    """A catalogue model's shape, parsed once (the catalogue is read-only package data); exact
    weights from the checkpoint's total_size where the catalogue pins it."""
    from app.ingest.catalogue import get_model

    entry = get_model(slug)
    pinned = {"metadata": {"total_size": entry.index_total_bytes}} if entry.index_total_bytes else None
    return _shape(entry.config, "model.catalogue", pinned)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _shape(config: Mapping[str, object], field: str, index: Mapping[str, object] | None = None) -> ModelShape:
    try:
        return shape_from_config(config, index)
    except InputError as exc:
        raise _rooted(exc, field) from None


def _rooted(exc: InputError, field: str) -> InputError:
    """The config reader names fields from the document's root (``model.config.X``, ``model.
    safetensors_index.Y``, ``layout.pp``): keep those, re-root a catalogue config's under it."""
    if exc.field.startswith("model.config") and field != "model.config":
        return InputError(field + exc.field.removeprefix("model"), exc.message)
    if exc.field.startswith(("model.", "layout.", "engine.")):
        return exc
    return exc.under(field)


def _measured(value: int | None, note: str = "") -> Cell | None:
    return None if value is None else Cell(value, "measured", note)


def _ranks_from_doc(ranks: list[RankDoc]) -> tuple[RankInput, ...]:
    """The measured ranks; equal values share one Cell object, so identical ranks are built from
    the same cells and the ledger works each distinct rank out once (`ledger.work_out`)."""
    cells: dict[int | None, Cell | None] = {None: None}
    rooms: dict[int | None, Cell | None] = {None: None}

    def cell(value: int | None) -> Cell | None:
        found = cells.get(value)
        if found is None and value is not None:
            found = cells[value] = Cell(value, "measured")
        return found

    out = []
    for i, rank in enumerate(ranks):
        room = rooms.get(rank.kv_room)
        if room is None and rank.kv_room is not None:
            room = rooms[rank.kv_room] = Cell(rank.kv_room, "measured", "measured KV room")
        out.append(RankInput(
            label=rank.label or str(i), total=cell(rank.total), free_at_start=cell(rank.free_at_start),
            weights=cell(rank.weights), non_torch=cell(rank.non_torch), cuda_graphs=cell(rank.cuda_graphs),
            activation=cell(rank.activation), kv_room=room,
        ))  # fmt: skip
    return tuple(out)


def build_plan(doc: PlanDocument, read_log: LogReader | None = None) -> PlanInput:
    """Resolve a validated document into the core's plan input (defaults filled in)."""
    plan, from_log = build_base_plan(doc, read_log)
    return _apply_whatif(_merged(from_log, doc.whatif), plan)


def build_base_plan(doc: PlanDocument, read_log: LogReader | None = None) -> tuple[PlanInput, WhatIfDoc | None]:
    """`build_plan` before the document's own what-if is applied (the part a slider tick reuses),
    and the what-if its log adds (settings given beside a log that differ from the run's)."""
    if doc.from_log is None:
        if doc.ranks:
            layout_in = Layout(tp=doc.layout.tp, pp=doc.layout.pp, dp=doc.layout.dp)
            check_rank_count(layout_in, len(doc.ranks), doc.ranks_partial)
        return _base_plan(doc), None
    from app.services.evidence import document_from_log

    logged = document_from_log(doc, read_log)
    return _base_plan(logged), logged.whatif


def _merged(logged: WhatIfDoc | None, own: WhatIfDoc | None) -> WhatIfDoc | None:
    """The document's own what-if over the one its log adds (its own values win, as
    `evidence.document_from_log` merges them)."""
    if logged is None or own is None:
        return own or logged
    return logged.model_copy(update=own.model_dump(exclude_none=True))


def _base_plan(doc: PlanDocument) -> PlanInput:
    model = _quantized(resolve_model(doc), doc.engine.quantization)
    version = doc.vllm_version or CURRENT_VLLM
    gpu_total = _gpu_total(doc)
    engine_doc = doc.engine
    max_model_len = engine_doc.max_model_len or (model.shape.max_position_embeddings if model.shape else None)
    if max_model_len is None:
        raise InputError("engine.max_model_len", "required: the model does not state max_position_embeddings")
    util, mnbt, seqs, _ = _engine_settings(doc, max_model_len)
    engine = Engine(
        gpu_memory_utilization=util,
        kv_cache_dtype=engine_doc.kv_cache_dtype,
        block_size=engine_doc.block_size,
        max_model_len=max_model_len,
        max_num_batched_tokens=mnbt,
        max_num_seqs=seqs,
        kv_cache_memory_bytes=engine_doc.kv_cache_memory_bytes,
        enforce_eager=engine_doc.enforce_eager,
        quantization=engine_doc.quantization,
        num_gpu_blocks_override=engine_doc.num_gpu_blocks_override,
        disable_hybrid_kv_cache_manager=engine_doc.disable_hybrid_kv_cache_manager,
        lora=_lora(doc, model, version),
        lora_in_run=_lora(doc, model, version) if doc.ranks else None,
        speculative=speculative_spec(engine_doc.speculative, model.shape),
        kv_offload=kv_offload(doc, version),
        enable_prefix_caching=prefix_caching(doc, version),
        async_scheduling=engine_doc.async_scheduling,
        max_model_len_assumed=engine_doc.max_model_len is None,
    )
    layout = Layout(
        tp=doc.layout.tp, pp=doc.layout.pp, dp=doc.layout.dp, dcp=doc.layout.dcp,
        expert_parallel=doc.layout.expert_parallel, interconnect=_interconnect(doc),
    )  # fmt: skip
    check_block_size(engine.block_size, version, attention=model.shape is None or model.shape.attention_layers > 0)
    dp_layout = make_dp_layout(layout, model, version)
    policy = Policy(
        growth_reserve=doc.policy.growth_reserve,
        operating_reserve_bytes=doc.policy.operating_reserve,
        avg_live_tokens=doc.policy.avg_live_tokens,
        free_spread_threshold_bytes=doc.policy.free_spread_threshold,
        activation_points=tuple((int(x), int(y)) for x, y in doc.policy.activation_points),
    )
    if doc.ranks:
        ranks = _ranks_from_doc(doc.ranks)
        ranks, estimated = _fill_missing_rows(ranks, model, layout, engine, version)
    else:
        ranks = _estimated_ranks(doc, model, layout, engine, version, dp_layout)
        estimated = True
    notes: tuple[str, ...] = tuple(doc.notes)
    if doc.serve is not None or doc.vllm_config is not None:
        notes += tuple(serve_notes(doc.model_dump(include={"serve", "vllm_config"}, exclude_none=True)))
    notes = (*notes, *_assumption_notes(doc), *layout_notes(dp_layout))
    if doc.model is not None and doc.model.config is not None:
        notes = (*notes, *architecture_notes(doc.model.config, version))
    return PlanInput(model, layout, engine, policy, ranks, version, gpu_total, estimated, notes, node(doc))


def _lora(doc: PlanDocument, model: ModelInput, version: str) -> LoraSpec | None:
    """The document's ``engine.lora`` as the core's spec, refused where vLLM refuses it."""
    lora = doc.engine.lora
    if lora is None:
        return None
    if model.shape is None:
        raise InputError("engine.lora", "sizing LoRA slots needs the model's config.json (model.config or catalogue)")
    spec = LoraSpec(lora.max_loras, lora.max_lora_rank, lora.max_cpu_loras,
                    tuple(lora.target_modules) if lora.target_modules is not None else None)  # fmt: skip
    rules = rules_for(version)
    check_lora(spec, rules.version, rules.label, model.shape)
    return spec


def _gpu_total(doc: PlanDocument) -> int | None:
    return doc.gpu.total if doc.gpu else max((r.total or 0 for r in doc.ranks or []), default=0) or None


def _engine_settings(doc: PlanDocument, max_model_len: int | None = None) -> tuple[float, int, int, str]:
    """Utilization, max_num_batched_tokens, max_num_seqs and what was assumed: the document's own,
    else vLLM's defaults for its version (`rules_for`), engine, GPU and max_model_len
    (`scheduler_defaults`). The one defaults rule."""
    rules = rules_for(doc.vllm_version or CURRENT_VLLM)
    mml = max_model_len or doc.engine.max_model_len or 2**31
    default_mnbt, default_seqs, note = scheduler_defaults(
        rules.version, rules.version >= (0, 8, 0), _gpu_total(doc), doc.gpu.name if doc.gpu else None, mml
    )
    engine = doc.engine
    return (
        engine.gpu_memory_utilization or rules.default_gpu_memory_utilization,
        engine.max_num_batched_tokens or default_mnbt,
        engine.max_num_seqs or default_seqs,
        note,
    )


def engine_defaults(doc: object, prepared: Prepared | None = None) -> dict[str, float]:
    """The engine values a plan document runs with where a what-if leaves them unset, by document
    path: its own (or its what-if's) settings, else vLLM's defaults (`_engine_settings`). With
    `prepared`, the validated document before its what-if is reused."""
    if prepared is not None and isinstance(doc, Mapping):
        whatif = validate_whatif(doc.get("whatif"))
        made = prepared.cache.get_or_make(("doc", prepared.key), lambda: _logged(_without_whatif(doc)), _weight)
        assert isinstance(made, PlanDocument)
        validated, whatif = made, _merged(made.whatif, whatif)
    else:
        validated = _logged(doc)
        whatif = validated.whatif
    util, mnbt, _, _ = _engine_settings(validated)
    if whatif is not None:
        util = whatif.gpu_memory_utilization or util
        mnbt = whatif.max_num_batched_tokens or mnbt
    return {"engine.gpu_memory_utilization": util, "engine.max_num_batched_tokens": float(mnbt)}


def _logged(doc: object) -> PlanDocument:
    """The validated document, its `from_log` (if any) turned into measured ranks."""
    validated = validate_plan(doc)
    if validated.from_log is not None:
        from app.services.evidence import document_from_log

        validated = document_from_log(validated, None)
    return validated


def _interconnect(doc: PlanDocument) -> Interconnect:
    """The GPUs' interconnect: given, else the preset's usual one, else unknown (taken as NVLink)."""
    if doc.gpu is None:
        return "unknown"
    if doc.gpu.interconnect is not None:
        return doc.gpu.interconnect
    preset = find_preset(doc.gpu.name) if doc.gpu.name else None
    return preset.interconnect if preset else "unknown"


def _assumption_notes(doc: PlanDocument) -> tuple[str, ...]:
    """What the plan assumed where the document is silent (the version's rules, vLLM's defaults)."""
    notes = []
    if doc.vllm_version is None:
        notes.append(f"no vllm_version given: vLLM {CURRENT_VLLM}'s rules assumed (the current release)")
    index = doc.model.safetensors_index if doc.model is not None else None
    if index is not None:
        size = index.metadata.total_size
        notes.append(f"weights from the checkpoint's model.safetensors.index.json: total_size {size:,} B "
                     f"({size / 2**30:.2f} GiB), split per rank by vLLM's sharding")
    if doc.gpu is not None and doc.gpu.name and find_preset(doc.gpu.name) and doc.gpu.total == _preset_total(doc):
        preset = find_preset(doc.gpu.name)
        assert preset is not None
        notes.append(f"GPU total {preset.total_bytes / 2**30:.2f} GiB from the {preset.name} preset ({preset.source})")
    return tuple(notes)


def _preset_total(doc: PlanDocument) -> int | None:
    preset = find_preset(doc.gpu.name) if doc.gpu and doc.gpu.name else None
    return preset.total_bytes if preset else None


def _quantization_notes(plan: PlanInput) -> PlanInput:
    """Online fp8 before vLLM 0.14 held every full-precision weight until all had loaded
    (fixed by vllm-project/vllm PR #31914, merged 2026-01-07; release assumed 0.14.0)."""
    if plan.engine.quantization is None or rules_for(plan.vllm_version).version >= (0, 14, 0):
        return plan
    note = ("vLLM before 0.14 loads every weight at full precision before quantizing to fp8: the unquantized "
            "weights must fit in free memory at start (PR #31914 streams them since)")
    return replace(plan, notes=(*plan.notes, note))


def _quantized(model: ModelInput, quantization: str | None) -> ModelInput:
    """The model as vLLM holds it under `--quantization` (only fp8 on an unquantized checkpoint)."""
    if quantization is None:
        return model
    if model.shape is None:
        raise InputError("engine.quantization", "needs the model's config.json (or a catalogue model) to size weights")
    return replace(model, shape=_online_fp8_shape(model.shape))


@functools.lru_cache(maxsize=64)
def _online_fp8_shape(shape: ModelShape) -> ModelShape:
    """online_fp8_shape is pure over a frozen shape: a sizing search (or a slider) quantizes once."""
    return online_fp8_shape(shape)


def _fill_missing_rows(
    ranks: tuple[RankInput, ...], model: ModelInput, layout: Layout, engine: Engine, version: str
) -> tuple[tuple[RankInput, ...], bool]:
    """Estimate the rows a measured rank leaves out (e.g. nvidia-smi gives only total and free).

    Only when the model's shape is known and the rank has no measured KV room; every filled
    cell is marked estimated. Without a shape, a missing row counts as zero, as written.
    """
    if model.shape is None:
        return ranks, False
    ctx = estimate_context(layout, engine, version, vision=model.vision)
    out, filled = [], False
    template: tuple[RankInput, ...] = ()
    for i, rank in enumerate(ranks):
        rows = ("weights", "non_torch", "cuda_graphs", "activation")
        if rank.kv_room is not None or rank.total is None or all(getattr(rank, r) is not None for r in rows):
            out.append(rank)
            continue
        template = template or _estimate_ranks(model.shape, ctx, rank.total.bytes, None)
        guess = template[i % len(template)]
        out.append(replace(rank, **{r: getattr(rank, r) or getattr(guess, r) for r in rows}))
        filled = True
    return tuple(out), filled


def _estimated_ranks(
    doc: PlanDocument, model: ModelInput, layout: Layout, engine: Engine, version: str, dp_layout: DPLayout
) -> tuple[RankInput, ...]:
    gpu = doc.gpu
    assert gpu is not None  # guaranteed by PlanDocument validation
    if model.shape is None:
        raise InputError("gpu", "estimated rows need the model's shape: give model.config or model.catalogue")
    ctx = estimate_context(layout, engine, version, vision=model.vision, gpu_name=gpu.name)
    ranks = with_dp_weights(_estimate_ranks(model.shape, ctx, gpu.total, gpu.free_at_start), model, dp_layout,
                            ctx.mxfp4_backend)
    if gpu.count and gpu.count != len(ranks):
        ranks = tuple(replace(ranks[i % len(ranks)], label=str(i)) for i in range(gpu.count))
    return ranks


@functools.lru_cache(maxsize=256)
def _estimate_ranks(
    shape: ModelShape, ctx: EstimateContext, total_bytes: int, free_at_start: int | None
) -> tuple[RankInput, ...]:
    """estimate_ranks is pure over frozen inputs: a utilization slider tick reuses the rows."""
    return estimate_ranks(shape, ctx, total_bytes, free_at_start)


def _apply_whatif(whatif: WhatIfDoc | None, plan: PlanInput) -> PlanInput:
    if whatif is None:
        return _quantization_notes(plan)
    if whatif.tp is not None:
        plan = set_tp(plan, whatif.tp).plan
    if whatif.max_num_batched_tokens is not None:
        plan = set_max_num_batched_tokens(plan, whatif.max_num_batched_tokens).plan
    if whatif.gpu_memory_utilization is not None:
        plan = set_engine(plan, gpu_memory_utilization=whatif.gpu_memory_utilization).plan
    if whatif.quantization is not None:
        plan = set_quantization(plan, whatif.quantization).plan
    if whatif.max_loras is not None or whatif.max_lora_rank is not None:
        plan = _lora_whatif(plan, whatif)
    return _quantization_notes(plan)


def _lora_whatif(plan: PlanInput, whatif: WhatIfDoc) -> PlanInput:
    """LoRA slots moved on top of the measured run (its rows keep the run's LoRA, ``lora_in_run``)."""
    base = plan.engine.lora or LoraSpec()
    spec = replace(base, max_loras=whatif.max_loras or base.max_loras,
                   max_lora_rank=whatif.max_lora_rank or base.max_lora_rank)  # fmt: skip
    if plan.model.shape is None:
        raise InputError("whatif.max_loras", "sizing LoRA slots needs the model's config.json")
    rules = rules_for(plan.vllm_version)
    try:
        check_lora(spec, rules.version, rules.label, plan.model.shape)
    except InputError as exc:
        raise InputError(exc.field.replace("engine.lora.", "whatif."), exc.message) from None
    return replace(plan, engine=replace(plan.engine, lora=spec))


#: What a `Prepared` cache holds: a base plan (before the what-if) with the what-if its log adds,
#: or a validated document.
Preparation = tuple[PlanInput, WhatIfDoc | None] | PlanDocument


@dataclass(frozen=True)
class Prepared:
    """Where `run_plan` and `engine_defaults` may reuse the work a document gives before its
    what-if: a pure cache and this document's key in it. The key must determine the document
    without its `whatif` section (the web uses the base document's content id and the query's
    other values; see `app.services.prepared`)."""

    cache: PureCache[Preparation]
    key: Hashable


def _without_whatif(doc: Mapping[str, object]) -> dict[str, object]:
    return {k: v for k, v in doc.items() if k != "whatif"}


def _weight(value: Preparation) -> int:
    return len((value[0] if isinstance(value, tuple) else value).ranks or ()) + 1


def plan_input(doc: object, read_log: LogReader | None = None, prepared: Prepared | None = None) -> PlanInput:
    """`build_plan(validate_plan(doc))`; with `prepared`, only the what-if is validated and
    applied when the rest of the document was built before under the same key."""
    if prepared is None or not isinstance(doc, Mapping):
        return build_plan(validate_plan(doc), read_log)
    whatif = validate_whatif(doc.get("whatif"))

    def make() -> tuple[PlanInput, WhatIfDoc | None]:
        return build_base_plan(validate_plan(_without_whatif(doc)), read_log)

    made = prepared.cache.get_or_make(("plan", prepared.key), make, _weight)
    assert isinstance(made, tuple)
    base, logged = made
    return _apply_whatif(_merged(logged, whatif), base)


def allowed_tp_for(plan: PlanInput, limit: int = 64) -> tuple[int, ...]:
    """TP degrees vLLM accepts for the plan's model (every valid degree up to limit)."""
    shape = plan.model.shape
    if shape is None:
        return (1, 2, 4, 8)
    return _allowed_tp(shape, plan.layout.pp, plan.engine.kv_cache_dtype, plan.engine.block_size, limit)


@functools.lru_cache(maxsize=256)
def _allowed_tp(shape: ModelShape, pp: int, dtype: str, block_size: int, limit: int) -> tuple[int, ...]:
    out = []
    for tp in range(1, limit + 1):
        try:
            rank_kv(shape, tp=tp, pp=pp, kv_cache_dtype=dtype, block_size=block_size)
        except InputError:
            continue
        out.append(tp)
    return tuple(out)


def _lever_json(lv: Lever) -> JSON:
    return {
        "knob": lv.knob,
        "change": lv.change,
        "tokens_before": lv.tokens_before,
        "tokens_after": lv.tokens_after,
        "tokens_gained": lv.tokens_gained,
        "will_start": lv.will_start,
        "caveats": list(lv.caveats),
    }


def run_plan(
    doc: object,
    read_log: LogReader | None = None,
    with_levers: bool = True,
    check: bool = False,
    prepared: Prepared | None = None,
) -> JSON:
    """Validate, resolve and compute a plan document; the JSON result (with ``checks`` when asked).
    With `prepared`, the document's part before the what-if is reused (`plan_input`)."""
    plan = plan_input(doc, read_log, prepared)
    try:
        result = compute(plan)
    except InputError as exc:
        raise exc.under("engine") if exc.field in ("kv_cache_dtype", "block_size") else exc from None
    tps = allowed_tp_for(plan)
    lever_json = [_lever_json(lv) for lv in levers(lever_plan(result), tps)] if with_levers else []
    out = result_to_dict(result, lever_json)
    out["allowed_tp"] = list(tps)
    # A plan that will not start: what would make it start, each with its result (issue 17 item 4).
    out["start_levers"] = (
        [] if out["will_start"]
        else [{**_lever_json(sl.lever), "sets": dict(sl.sets)} for sl in start_levers(result, tps, lever_plan(result))]
    )
    if check:
        out["checks"] = plan_checks(result)
        out["checks_pass"] = all(c["ok"] for c in out["checks"])
    return out


def _total_bytes(rank: RankInput) -> int:
    return rank.total.bytes if rank.total is not None else 0


def lever_plan(result: PlanResult, keep: int = 8) -> PlanInput:
    """The plan reduced to the ranks that can bind under a knob change, for pricing levers fast.

    A knob moves every rank's KV by the same amount (or in proportion to its total memory), so
    only the ranks with the least KV — and the one with the least total memory — can bind.
    """
    plan = result.plan
    if len(plan.ranks) <= 2 * keep:
        return plan
    order = sorted(range(len(plan.ranks)), key=lambda i: result.ledgers[i].kv.bytes)[:keep]
    smallest = min(range(len(plan.ranks)), key=lambda i: _total_bytes(plan.ranks[i]))
    chosen = sorted({*order, smallest})
    return replace(plan, ranks=tuple(plan.ranks[i] for i in chosen))


def allowed_tp(doc: object) -> list[int]:
    return list(allowed_tp_for(build_plan(validate_plan(doc))))


# --- imports and comparison (used by the pages and the API) -----------------------------------


def catalogue_search(q: str, limit: int = 20) -> list[JSON]:
    """Catalogue models matching a query (all models for an empty query)."""
    from app.ingest.catalogue import list_models, search_models

    entries = search_models(q, limit) if q.strip() else list_models()[:limit]
    return [{"slug": e.slug, "name": e.name, "hf_id": e.hf_id, "evidence": e.evidence} for e in entries]


def import_log(text: str, model_config: Mapping[str, object] | None = None) -> JSON:
    """The parsed log (issue-3 JSON) plus, per run, residuals against the model when it is known."""
    from app.services.evidence import bytes_per_token_from_run, catalogue_config_for, parse_log_text, residuals

    parsed = parse_log_text(text)
    for run in parsed.get("runs", []):
        settings = run.get("settings") or {}
        config = model_config
        if config is None:
            found = catalogue_config_for(settings.get("model"))
            config = found[1] if found else None
            run["catalogue_model"] = found[0] if found else None
        try:
            res = residuals(run, config)
        except InputError as exc:
            res = {"ranks": [], "engine": None, "findings": []}
            run.setdefault("findings", []).append({"code": "model_mismatch", "message": str(exc), "line": None})
        run["residuals"] = res
        run["implied_kv_bytes_per_token"] = bytes_per_token_from_run(run)
        run.setdefault("findings", []).extend(res["findings"])
    return parsed


def read_log(
    text: str, model_config: Mapping[str, object] | None = None, layout: Mapping[str, int] | None = None,
    model: Mapping[str, object] | None = None,
) -> tuple[JSON, list[tuple[JSON | None, str | None]]]:
    """The parsed log (`import_log`) and, per run, its plan document or why there is none
    (``layout``: the TP/PP given with the import, for a log that does not state them; ``model``:
    the model section chosen for every run, catalogue or config, ``model_config`` its config).
    Pure and picklable in and out: the web runs it in a child process (`web/isolation.py`)."""
    parsed = import_log(text, model_config)
    docs: list[tuple[JSON | None, str | None]] = []
    for index in range(len(parsed.get("runs") or [])):
        try:
            docs.append((plan_from_log_run(parsed, index, model_config, layout, model), None))
        except InputError as exc:
            docs.append((None, exc.message))
    return parsed, docs


def plan_from_log_run(
    parsed: Mapping[str, object],
    run_index: int = 0,
    model_config: Mapping[str, object] | None = None,
    layout: Mapping[str, int] | None = None,
    model: Mapping[str, object] | None = None,
) -> JSON:
    """A plan document with the measured ranks of one run of a parsed log (``layout``: the TP/PP
    given with the import when the log does not state them).

    Only that run is converted and validated: the cost is one run's, whatever the log's size
    (converting the whole parsed log for each run made an import quadratic in its runs).
    """
    from app.services.evidence import document_from_log, log_run
    from app.services.imported_runs import require_length

    run = log_run(parsed, run_index)
    doc: JSON = {"from_log": {"runs": [_plain(run)]}, "log_run": 0}
    if layout:
        doc["layout"] = dict(layout)
    if model is not None:
        named = (run.get("settings") or {}).get("model")
        doc["model"] = {**_plain(model), **({"name": named} if isinstance(named, str) and "name" not in model else {})}
    elif model_config is not None:
        doc["model"] = {"config": _plain(model_config)}
    out = document_from_log(validate_plan(doc), None).model_dump(mode="json", exclude_none=True)
    require_length(out)
    return out


def _plain(obj: Any) -> Any:
    """Plain JSON data (dicts and lists) from read-only mappings and tuples, e.g. catalogue configs."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def import_nvidia_smi(text: str, free_spread_threshold_bytes: int = 1024**3) -> JSON:
    """Parsed nvidia-smi output, with seed 000's alert when free memory differs across GPUs."""
    from dataclasses import asdict

    from app.ingest.nvidia_smi import parse_nvidia_smi, smi_free_spread_alert, smi_parse_to_json

    parsed = parse_nvidia_smi(text)
    out = smi_parse_to_json(parsed)
    alerts = smi_free_spread_alert(parsed.gpus, free_spread_threshold_bytes)
    findings = out.get("findings")
    presets = _smi_presets(out.get("gpus"))
    out["findings"] = [*(findings if isinstance(findings, list) else []), *(asdict(a) for a in alerts), *presets]
    return out


def _smi_presets(gpus: object) -> list[JSON]:
    """Map each card nvidia-smi names to its preset: vLLM budgets against torch's total, about
    0.45 GiB below nvidia-smi's memory.total (gpu-totals.md); each GPU gets `vllm_total_bytes`."""
    out: list[JSON] = []
    for g in gpus if isinstance(gpus, list) else []:
        preset = find_preset(str(g.get("name") or "")) if isinstance(g, dict) else None
        if preset is None or not isinstance(g.get("total_bytes"), int):
            continue
        g["preset"], g["vllm_total_bytes"] = preset.name, preset.total_bytes
        out.append({
            "code": "gpu_preset_total", "severity": "info", "line": g.get("line"),
            "message": f"GPU {g.get('index')} ({g['name']}): nvidia-smi total {g['total_bytes'] / 2**30:.2f} GiB; "
                       f"vLLM budgets against torch's total, {preset.total_bytes / 2**30:.2f} GiB for the "
                       f"{preset.name} preset ({preset.source})",
        })  # fmt: skip
    return out


_COMPARE_KEYS = (
    "kv_bytes_per_token",
    "page_bytes",
    "blocks",
    "tokens",
    "raw_tokens",
    "schedulable_tokens",
    "concurrency_ceiling",
    "max_concurrency_at_max_model_len",
    "vllm_kv_cache_size_tokens",
    "largest_max_model_len",
    "stranded_bytes",
)
_RANK_KEYS = (
    "total_bytes",
    "free_at_start_bytes",
    "requested_bytes",
    "headroom_bytes",
    "weights_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "activation_bytes",
    "kv_bytes",
    "blocks",
    "tokens",
)


def _delta(a: object, b: object) -> JSON:
    out: JSON = {"a": a, "b": b, "delta": None}
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        out["delta"] = round(b - a, 4) if isinstance(a, float) or isinstance(b, float) else b - a
    return out


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> JSON:
    """Two plan results side by side: every result and every rank row with its delta."""
    ranks_a = {r["rank"]: r for r in a.get("ranks", [])}
    ranks_b = {r["rank"]: r for r in b.get("ranks", [])}
    labels = list(ranks_a) + [k for k in ranks_b if k not in ranks_a]
    return {
        "results": {k: _delta(a.get(k), b.get(k)) for k in _COMPARE_KEYS},
        "binding_rank": {"a": a.get("binding_rank"), "b": b.get("binding_rank")},
        "ranks": [
            {
                "rank": label,
                "rows": {k: _delta(ranks_a.get(label, {}).get(k), ranks_b.get(label, {}).get(k)) for k in _RANK_KEYS},
            }
            for label in labels
        ],
        "flags": {"a": a.get("flags", []), "b": b.get("flags", [])},
    }


def kv_bytes_report(
    config: Mapping[str, object],
    *,
    tp: int = 1,
    pp: int = 1,
    dcp: int = 1,
    kv_cache_dtype: str = "auto",
    block_size: int = 16,
    max_model_len: int | None = None,
    max_num_batched_tokens: int | None = None,
) -> JSON:
    """`kvledger kv-bytes`: per-rank bytes per token, page bytes and vLLM's per-request worst case."""
    shape = _shape(config, "config")
    rkv = rank_kv(shape, tp=tp, pp=pp, dcp=dcp, kv_cache_dtype=kv_cache_dtype, block_size=block_size)
    mml = max_model_len or shape.max_position_embeddings
    if mml is None:
        raise InputError("max_model_len", "required: the config does not state max_position_embeddings")
    mnbt = max_num_batched_tokens or 8192
    return {
        "model": shape.name,
        "tp": tp,
        "pp": pp,
        "dcp": dcp,
        "kv_cache_dtype": rkv.kv_cache_dtype,
        "layers": shape.num_layers,
        "layers_on_rank": rkv.layers_on_rank,
        "kv_heads": shape.num_kv_heads,
        "kv_heads_per_rank": rkv.kv_heads_per_rank,
        "head_dim": shape.head_dim,
        "layer_kinds": {k: shape.layer_kinds.count(k) for k in sorted(set(shape.layer_kinds))},
        "kv_bytes_per_token": rkv.kv_bytes_per_token,
        "block_size": rkv.block_size,
        "page_bytes": rkv.page_bytes,
        "mamba_state_bytes_per_request": rkv.mamba_state_bytes_per_request,
        "max_model_len": mml,
        "max_num_batched_tokens": mnbt,
        "per_request_blocks": rkv.per_request_blocks(mml, mnbt),
        "per_request_bytes": rkv.per_request_bytes(mml, mnbt),
        "notes": [*shape.notes, *rkv.notes],
    }
