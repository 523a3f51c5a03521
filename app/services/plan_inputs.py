"""A plan document → the core's `PlanInput`: the engine with vLLM's defaults for the version the
plan names (`engine_settings`, the one defaults rule), the layout, policy, rank rows and notes; then
the document's what-if applied on top. `Prepared` lets a slider tick reuse the part before the
what-if. Errors are `InputError`s naming the field."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace

from app.core.architectures import architecture_notes
from app.core.dp_layout import layout_notes
from app.core.errors import InputError
from app.core.gpus import PRESETS, compute_capability, find_preset
from app.core.lora import LoraSpec, check_lora
from app.core.max_len import long_length_note, refusal
from app.core.mla_rules import mla_sizing
from app.core.nontorch import Interconnect
from app.core.plan import AUTO_FIT_SINCE, Engine, Layout, ModelInput, PlanInput, Policy, check_rank_count, with_columns
from app.core.prefix_pool import V1_SINCE
from app.core.profile_run import FLASHINFER_SAMPLER_BYTES, FLASHINFER_SAMPLER_DEFAULT_SINCE, flashinfer_sampler_in_use
from app.core.shape import ModelShape, check_given_max_model_len, default_max_model_len
from app.core.units import GIB
from app.core.versions import (
    CURRENT_VLLM,
    card_scheduler_defaults,
    check_block_size,
    rules_for,
    scheduler_seqs,
    with_cudagraph_estimate,
)
from app.core.whatif import set_engine, set_max_num_batched_tokens, set_quantization, set_tp
from app.ingest.vllm_serve import serve_notes
from app.schemas import PlanDocument, WhatIfDoc, validate_plan, validate_whatif
from app.services.model_input import quantized, resolve_model
from app.services.plan_layers import kv_offload, make_dp_layout, node, prefix_caching
from app.services.plan_rows import estimated_ranks, fill_missing_rows, ranks_from_doc
from app.services.prepared import PureCache
from app.services.speculative_doc import speculative_spec

LogReader = Callable[[str], str]


def build_plan(doc: PlanDocument, read_log: LogReader | None = None) -> PlanInput:
    """Resolve a validated document into the core's plan input (defaults filled in)."""
    plan, from_log = build_base_plan(doc, read_log)
    return apply_whatif(_merged(from_log, doc.whatif), plan)


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
    version = doc.vllm_version or CURRENT_VLLM
    model = quantized(resolve_model(doc), doc.engine.quantization)
    mla = None if model.shape is None else mla_sizing(
        model.shape, version, doc.gpu.name if doc.gpu else None, doc.engine.kv_cache_dtype, doc.engine.block_size,
        "block_size" in doc.engine.model_fields_set, doc.engine.mla_disable,
    )  # fmt: skip
    if mla is not None:
        model = replace(model, shape=mla.shape)
    engine = _engine(doc, model, version)
    if mla is not None and mla.block_size != engine.block_size:
        engine = replace(engine, block_size=mla.block_size)
    mla_notes = mla.notes if mla is not None else ()
    layout = Layout(
        tp=doc.layout.tp, pp=doc.layout.pp, dp=doc.layout.dp, dcp=doc.layout.dcp,
        expert_parallel=doc.layout.expert_parallel, interconnect=_interconnect(doc),
    )  # fmt: skip
    check_block_size(engine.block_size, version, attention=model.shape is None or model.shape.attention_layers > 0)
    dp_layout = make_dp_layout(layout, model, version)
    if doc.ranks:
        ranks = ranks_from_doc(doc.ranks)
        ranks, estimated = fill_missing_rows(ranks, model, layout, engine, version, doc.gpu.name if doc.gpu else None)
    else:
        ranks = estimated_ranks(doc, model, layout, engine, version, dp_layout)
        estimated = True
    assumed_len = default_max_model_len(model.shape)[1] if model.shape and not doc.engine.max_model_len else None
    if doc.engine.allow_long_max_model_len and model.shape and doc.engine.max_model_len:
        assumed_len = _long_length_note(model.shape, doc.engine.max_model_len)
    elif doc.ranks and model.shape and doc.engine.max_model_len:
        assumed_len = _measured_length_note(model.shape, doc.engine.max_model_len)
    notes = (*_document_notes(doc), *((assumed_len,) if assumed_len else ()),
             *layout_notes(dp_layout, model.shape is not None), *_architecture_notes(doc, version), *mla_notes,
             *_env_notes(doc, version, estimated))
    return PlanInput(model, layout, engine, _policy(doc), ranks, version, _gpu_total(doc), estimated, notes, node(doc),
                     gpu_name=doc.gpu.name if doc.gpu else None)  # fmt: skip


