"""A plan: model, layout, engine settings, policy and per-rank rows in; the full result out.

`compute` is the one entry point the CLI, the API and the pages share. It works out every
rank's ledger, admits against the binding rank, prices the uniform manual budget, and collects
warnings in plain words. Everything is pure and deterministic.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from app.core.admission import Admission, AdmissionPolicy, admit_columns
from app.core.budget import UniformBudget, uniform_budget_columns
from app.core.cudagraphs import CudagraphMode
from app.core.encoder_cache import EncoderCacheTerms, encoder_cache_terms
from app.core.errors import InputError
from app.core.estimates import EstimateContext, mxfp4_backend_for
from app.core.extra_rows import ExtraInputs, RankExtras, with_extra_rows
from app.core.free_gap import free_gap_message
from app.core.gpus import compute_capability
from app.core.in_flight import async_scheduling_on, concurrent_batches
from app.core.kv_tiers import KVOffload, Node, Tier, empty_tier_warning, kv_tiers, node_warning
from app.core.kvspec import RankKV, rank_kv, rank_kv_stages, rank_kv_uniform
from app.core.ledger import LedgerRules, RankInput, RankLedger
from app.core.lora import LoraSpec
from app.core.nontorch import Interconnect
from app.core.prefix_pool import PrefixPool, prefix_pool
from app.core.profile_run import flashinfer_sampler_in_use
from app.core.rank_columns import (
    RankColumns,
    columns_for,
    free_spread,
    known_rooms,
    kv_column,
    kv_order,
    label_positions,
    labels_of,
    measured_rooms,
    rank_columns,
    with_problems,
    work_out_columns,
)  # fmt: skip
from app.core.shape import ModelShape
from app.core.speculative import SpecSpec, draft_kv_bytes_per_token, draft_layers, with_draft_kv
from app.core.stage_kv import rank_stage_kv
from app.core.units import fmt_bytes
from app.core.versions import VersionRules, rules_for, with_cudagraph_estimate
from app.core.vision import VisionGeometry


@dataclass(frozen=True)
class ModelInput:
    """The model: a parsed shape, or only its per-rank KV bytes per token (quick what-ifs)."""

    shape: ModelShape | None = None
    kv_bytes_per_token: int | None = None
    name: str | None = None
    source: str = "config"
    sha256: str | None = None
    multimodal: bool = False
    vision: VisionGeometry | None = None  # the encoder vLLM profiles (Qwen-VL towers), when known
    #: The checkpoint's quantization a run's log states (`ModelDoc.quantization`): its measured
    #: weights are already quantized, so no fp8-weights what-if applies to them.
    stated_quantization: str | None = None


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    dcp: int = 1
    expert_parallel: bool = False  # --enable-expert-parallel: experts split over the TP ranks, not sharded
    interconnect: Interconnect = "unknown"  # nvlink | pcie: decides NCCL's buffers before vLLM 0.11


@dataclass(frozen=True)
class Engine:
    gpu_memory_utilization: float
    kv_cache_dtype: str
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_cache_memory_bytes: int | None = None
    enforce_eager: bool = False
    quantization: str | None = None  # vLLM's --quantization: "fp8" online, "awq"/"gptq" the plain kernels forced
    num_gpu_blocks_override: int | None = None  # vLLM's --num-gpu-blocks-override (every worker's blocks)
    disable_hybrid_kv_cache_manager: bool = False  # --disable-hybrid-kv-cache-manager
    cudagraph_mode: CudagraphMode = "auto"  # "auto": the version's default
    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (vLLM ≥ 0.18); None: the version's default (on from 0.21)
    estimate_cudagraphs: bool | None = None
    mla_disable: bool = False  # VLLM_MLA_DISABLE=1: an MLA model caches full K/V (app.core.mla_rules)
    # V1's top-k/top-p sampler on FlashInfer's path (VLLM_USE_FLASHINFER_SAMPLER with FlashInfer installed);
    # None: not stated, the version's default on the card (app.core.profile_run.flashinfer_sampler_in_use)
    flashinfer_sampler: bool | None = None
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (app.core.max_len rule 5)
    lora: LoraSpec | None = None  # --enable-lora with its slots (app.core.lora)
    lora_in_run: LoraSpec | None = None  # the LoRA measured rows were taken under (app.core.extra_rows)
    speculative: SpecSpec | None = None  # --speculative-config (app.core.speculative)
    kv_offload: KVOffload | None = None  # --kv-offloading-backend / --kv-offloading-size (app.core.kv_tiers)
    enable_prefix_caching: bool = True  # --enable-prefix-caching (the version's default: app.core.prefix_pool)
    async_scheduling: bool | None = None  # --[no-]async-scheduling; None: the version's default (app.core.in_flight)
    # True when no document or log stated max_model_len and the model's default was taken
    # (vLLM's own default, app.core.max_len: the smallest length key, RoPE-scaled; vllm/config/model.py)
    max_model_len_assumed: bool = False
    # True when vLLM's defaults for the card were taken (versions.card_scheduler_defaults): another
    # card re-picks them (a ≥ 70 GiB card other than an A100 gets 8192 tokens and 1024 sequences)
    max_num_batched_tokens_assumed: bool = False
    max_num_seqs_assumed: bool = False
    # True when no document or log stated block_size: vLLM's backend picks it for the model, the cache
    # dtype and the card (app.core.mla_rules), so a KV-dtype what-if re-picks it (whatif.kv_dtype_change)
    block_size_assumed: bool = False
    # `--max-model-len auto` / -1 with no length stated: vLLM fits max_model_len to the KV memory (`compute`)
    max_model_len_auto: bool = False


@dataclass(frozen=True)
class Policy:
    growth_reserve: float = 0.0
    operating_reserve_bytes: int = 0
    avg_live_tokens: int | None = None
    free_spread_threshold_bytes: int = 1024**3
    activation_points: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class PlanInput:
    model: ModelInput
    layout: Layout
    engine: Engine
    policy: Policy
    ranks: tuple[RankInput, ...]
    vllm_version: str
    gpu_total_bytes: int | None = None
    estimated_ranks: bool = False
    notes: tuple[str, ...] = ()
    node: Node | None = None  # one host's memory and GPUs: the CPU KV tier's pinned buffers live there
    gpu_name: str | None = None  # the card the plan names (picks the MXFP4 weight layout; plan_estimate_context)
    # The ranks' columns made once (app.core.rank_columns); used only while they are these ranks'.
    columns: RankColumns | None = field(default=None, compare=False, repr=False)
    # Each rank's PP stage when the ranks are not whole stage-major replicas (sizing keeps one a stage)
    rank_stages: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Warning:
    code: str
    message: str
    rank: str | None = None


@dataclass(frozen=True)
class PlanResult:
    plan: PlanInput
    rules: VersionRules
    rkv: RankKV
    ledgers: Sequence[RankLedger]  # rank_columns.RankLedgers from compute: each made when read
    admission: Admission
    budget: UniformBudget | None
    warnings: tuple[Warning, ...] = field(default=())
    extras: tuple[RankExtras, ...] = field(default=())  # per rank: LoRA / draft estimates (extra_rows)
    tiers: tuple[Tier, ...] = ()  # the GPU tier, then the offload tiers (app.core.kv_tiers)
    prefix: PrefixPool | None = None  # the pool's running / retained split (app.core.prefix_pool)


def check_rank_count(layout: Layout, count: int, partial: bool = False) -> None:
    """The stated rule for a plan's ``ranks`` against its layout (issue 17, item 18).

    ``ranks`` lists GPU workers: one replica is tp × pp of them (PP stage-major, TP within a stage);
    a list of k whole replicas is k data-parallel engines (k must be 1 or layout.dp when dp > 1).
    Any other count — the README's old example, ``tp: 4`` with two entries — is refused naming both,
    rather than read as a TP4 ledger of two rows. ``partial``: the list holds only the workers an
    imported log prints (the others unknown), so any count up to tp × pp × dp stands.
    """
    per_replica = layout.tp * layout.pp
    if partial:
        if 1 <= count <= per_replica * layout.dp:
            return
        raise InputError(
            "ranks",
            f"{count} ranks entries are more than the {per_replica * layout.dp} workers of layout tp={layout.tp} "
            f"× pp={layout.pp} × dp={layout.dp} (ranks_partial lists some of the workers, never more)",
        )
    replicas, rest = divmod(count, per_replica)
    if rest == 0 and replicas >= 1 and (layout.dp == 1 or replicas in (1, layout.dp)):
        return
    want = f"{per_replica}" if layout.dp == 1 else f"{per_replica} or {per_replica * layout.dp}"
    raise InputError(
        "ranks",
        f"{count} ranks entries do not match layout tp={layout.tp} × pp={layout.pp}"
        f"{f' × dp={layout.dp}' if layout.dp > 1 else ''}: give one entry per GPU worker ({want} entries"
        f"{', or a multiple of ' + str(per_replica) + ' for data-parallel replicas' if layout.dp == 1 else ''}), "
        "or set layout.tp / layout.pp to the layout that was run",
    )


def estimate_context(
    layout: Layout, engine: Engine, vllm_version: str, tp: int | None = None, vision: VisionGeometry | None = None,
    *, gpu_name: str | None,
) -> EstimateContext:  # fmt: skip
    """What the row estimates depend on besides the model (optionally at another TP degree); the card's
    name, where known, picks the MXFP4 weight layout vLLM uses on it (estimates.mxfp4_backend_for). The
    name is a required argument (None when the plan names no card) so that no path drops it."""
    return EstimateContext(
        tp or layout.tp,
        layout.pp,
        engine.max_num_batched_tokens,
        engine.max_num_seqs,
        engine.enforce_eager,
        with_cudagraph_estimate(rules_for(vllm_version), engine.estimate_cudagraphs),
        expert_parallel=layout.expert_parallel,
        interconnect=layout.interconnect,
        cudagraph_mode=engine.cudagraph_mode,
        vision=vision,
        max_model_len=engine.max_model_len,
        mxfp4_backend=mxfp4_backend_for(compute_capability(gpu_name)),
        capability=compute_capability(gpu_name),
        quantization=engine.quantization,
        dp=layout.dp,
        flashinfer_sampler=flashinfer_sampler_in_use(
            engine.flashinfer_sampler, rules_for(vllm_version).version, compute_capability(gpu_name)
        )[0],
    )


def plan_estimate_context(plan: PlanInput, layout: Layout | None = None, tp: int | None = None) -> EstimateContext:
    """`estimate_context` for a plan (its card's name included), optionally at another layout or TP."""
    return estimate_context(
        layout or plan.layout, plan.engine, plan.vllm_version, tp, vision=plan.model.vision, gpu_name=plan.gpu_name
    )


def kv_spec(plan: PlanInput) -> RankKV:
    """The per-rank KV geometry of the plan's model, layout and cache settings."""
    engine, layout = plan.engine, plan.layout
    if plan.model.shape is not None:
        rkv = _rank_kv(
            plan.model.shape, layout.tp, layout.pp, layout.dcp, engine.kv_cache_dtype, engine.block_size,
            not engine.disable_hybrid_kv_cache_manager,
        )  # fmt: skip
    else:
        rkv = rank_kv_uniform(plan.model.kv_bytes_per_token or 0, engine.block_size)
    rkv = _with_in_flight(plan, rkv)
    spec = engine.speculative
    if spec is None:
        return rkv
    bpt = draft_kv_bytes_per_token(rkv, plan.model.shape, spec, layout.tp, engine.kv_cache_dtype)
    return with_draft_kv(rkv, bpt, draft_layers(plan.model.shape, spec))


@functools.lru_cache(maxsize=512)
def _rank_kv_stages(shape: ModelShape, tp: int, pp: int, dcp: int, dtype: str, block_size: int,
                    hybrid: bool) -> tuple[RankKV, ...]:  # fmt: skip
    return rank_kv_stages(
        shape, tp=tp, pp=pp, dcp=dcp, kv_cache_dtype=dtype, block_size=block_size, hybrid_kv_cache_manager=hybrid
    )


def stage_kv_specs(plan: PlanInput) -> tuple[RankKV, ...] | None:
    """Every PP stage's KV geometry (app.core.stage_kv); None with one stage, no model shape, or a
    draft model (its layers' stage is not modelled: every rank keeps the tight stage's pool)."""
    engine, layout, shape = plan.engine, plan.layout, plan.model.shape
    if layout.pp <= 1 or shape is None or engine.speculative is not None:
        return None
    stages = _rank_kv_stages(shape, layout.tp, layout.pp, layout.dcp, engine.kv_cache_dtype, engine.block_size,
                             not engine.disable_hybrid_kv_cache_manager)  # fmt: skip
    return tuple(_with_in_flight(plan, s) for s in stages)


def in_flight_batches(plan: PlanInput) -> int:
    """Batches of max_num_batched_tokens a sliding-window group holds per request (app.core.in_flight)."""
    version = rules_for(plan.vllm_version).version
    spec = plan.engine.speculative
    on = async_scheduling_on(plan.engine.async_scheduling, version, spec.method if spec is not None else None)
    return concurrent_batches(version, plan.layout.pp, on)


def _with_in_flight(plan: PlanInput, rkv: RankKV) -> RankKV:
    if not any(g.kind in ("sliding", "chunked") for g in rkv.groups):
        return rkv
    batches = in_flight_batches(plan)
    if batches == rkv.in_flight_batches:
        return rkv
    note = (f"sliding-window / chunked-local groups hold {batches} × max_num_batched_tokens in flight per request "
            "beside the window (vLLM ≥ 0.26: max_in_flight_tokens = max_concurrent_batches × max_num_batched_tokens; "
            + ("async scheduling keeps 2 batches in flight)" if plan.layout.pp <= 1 else "one batch per PP stage)"))
    return replace(rkv, in_flight_batches=batches, notes=(*rkv.notes, note))


def draft_kv_bpt(plan: PlanInput, rkv: RankKV) -> int:
    """The draft's share of the pool's bytes per token (0 without speculative decoding)."""
    spec = plan.engine.speculative
    if spec is None:
        return 0
    target = kv_spec(replace(plan, engine=replace(plan.engine, speculative=None)))
    return rkv.kv_bytes_per_token - target.kv_bytes_per_token


@functools.lru_cache(maxsize=512)
def _rank_kv(shape: ModelShape, tp: int, pp: int, dcp: int, dtype: str, block_size: int, hybrid: bool = True) -> RankKV:
    """rank_kv is pure and its inputs are frozen: every slider tick of a plan reuses the same spec."""
    return rank_kv(
        shape, tp=tp, pp=pp, dcp=dcp, kv_cache_dtype=dtype, block_size=block_size, hybrid_kv_cache_manager=hybrid
    )


def ledger_rules(plan: PlanInput, rules: VersionRules) -> LedgerRules:
    return LedgerRules(
        gpu_memory_utilization=plan.engine.gpu_memory_utilization,
        cuda_graphs_in_budget=rules.cuda_graphs_in_budget,
        free_memory_preflight=rules.free_memory_preflight,
        requested_is_ceil=rules.requested_is_ceil,
        kv_cache_memory_bytes=plan.engine.kv_cache_memory_bytes,
        operating_reserve_bytes=plan.policy.operating_reserve_bytes,
    )


#: `--max-model-len auto` (-1): vllm/v1/core/kv_cache_utils.py `_auto_fit_max_model_len` (8ee90c83f,
#: PR #29431, 2025-12-24, taken as v0.14.0; human_readable_int refused "auto" before).
AUTO_FIT_SINCE = (0, 14, 0)


def compute(plan: PlanInput, rkv: RankKV | None = None) -> PlanResult:
    """Work out the whole plan; with `--max-model-len auto`, at the length vLLM fits to the KV memory."""
    result = _compute(plan, rkv)
    if not plan.engine.max_model_len_auto:
        return result
    return _auto_fit(result, rkv)


def _auto_fit(result: PlanResult, rkv: RankKV | None) -> PlanResult:
    """vLLM's `_auto_fit_max_model_len` (vllm/v1/core/kv_cache_utils.py @28be48fa9): the model's length
    when one such request fits every worker, else the largest that does (its binary search over each
    worker's KV memory: the admission's `largest_max_model_len`), or a refusal when not one token fits."""
    plan, adm = result.plan, result.admission
    engine = replace(plan.engine, max_model_len_auto=False, max_model_len_assumed=False)
    full = plan.engine.max_model_len
    if adm.fits_max_model_len:
        note = f"--max-model-len auto: the model's full length {full:,} fits the KV memory, so vLLM keeps it"
        return replace(result, plan=replace(plan, engine=engine, notes=(*plan.notes, note)))  # nothing else moves
    largest = adm.largest_max_model_len
    if not largest or largest <= 0 or not all(lg.will_start for lg in result.ledgers):
        return result  # no KV memory at all: vLLM refuses ("Cannot auto-fit max_model_len"), as the plan says
    note = (f"--max-model-len auto: vLLM fits max_model_len to the KV memory, reduced from {full:,} to "
            f"{largest:,} (\"Auto-fit max_model_len: reduced from {full} to {largest}\"): the plan and its flags "
            "use that length")
    fitted = replace(engine, max_model_len=largest)
    return _compute(replace(plan, engine=fitted, notes=(*plan.notes, note)), rkv)


def _compute(plan: PlanInput, rkv: RankKV | None = None) -> PlanResult:
    """Work out the whole plan at its max_model_len."""
    rules = with_cudagraph_estimate(rules_for(plan.vllm_version), plan.engine.estimate_cudagraphs)
    per_stage = None
    if rkv is None:
        rkv = kv_spec(plan)
        per_stage = stage_kv_specs(plan)
    ranks, extras = extra_rows(plan, rules)
    columns = columns_for(ranks, plan.columns)
    ledgers = work_out_columns(columns, ledger_rules(plan, rules))
    policy = AdmissionPolicy(
        max_model_len=plan.engine.max_model_len,
        max_num_batched_tokens=plan.engine.max_num_batched_tokens,
        max_num_seqs=plan.engine.max_num_seqs,
        growth_reserve=plan.policy.growth_reserve,
        avg_live_tokens=_live_with_lookahead(plan),
        kv_size_is_derived=rules.kv_size_is_derived,
        null_block_in_check=rules.null_block_in_check,
        null_block_exists=rules.null_block_exists,
        num_gpu_blocks_override=plan.engine.num_gpu_blocks_override,
        override_in_check=rules.override_in_check,
    )
    unique = len(label_positions(columns)) == len(columns.labels)
    stage_kv = rank_stage_kv(per_stage, columns.labels, plan.layout.tp, plan.layout.pp, plan.rank_stages)
    admission = admit_columns(columns.labels, ledgers.kv_bytes, rkv, policy, unique, stage_kv)
    labels, rooms = known_rooms(ledgers)
    ordered = kv_order(ledgers)[1] if rooms is ledgers.kv_bytes else None  # every KV known: the rooms sorted once
    measured = measured_rooms(ledgers) if plan.engine.kv_cache_memory_bytes is not None else None
    if measured is not None:
        (labels, rooms), ordered = measured, None
    budget = uniform_budget_columns(labels, rooms, plan.policy.operating_reserve_bytes, rkv, ordered)
    layout, engine = plan.layout, plan.engine
    link = plan.node.host_link if plan.node is not None else "pcie"
    tiers = kv_tiers(rkv, admission.blocks, layout.tp * layout.pp, engine.kv_offload, link)
    prefix = prefix_pool(engine.enable_prefix_caching, admission.blocks, rules.null_block_exists, rkv.block_size,
                         admission.concurrency, plan.policy.avg_live_tokens)
    result = PlanResult(plan, rules, rkv, ledgers, admission, budget, (), extras, tiers, prefix)
    return PlanResult(plan, rules, rkv, ledgers, admission, budget, warnings(result), extras, tiers, prefix)


def with_columns(plan: PlanInput) -> PlanInput:
    """The plan carrying its ranks' columns, so every what-if that keeps the ranks reuses them."""
    return replace(plan, columns=rank_columns(plan.ranks))


def encoder_cache_of(result: PlanResult) -> EncoderCacheTerms | None:
    """The encoder cache of a vision model at the plan's settings (app.core.encoder_cache)."""
    plan, shape = result.plan, result.plan.model.shape
    if plan.model.vision is None or shape is None:
        return None
    dtype_bytes = 4 if shape.dtype == "float32" else 2
    return encoder_cache_terms(plan.model.vision, plan.engine.max_num_batched_tokens, plan.layout.tp, dtype_bytes,
                               result.rules.version, plan.engine.max_model_len)  # fmt: skip


def _live_with_lookahead(plan: PlanInput) -> int | None:
    """Live tokens per request plus the lookahead slots vLLM's scheduler reserves for each running
    request (``num_lookahead_tokens``, vllm/v1/core/sched/scheduler.py): the concurrency ceiling's divisor."""
    live, spec = plan.policy.avg_live_tokens, plan.engine.speculative
    return live + spec.lookahead_tokens if live is not None and spec is not None else live


def extra_rows(plan: PlanInput, rules: VersionRules) -> tuple[tuple[RankInput, ...], tuple[RankExtras, ...]]:
    """The ranks with the rows LoRA adds (app.core.extra_rows); unchanged when it is off."""
    engine, shape = plan.engine, plan.model.shape
    if (engine.lora is None and engine.lora_in_run is None and engine.speculative is None) or shape is None:
        return plan.ranks, ()
    inputs = ExtraInputs(
        shape, plan.layout.tp, plan.layout.pp, plan.layout.expert_parallel, rules.version,
        engine.max_num_batched_tokens, lora=engine.lora, lora_in_run=engine.lora_in_run,
        speculative=engine.speculative,
    )  # fmt: skip
    return with_extra_rows(plan.ranks, inputs)


def _assumed_clause(plan: PlanInput) -> str:
    if not plan.engine.max_model_len_assumed:
        return ""
    return (f". Caveat: max_model_len was not stated (neither the log nor the plan gives it), so the model's "
            f"default {plan.engine.max_model_len:,} was assumed; if the run set --max-model-len, give that value")


def warnings(result: PlanResult) -> tuple[Warning, ...]:
    """Pre-flight failures and other findings, in plain words."""
    out = [Warning(code, message, lg.label) for lg in with_problems(result.ledgers) for code, message in lg.problems]
    adm, plan = result.admission, result.plan
    if result.ledgers and not adm.fits_max_model_len:
        out.append(
            Warning(
                "max_model_len_does_not_fit",
                f"vLLM will not start: one {plan.engine.max_model_len:,}-token request needs "
                f"{fmt_bytes(adm.per_request_bytes)} of KV on rank {adm.binding_rank}, which has "
                f"{fmt_bytes(max(0, min(kv_column(result.ledgers))))}"
                f"{_null_block_clause(result)}; the largest max_model_len that fits is {adm.largest_max_model_len:,}"
                f"{_assumed_clause(plan)}",
                adm.binding_rank,
            )
        )
    elif result.ledgers and not adm.servable_max_model_len:
        out.append(
            Warning(
                "null_block_hang",
                f"vLLM {result.rules.label} starts, but one {plan.engine.max_model_len:,}-token request needs "
                f"{adm.per_request_blocks:,} blocks and only {adm.usable_blocks:,} of {adm.blocks:,} serve requests "
                "(vLLM keeps one null block): such a request would wait forever. vLLM 0.28+ refuses this at "
                "start-up (PR #47272); keep max_model_len at or below "
                f"{_largest_servable(result):,}",
                adm.binding_rank,
            )
        )
    out += _spread_warnings(result)
    spec = plan.engine.speculative
    if spec is not None and result.rkv.is_hybrid and draft_layers(plan.model.shape, spec):
        out.append(Warning("draft_kv_not_modelled", f"the {spec.method} draft's attention layers join a hybrid KV "
                           "pool, which this plan does not model: its bytes per token leave the draft's KV out"))
    if spec is not None and spec.method in ("eagle", "eagle3", "draft_model") and spec.draft_name is None:
        out.append(Warning("draft_unnamed", "the draft model has no name: put its HF id or path in "
                           "--speculative-config's \"model\""))
    layout = plan.layout
    empty = empty_tier_warning(result.tiers, result.rkv, plan.engine.kv_offload, layout.tp * layout.pp)
    if empty is not None:
        out.append(Warning("kv_offload_holds_nothing", empty))
    if plan.node is not None and len(result.tiers) > 1:
        message = node_warning(result.tiers, plan.node, layout.tp * layout.pp * layout.dp)
        if message is not None:
            out.append(Warning("kv_offload_exceeds_host_memory", message))
    if adm.binding_limit == "max_num_seqs" and adm.concurrency_ceiling is not None:
        out.append(
            Warning(
                "max_num_seqs_binds",
                f"max_num_seqs ({plan.engine.max_num_seqs:,}) binds before KV memory "
                f"(room for {adm.concurrency_ceiling:,} requests of {plan.policy.avg_live_tokens:,} live tokens)",
            )
        )
    if plan.estimated_ranks:
        measured = any(getattr(r, row) is not None and getattr(r, row).source == "measured"
                       for r in plan.ranks for row in ("weights", "non_torch", "activation", "kv_room"))
        # A plan whose rows came partly from a log (or nvidia-smi totals only) is not told to import one.
        why = ("the rows the measurements do not state are estimates (hatched cells); the measured ones are kept"
               if measured else "weights, non-torch, CUDA-graph and activation rows are estimates; import a vLLM "
               "startup log to replace them with measurements")
        out.append(Warning("estimated_rows", why))
        if plan.model.multimodal and plan.model.vision is None:
            out.append(
                Warning(
                    "encoder_profile_not_estimated",
                    "this is a multimodal model whose vision encoder the estimate cannot size (only Qwen-VL towers "
                    "are modelled): vLLM also profiles the encoder, so expect less KV",
                )
            )
        elif plan.model.multimodal:
            out.append(
                Warning(
                    "encoder_profile_image_only",
                    "the vision encoder's profile is estimated for one maximum-size image; vLLM profiles the "
                    "modality with the most tokens, and a video item can be larger (Qwen3-VL-30B-A3B at TP4 on "
                    "RTX 3090: 1.4 GiB more than estimated, bench/RESULTS-estimates.md); expect less KV",
                )
            )
    return tuple(out)


def _null_block_clause(result: PlanResult) -> str:
    adm = result.admission
    if not adm.null_block_in_check:
        return ""
    return (
        f" ({adm.blocks:,} blocks, less the null block vLLM keeps back: vLLM {result.rules.label} checks "
        f"{adm.usable_blocks:,} against the {adm.per_request_blocks:,} one request needs, PR #47272)"
    )


def _largest_servable(result: PlanResult) -> int:
    """The largest max_model_len whose worst case fits the usable blocks (null block left out)."""
    adm, engine = result.admission, result.plan.engine
    kv = max(0, (adm.blocks - 1) * result.rkv.page_bytes)
    return result.rkv.largest_max_model_len(kv, engine.max_num_batched_tokens)


def _spread_warnings(result: PlanResult) -> list[Warning]:
    out: list[Warning] = []
    spread = free_spread(result.ledgers)
    if spread is not None and spread > result.plan.policy.free_spread_threshold_bytes:
        engine, rules = result.plan.engine, result.rules
        message = free_gap_message(result.ledgers, rules.free_memory_preflight, engine.gpu_memory_utilization,
                                   engine.kv_cache_memory_bytes, rules.label)
        if message is not None:
            out.append(Warning("free_memory_spread", *message))
    kvs = kv_column(result.ledgers)
    if len(kvs) >= 3:
        ordered = kv_order(result.ledgers)[1]
        median = _sorted_median(ordered)
        # |kv − median| is largest at the two ends: when neither is an outlier, no rank is
        if median > 0 and max(median - ordered[0], ordered[-1] - median) > 0.1 * median:
            labels = labels_of(result.ledgers)
            for label, kv in zip(labels, kvs, strict=True):
                if abs(kv - median) > 0.1 * median:
                    out.append(
                        Warning(
                            "rank_outlier",
                            f"rank {label} has {fmt_bytes(kv)} of KV, far from the median {fmt_bytes(int(median))}",
                            label,
                        )
                    )
    return out


def _sorted_median(ordered: Sequence[int]) -> float | int:
    """``statistics.median`` of values already sorted (the same value, the same arithmetic)."""
    n = len(ordered)
    return ordered[n // 2] if n % 2 == 1 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