def _measured_length_note(shape: ModelShape, max_model_len: int) -> str | None:
    """A plan on measured ranks (a log, a run's rows) keeps a max_model_len above the model's derived
    length — the run started with it — and says how vLLM lets it: a plan without them is refused."""
    max_len = shape.max_len
    if max_len is None or max_len.accepts(max_model_len):
        return None
    return (f"max_model_len {refusal(max_model_len, max_len)}; the run's measured rows are kept as the run started "
            "with it (that variable set, or a config override such as --hf-overrides rope_scaling)")


#: How a plan sets the variable, said after the refusal (`_checked_length`).
ALLOW_LONG_HOW = (
    "; to plan a run started with it, tick 'Allow long max model len' on the plan page "
    "(allow_long=true in its URL) or set engine.allow_long_max_model_len: true in the plan document"
)


def _long_length_note(shape: ModelShape, max_model_len: int) -> str | None:
    """A max_model_len above the model's derived length, planned as vLLM starts it with
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (`app.core.max_len.long_length_note`)."""
    return None if shape.max_len is None else long_length_note(max_model_len, shape.max_len)


def _checked_length(shape: ModelShape | None, max_model_len: int) -> None:
    """vLLM's refusal of a max_model_len above the model's length, saying how this page sets the variable."""
    try:
        check_given_max_model_len("engine.max_model_len", shape, max_model_len)
    except InputError as exc:
        raise InputError(exc.field, exc.message + ALLOW_LONG_HOW) from None


def _engine(doc: PlanDocument, model: ModelInput, version: str) -> Engine:
    """The engine settings the plan runs with: the document's, else vLLM's defaults (`engine_settings`)."""
    engine_doc = doc.engine
    max_model_len = engine_doc.max_model_len or (default_max_model_len(model.shape)[0] if model.shape else None)
    if max_model_len is None:
        raise InputError("engine.max_model_len", "required: a model given as bytes per token states no length")
    # measured ranks: vLLM ran it (`_measured_length_note`); the variable set: vLLM warns (`_long_length_note`)
    if engine_doc.max_model_len and not doc.ranks and not engine_doc.allow_long_max_model_len:
        _checked_length(model.shape, engine_doc.max_model_len)
    util, mnbt, seqs, _ = engine_settings(doc, max_model_len)
    return Engine(
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
        cudagraph_mode=engine_doc.cudagraph_mode,
        estimate_cudagraphs=_estimate_cudagraphs(engine_doc.estimate_cudagraphs, version),
        mla_disable=engine_doc.mla_disable,
        flashinfer_sampler=engine_doc.flashinfer_sampler,
        allow_long_max_model_len=engine_doc.allow_long_max_model_len,
        lora=_lora(doc, model, version),
        lora_in_run=_lora(doc, model, version) if doc.ranks else None,
        speculative=speculative_spec(engine_doc.speculative, model.shape),
        kv_offload=kv_offload(doc, version),
        enable_prefix_caching=prefix_caching(doc, version),
        async_scheduling=engine_doc.async_scheduling,
        max_model_len_assumed=engine_doc.max_model_len is None,
        max_num_batched_tokens_assumed=engine_doc.max_num_batched_tokens is None,
        max_num_seqs_assumed=engine_doc.max_num_seqs is None,
        block_size_assumed="block_size" not in engine_doc.model_fields_set,
        max_model_len_auto=_auto_length(engine_doc.max_model_len_auto and not engine_doc.max_model_len, version),
    )


def _auto_length(auto: bool, version: str) -> bool:
    """`--max-model-len auto` where the version has it (app.core.plan.AUTO_FIT_SINCE), else refused."""
    if auto and rules_for(version).version < AUTO_FIT_SINCE:
        raise InputError("engine.max_model_len_auto", f"vLLM {rules_for(version).label} has no --max-model-len auto "
                         "(PR #29431, v0.14: its argparse refuses it): give the length")
    return auto


def _estimate_cudagraphs(given: bool | None, version: str) -> bool | None:
    """VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS as the document states it, refused where the version has none."""
    with_cudagraph_estimate(rules_for(version), given)
    return given


def _policy(doc: PlanDocument) -> Policy:
    return Policy(
        growth_reserve=doc.policy.growth_reserve,
        operating_reserve_bytes=doc.policy.operating_reserve,
        avg_live_tokens=doc.policy.avg_live_tokens,
        free_spread_threshold_bytes=doc.policy.free_spread_threshold,
        activation_points=tuple((int(x), int(y)) for x, y in doc.policy.activation_points),
    )


def _document_notes(doc: PlanDocument) -> tuple[str, ...]:
    """The document's own notes, its serve command's and what was assumed where it is silent."""
    notes: tuple[str, ...] = tuple(doc.notes)
    if doc.serve is not None or doc.vllm_config is not None:
        notes += tuple(serve_notes(doc.model_dump(include={"serve", "vllm_config"}, exclude_none=True)))
    return (*notes, *_assumption_notes(doc))


def _env_notes(doc: PlanDocument, version: str, estimated: bool) -> tuple[str, ...]:
    """What the engine's environment knobs the document states did to the plan (the plan page's
    `fi_sampler` and `cg_estimate`; `mla_off` says its own in the MLA notes)."""
    notes: list[str] = []
    rules = rules_for(version)
    sampler = doc.engine.flashinfer_sampler
    if sampler is None and estimated and rules.version >= FLASHINFER_SAMPLER_DEFAULT_SINCE:
        on, why = flashinfer_sampler_in_use(None, rules.version, compute_capability(doc.gpu.name if doc.gpu else None))
        path = (f"FlashInfer's top-k/top-p path, {FLASHINFER_SAMPLER_BYTES} B per logit and no sort" if on
                else "PyTorch's native top-k/top-p path")
        notes.append(f"{why}: the profile run's sampler peak and the warm-up are sized on {path} "
                     "(app.core.profile_run.flashinfer_sampler_in_use)")
    if sampler is not None and estimated:
        if rules.version < V1_SINCE:
            notes.append(f"VLLM_USE_FLASHINFER_SAMPLER={int(sampler)}: no effect on vLLM {rules.label}'s V0 sampler")
        elif sampler:
            notes.append(f"VLLM_USE_FLASHINFER_SAMPLER=1: the profile run's sampler peak is sized on FlashInfer's "
                         f"top-k/top-p path, {FLASHINFER_SAMPLER_BYTES} B per logit and no sort "
                         "(app.core.profile_run.sampler_bytes_per_logit)")
        else:
            notes.append("VLLM_USE_FLASHINFER_SAMPLER=0: the profile run's sampler peak is sized on PyTorch's "
                         "native top-k/top-p path (app.core.profile_run.sampler_bytes_per_logit)")
    estimate = doc.engine.estimate_cudagraphs
    if estimate is not None:
        default = "on" if rules.cuda_graphs_in_budget else "off"
        where = ("inside the KV budget (profiled before KV sizing)" if estimate
                 else "outside the KV budget (captured after KV sizing)")
        notes.append(f"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS={int(estimate)}: the CUDA-graph memory is {where}; "
                     f"vLLM {rules.label}'s default is {default}")
    return tuple(notes)


def _architecture_notes(doc: PlanDocument, version: str) -> tuple[str, ...]:
    if doc.model is None or doc.model.config is None:
        return ()
    return tuple(architecture_notes(doc.model.config, version))


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


def engine_settings(doc: PlanDocument, max_model_len: int | None = None) -> tuple[float, int, int, str]:
    """Utilization, max_num_batched_tokens, max_num_seqs and what was assumed: the document's own,
    else vLLM's defaults for its version (`rules_for`), engine, GPU and max_model_len
    (`scheduler_defaults`). The one defaults rule."""
    rules = rules_for(doc.vllm_version or CURRENT_VLLM)
    mml = max_model_len or doc.engine.max_model_len or 2**31
    default_mnbt, default_seqs, note = card_scheduler_defaults(
        doc.vllm_version or CURRENT_VLLM, _gpu_total(doc), doc.gpu.name if doc.gpu else None, mml
    )
    engine = doc.engine
    mnbt = engine.max_num_batched_tokens or default_mnbt
    field = "engine.max_num_batched_tokens" if engine.max_num_batched_tokens else "engine.max_num_seqs"
    seqs = scheduler_seqs(doc.vllm_version, mnbt, engine.max_num_seqs, default_seqs, field)
    return engine.gpu_memory_utilization or rules.default_gpu_memory_utilization, mnbt, seqs, note


def engine_defaults(doc: object, prepared: Prepared | None = None) -> dict[str, float]:
    """The engine values a plan document runs with where a what-if leaves them unset, by document
    path: its own (or its what-if's) settings, else vLLM's defaults (`engine_settings`). With
    `prepared`, the validated document before its what-if is reused."""
    if prepared is not None and isinstance(doc, Mapping):
        whatif = validate_whatif(doc.get("whatif"))
        made = prepared.cache.get_or_make(("doc", prepared.key), lambda: _settled(_without_whatif(doc)), _weight)
        assert isinstance(made, SettledDocument)
        (util, mnbt, _, _), whatif = made.settings, _merged(made.doc.whatif, whatif)
    else:
        validated = _logged(doc)
        whatif = validated.whatif
        util, mnbt, _, _ = engine_settings(validated)
    if whatif is not None:
        util = whatif.gpu_memory_utilization or util
        mnbt = whatif.max_num_batched_tokens or mnbt
    return {"engine.gpu_memory_utilization": util, "engine.max_num_batched_tokens": float(mnbt)}


@dataclass(frozen=True)
class SettledDocument:
    """A validated document before its what-if and its `engine_settings` (a pure function of it:
    a tick on a prepared base neither re-validates it nor scans its ranks for the GPU total)."""

    doc: PlanDocument
    settings: tuple[float, int, int, str]


def _settled(doc: object) -> SettledDocument:
    validated = _logged(doc)
    return SettledDocument(validated, engine_settings(validated))


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
    if doc.gpu is not None and not doc.gpu.name:
        notes.extend(_nominal_size_note(doc.gpu.total))
    derived = [r for r in doc.ranks or () if r.kv_room_blocks is not None]
    if derived:  # a room from logged blocks (services.blocks_room): what it leaves unchecked, per the totals given
        from app.services.blocks_room import unchecked_note

        notes.append(unchecked_note(all(r.total is not None for r in derived)))
    return tuple(notes)


def _nominal_size_note(total: int) -> tuple[str, ...]:
    """A GPU given as a card's nominal size ("80GB" = 80 × 10⁹ B = 74.51 GiB) is planned at that size,
    not at what vLLM sees on the card sold as it (an H100 80GB reports 79.19 GiB): say so, with the
    presets of that nominal size, rather than plan 4.7 GiB less KV without a word."""
    if total <= 0 or total % 10**9 or total % GIB == 0:
        return ()
    size_gb = total // 10**9
    cards = [p for p in PRESETS if p.memory_gib_nominal == size_gb]
    if not cards:
        return ()
    seen = "; ".join(f"{p.name}: {p.total_bytes / GIB:.2f} GiB" for p in cards[:4])
    return (f"GPU total {total:,} B = {total / GIB:.2f} GiB, read as {size_gb} GB decimal; a card sold as "
            f"{size_gb} GB reports its own total to vLLM ({seen}): pick its preset for that card's total",)


def _preset_total(doc: PlanDocument) -> int | None:
    preset = find_preset(doc.gpu.name) if doc.gpu and doc.gpu.name else None
    return preset.total_bytes if preset else None


def _quantization_notes(plan: PlanInput) -> PlanInput:
    """Online fp8 before vLLM 0.14 held every full-precision weight until all had loaded
    (fixed by vllm-project/vllm PR #31914, merged 2026-01-07; release assumed 0.14.0)."""
    if plan.engine.quantization != "fp8" or rules_for(plan.vllm_version).version >= (0, 14, 0):
        return plan
    note = ("vLLM before 0.14 loads every weight at full precision before quantizing to fp8: the unquantized "
            "weights must fit in free memory at start (PR #31914 streams them since)")
    return replace(plan, notes=(*plan.notes, note))


def apply_whatif(whatif: WhatIfDoc | None, plan: PlanInput) -> PlanInput:
    """The what-if's knobs as the core's transforms on a built plan, then the quantization note."""
    if whatif is None:
        return _quantization_notes(plan)
    if whatif.tp is not None:
        plan = set_tp(plan, whatif.tp).plan
    if whatif.max_num_batched_tokens is not None:
        try:
            plan = set_max_num_batched_tokens(plan, whatif.max_num_batched_tokens).plan
        except InputError as exc:  # the chunk the what-if moves (e.g. below max_num_seqs: versions.scheduler_seqs)
            raise InputError("whatif.max_num_batched_tokens", exc.message) from None
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
#: or a validated document (with its engine settings).
Preparation = tuple[PlanInput, WhatIfDoc | None] | SettledDocument


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
    return len((value[0] if isinstance(value, tuple) else value.doc).ranks or ()) + 1


def plan_input(doc: object, read_log: LogReader | None = None, prepared: Prepared | None = None) -> PlanInput:
    """`build_plan(validate_plan(doc))`; with `prepared`, only the what-if is validated and
    applied when the rest of the document was built before under the same key."""
    if prepared is None or not isinstance(doc, Mapping):
        return build_plan(validate_plan(doc), read_log)
    whatif = validate_whatif(doc.get("whatif"))

    def make() -> tuple[PlanInput, WhatIfDoc | None]:
        base, logged = build_base_plan(validate_plan(_without_whatif(doc)), read_log)
        return with_columns(base), logged  # the ranks' columns, once per base (app.core.rank_columns)

    made = prepared.cache.get_or_make(("plan", prepared.key), make, _weight)
    assert isinstance(made, tuple)
    base, logged = made
    return apply_whatif(_merged(logged, whatif), base)
