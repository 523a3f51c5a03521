"""A parsed vLLM startup log becomes a measured plan, and is checked against the model.

A run of the parsed log (the `kvledger import-log --json` contract) gives per-rank rows as
measured cells: total, free at start, weights, non-torch, activation, CUDA graphs and the
"Available KV cache memory" as the rank's measured KV room. vLLM ≥ 0.11.1 prints most lines on
local rank 0 only, so ranks missing from the log are unknown — they are left out, never zero,
and the plan says so. When the model's config is known (catalogue or supplied), blocks and
tokens are recomputed from the parsed KV bytes and compared with the logged figures.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from app.core.errors import InputError
from app.core.kvspec import RankKV, rank_kv_uniform
from app.services.blocks_room import logged_blocks
from app.services.imported_runs import advice_notes, graphs_in_budget
from app.services.rank_kv_memo import RankKVMemo
from app.services.rowless_ranks import fill_rowless, layout_notes

if TYPE_CHECKING:  # imported where a plan is built: `kvledger import-log` (residuals only) needs no pydantic
    from app.schemas import PlanDocument

JSON = dict[str, Any]


def parse_log_text(text: str) -> JSON:
    from app.ingest.vllm_log import log_parse_to_json, parse_vllm_log

    return log_parse_to_json(parse_vllm_log(text))


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def log_run(parsed: Mapping[str, object], index: int) -> Mapping[str, Any]:
    """Run `index` of a parsed log, or an InputError saying what the log holds."""
    runs = parsed.get("runs")
    if not isinstance(runs, list) or not runs:
        raise InputError("from_log", "the log has no vLLM engine start with memory lines")
    if index >= len(runs):
        raise InputError("log_run", f"the log has {len(runs)} engine start(s); run {index} does not exist")
    run = runs[index]
    if not isinstance(run, Mapping):
        raise InputError("from_log", f"runs[{index}] is not an object")
    return run


def catalogue_config_for(model_name: str | None) -> tuple[str, Mapping[str, object]] | None:
    """(slug, config) of the catalogue entry a logged model name refers to, if any."""
    if not model_name:
        return None
    from app.ingest.catalogue import find_model

    for key in (model_name, model_name.rstrip("/").split("/")[-1]):
        entry = find_model(key)
        if entry is not None:
            return entry.slug, entry.config
    return None


def ranks_from_run(run: Mapping[str, Any]) -> list[JSON]:
    """Plan-document rank entries from a parsed run's rank records."""
    out: list[JSON] = []
    in_budget = graphs_in_budget(run)
    for rec in run.get("ranks") or []:
        if not isinstance(rec, Mapping):
            continue
        entry: JSON = {"label": str(rec.get("rank") or f"pid={rec.get('pid')}")[:64]}
        estimate = in_budget and rec.get("cuda_graph_estimate_bytes") is not None
        graphs = "cuda_graph_estimate_bytes" if estimate else "cuda_graph_bytes"
        for key, src in (
            ("total", "total_bytes"),
            ("free_at_start", "free_at_start_bytes"),
            ("weights", "weights_bytes"),
            ("non_torch", "non_torch_bytes"),
            ("activation", "activation_bytes"),
            ("cuda_graphs", graphs),
            ("kv_room", "kv_bytes"),
        ):
            value = _as_int(rec.get(src))
            if value is not None and value >= 0:
                entry[key] = value
        if "kv_room" in entry or "total" in entry:
            out.append(entry)
    return out


_SIZES = (("tp", "tensor_parallel_size"), ("pp", "pipeline_parallel_size"), ("dp", "data_parallel_size"))
#: Engine settings the measured rows depend on: a document value other than the run's is a what-if.
_RUN_KNOBS = frozenset({"gpu_memory_utilization", "max_num_batched_tokens"})


def document_from_log(doc: PlanDocument, read_log: Callable[[str], str] | None) -> PlanDocument:
    """Replace `from_log` by the measured ranks and settings of the chosen run."""
    source = doc.from_log
    if isinstance(source, str):
        if read_log is None:
            raise InputError(
                "from_log", "a file path is only accepted on the command line; send the log text or parsed JSON"
            )
        parsed = parse_log_text(read_log(source))
    elif isinstance(source, Mapping) and "runs" in source:
        parsed = dict(source)
    elif isinstance(source, Mapping) and isinstance(source.get("text"), str):
        parsed = parse_log_text(str(source["text"]))
    else:
        raise InputError("from_log", "give a file path, {text: log text} or the parsed JSON ({runs: […]})")
    run = log_run(parsed, doc.log_run)
    data = doc.model_dump(exclude_none=True, exclude={"from_log", "log_run"})
    settings: Mapping[str, Any] = run.get("settings") or {}
    ranks = ranks_from_run(run)
    unmeasured = None  # why no rank has memory rows: its logged blocks may still give the KV room
    if not ranks:
        unmeasured = f"run {doc.log_run} states no per-rank memory (no KV or total memory lines)"
    ranks, notes = fill_rowless(ranks, _run_pp(doc, run, settings))
    if not ranks and unmeasured is None:
        unmeasured = (
            f"run {doc.log_run}: no rank states its rows or its KV memory (only budget lines), so no ledger can "
            "be measured from it; plan it from the home page with the GPU and layout instead (estimated rows)"
        )
    block_size = _as_int(settings.get("block_size")) or _as_int((run.get("engine") or {}).get("block_size")) or 16
    if "block_size" in doc.engine.model_fields_set:
        block_size = doc.engine.block_size
    if unmeasured is not None and logged_blocks(run, block_size) is None:
        tokens = _as_int((run.get("engine") or {}).get("kv_tokens"))
        raise InputError("from_log", unmeasured if tokens is None else (
            f"{unmeasured}; its GPU KV cache size ({tokens:,} tokens) gives no block count: it is not a whole number "
            f"of {block_size}-token blocks, or with its max_model_len and concurrency it can stand for another count "
            "(vLLM ≥ 2026-04 prints int(max_concurrency × max_model_len))"))
    data["ranks"] = ranks
    engine: JSON = dict(data.get("engine") or {})
    whatif: JSON = dict(data.get("whatif") or {})
    for key in ("gpu_memory_utilization", "max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size"):
        value = settings.get(key)
        if value is None:
            continue
        given = engine.get(key)  # None also when the document sets the field to null
        if given is None:
            engine[key] = value
        elif key in _RUN_KNOBS and given != value:
            # The rows were measured at the logged value: the document's own value is a what-if on top.
            whatif.setdefault(key, given)
            engine[key] = value
    if settings.get("quantization") == "fp8" and engine.get("quantization") is None:
        # `--quantization fp8` on the run: its weights row is already the quantized one (on an FP8
        # checkpoint the flag changes nothing, and the plan treats it so).
        engine["quantization"] = "fp8"
    if settings.get("quantization") in ("awq", "gptq") and engine.get("quantization") is None:
        # The engine config line's resolved `quantization=awq` / `gptq` (not awq_marlin / gptq_marlin) is the
        # plain dequantizing kernel, as `--quantization awq` forces it (app.core.dequant_linear).
        engine["quantization"] = settings["quantization"]
    dtype = settings.get("kv_cache_dtype")
    if isinstance(dtype, str) and "kv_cache_dtype" not in doc.engine.model_fields_set:
        engine["kv_cache_dtype"] = dtype
    # the sampler's path sizes the estimated activation; VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 goes to the deploy files
    for key in ("enforce_eager", "flashinfer_sampler", "allow_long_max_model_len"):
        if settings.get(key) is not None and key not in doc.engine.model_fields_set:
            engine[key] = bool(settings[key])
    data["engine"] = engine
    if doc.model is None:
        try:
            data["model"] = _model_for_run(run, settings)
            from_log_note = derived_bytes_note(run, data["model"])
            if from_log_note is not None:
                notes.append(from_log_note)
        except InputError as exc:
            if unmeasured is None:
                raise
            raise InputError("from_log", f"{unmeasured}; its logged block count gives the KV room once the model "
                             f"is known: {exc.message}") from None
    stated = settings.get("quantization")
    if not isinstance(stated, str) or stated == "none":
        # no engine config line: a kernel line's linear method (vllm_log_config.kernel_method)
        stated = settings.get("quantization_method") if stated is None else None
    if isinstance(stated, str) and isinstance(data.get("model"), dict):
        # The engine config line's `quantization=` is the method vLLM resolved for the checkpoint
        # (ModelConfig._verify_quantization, vllm/config/model.py @4dd49b06f): the measured weights
        # rows are that checkpoint's, even when the chosen catalogue model is its bf16 original.
        data["model"] = {**data["model"], "quantization": stated}
    layout: JSON = dict(data.get("layout") or {})
    from_blocks = None
    for key, src in _SIZES:
        stated = _as_int(settings.get(src)) or _stated(run, key)
        derived = _tp_from_blocks(run, data.get("model"), settings) if key == "tp" and not stated else None
        if derived is not None and derived < (_at_least(run, key) or 1):
            derived = None
        if derived is not None:
            from_blocks = derived
            notes.append(f"TP {derived}: the degree at which the model's page turns the smallest logged KV memory "
                         "into the block count the engine logged (the log does not state it)")
        value = stated or derived or _at_least(run, key) or (tp_from_ranks(run) if key == "tp" else None)
        if not value:
            continue
        given = layout.get(key)
        if key not in doc.layout.model_fields_set or given is None:
            layout[key] = value
        elif key == "tp" and (given != stated if stated else given < value):
            # A TP degree other than the one the log states, or below the TP<n> worker prefixes it
            # prints: re-shard the run's rows. (Prefixes give only a lower bound: a document degree
            # above them is taken as the run's.)
            whatif.setdefault("tp", given)
            layout[key] = value
    if "expert_parallel" not in doc.layout.model_fields_set and _expert_parallel(run):
        layout["expert_parallel"] = True  # the run's own --enable-expert-parallel, for its deploy command
    data["layout"] = layout
    workers = layout.get("tp", 1) * layout.get("pp", 1)
    if unmeasured is not None:
        ranks = data["ranks"] = _ranks_from_blocks(run, data.get("model"), layout, engine, workers, unmeasured, notes)
    _logged_engine_layers(doc, run, engine, workers, notes)
    notes.extend(fit_logged_blocks(ranks, run, data.get("model"), layout, engine))
    if len(ranks) < len(run.get("ranks") or []) or len(ranks) % workers:
        data["ranks_partial"] = True  # the workers the log prints, not every worker of the layout
    if from_blocks is None and not any(
        k in doc.layout.model_fields_set or _stated(run, k) or settings.get(src) for k, src in _SIZES
    ):
        notes.extend(layout_notes(len(run.get("ranks") or []), layout))
    notes.extend(advice_notes(run))
    if notes:
        data["notes"] = [*data.get("notes", []), *notes]
    if whatif:
        data["whatif"] = whatif
    if doc.vllm_version is None:
        version = run_version(run)
        mla_version, mla_note = mla_era_version(run, data.get("model"))
        if mla_version is not None:
            version = mla_version
            data["notes"] = [*data.get("notes", []), mla_note]
        if version is not None:
            data["vllm_version"] = version
    from app.schemas import PlanDocument

    return PlanDocument.model_validate(data)


def _ranks_from_blocks(run: Mapping[str, Any], model: object, layout: Mapping[str, Any], engine: Mapping[str, Any],
                      workers: int, unmeasured: str, notes: list[str]) -> list[JSON]:
    """The ranks of a run that states no KV memory, their room from the engine's logged blocks
    (`blocks_room`), with the notes that say how and what cannot be checked; else an InputError."""
    from app.services.blocks_room import ranks_from_blocks, run_room
    from app.services.imported_runs import model_config_of

    config = model_config_of(model if isinstance(model, Mapping) else None)
    if config is None:
        raise InputError("from_log", f"{unmeasured}; the logged block count gives the KV room only with the "
                         "model's shape: choose the model or give its config.json")
    try:
        room = run_room(run, config, int(layout.get("tp", 1)), int(layout.get("pp", 1)),
                        str(engine.get("kv_cache_dtype") or "auto"), _as_int(engine.get("block_size")) or 16,
                        full_kv=_caches_full_kv(run, config))
    except InputError as exc:
        raise InputError("from_log", f"{unmeasured}, and its logged blocks give none: {exc.message}") from None
    ranks = ranks_from_blocks(run, room, workers)
    notes.append(room.note())  # what it cannot check is the plan's note (plan_inputs), as its totals stand
    return ranks


def _logged_blocks(run: Mapping[str, Any], rkv: RankKV, lo: int, hi: int, max_model_len: int | None) -> int | None:
    """The block count the engine logged, when one count in [lo, hi] states it: `num_gpu_blocks`,
    else the "GPU KV cache size" tokens — blocks × block_size, or (vLLM's `_report_kv_cache_config`,
    vllm/v1/core/kv_cache_utils.py @4dd49b06f) int(max_concurrency × max_model_len) with
    max_concurrency = blocks / cdiv(max_model_len, block_size) for one full-attention group."""
    engine: Mapping[str, Any] = run.get("engine") or {}
    blocks = _as_int(engine.get("num_gpu_blocks"))
    if blocks is not None:
        return blocks if lo <= blocks <= hi else None
    tokens = _as_int(engine.get("kv_tokens"))
    if tokens is None or tokens <= 0:
        return None
    per_request = -(-max_model_len // rkv.block_size) if max_model_len else 0
    found = {b for b in range(lo, hi + 1) if b * rkv.block_size == tokens
             or (per_request and int(b / per_request * (max_model_len or 0)) == tokens)}  # fmt: skip
    return found.pop() if len(found) == 1 else None


def fit_logged_blocks(ranks: list[JSON], run: Mapping[str, Any], model: object, layout: Mapping[str, Any],
                      engine: Mapping[str, Any]) -> list[str]:
    """Refine the ranks' KV room, within its printed precision, to the block count the engine logged.

    "Available KV cache memory: 54.09 GiB" is rounded to 10 MiB, i.e. ±6 blocks of Llama-70B at
    TP4: the plan recomputed 44,310 blocks (708,960 tokens) from the printed figure where the
    same log states 708,992 tokens (44,312 blocks; public 32). vLLM gives every worker the
    minimum block count (`get_kv_cache_configs`, vllm/v1/core/kv_cache_utils.py @4dd49b06f), so the
    logged count is the measurement: each rank's KV room moves to the nearest bytes inside its
    printed interval that hold it. Only one full-attention KV group (where the count maps to bytes
    one to one) and only within the printed precision: anything else is left as printed, and the
    residuals say how far apart they are. Returns the plan's notes."""
    from app.services.imported_runs import model_config_of

    config = model_config_of(model if isinstance(model, Mapping) else None)
    entries = [e for e in ranks if isinstance(e.get("kv_room"), int) and e["kv_room"] > 0]
    recs = {str(r.get("rank") or f"pid={r.get('pid')}")[:64]: r for r in run.get("ranks") or []
            if isinstance(r, Mapping)}  # fmt: skip
    if config is None or not entries:
        return []
    block_size = _as_int(engine.get("block_size")) or 16
    try:
        rkv = RankKVMemo().rank_kv(config, tp=int(layout.get("tp", 1)), pp=int(layout.get("pp", 1)),
                                   kv_cache_dtype=str(engine.get("kv_cache_dtype") or "auto"), block_size=block_size)
    except (InputError, TypeError, ValueError):
        return []
    if rkv.n_groups != 1 or rkv.dcp != 1 or rkv.page_bytes_per_layer <= 0:
        return []
    unit = rkv.page_bytes_per_layer * rkv.group_size  # bytes of one block on this rank
    spans = []
    for e in entries:
        tol = _as_int(((recs.get(e["label"]) or {}).get("tolerance") or {}).get("kv_bytes")) or 0
        spans.append((e, e["kv_room"] - tol, e["kv_room"] + tol))
    computed = min(rkv.blocks_for(e["kv_room"]) for e in entries)
    lo = min(rkv.blocks_for(max(0, low)) for _, low, _ in spans)
    hi = min(rkv.blocks_for(high) for _, _, high in spans)
    mml = _as_int((run.get("engine") or {}).get("max_concurrency_tokens")) or _as_int(engine.get("max_model_len"))
    logged = _logged_blocks(run, rkv, lo, hi, mml)
    if logged is None:
        return _blocks_beyond_memory(run, rkv, hi, layout)
    if logged == computed:
        return []
    moved = []
    low_kv = min(e["kv_room"] for e in entries)
    for e, low, high in spans:
        kv = e["kv_room"]
        if rkv.blocks_for(kv) < logged:
            new = max(low, logged * unit)  # the fewest bytes that hold the logged blocks
        elif rkv.blocks_for(kv) > logged and kv == low_kv:
            new = min(high, (logged + 1) * unit - 1)  # the rank that bound: the most bytes at that count
        else:
            continue
        if not low <= new <= high or rkv.blocks_for(new) < logged:
            return []  # outside the printed precision: leave the rows as printed (the residuals show it)
        e["kv_room"] = new
        moved.append(e["label"])
    if not moved:
        return []
    return [f"KV memory of {', '.join(moved)} refined within its printed precision to the {logged:,} blocks the "
            f"engine logged (recomputed from the printed figure: {computed:,})"]


def _blocks_beyond_memory(run: Mapping[str, Any], rkv: RankKV, hi: int, layout: Mapping[str, Any]) -> list[str]:
    """The plan's note where the engine logged more blocks than the logged KV memory holds at the plan's
    page (the import's `blocks_exceed_memory` finding): the layout or the model is not the run's, and
    the plan's tokens are not the run's. (Fewer blocks than the memory holds can be a worker the log
    does not print: vLLM gives every worker the minimum.) A public excerpt of vLLM issue #21348,
    Qwen3-235B-A22B-FP8 at TP4 printing only "Available KV cache memory: 8.11 GiB" and "GPU KV cache
    size: 178,880 tokens", opened at TP1 with 45,232 tokens and no word."""
    engine: Mapping[str, Any] = run.get("engine") or {}
    blocks = _as_int(engine.get("num_gpu_blocks"))
    tokens = _as_int(engine.get("kv_tokens"))
    if blocks is None and tokens and tokens % rkv.block_size == 0:
        blocks = tokens // rkv.block_size
    if blocks is None or blocks <= hi:
        return []
    stated = f"{blocks:,} blocks" + (f" ({tokens:,} tokens)" if tokens else "")
    return [f"the log states {stated}, more than its KV memory holds at this plan's TP{layout.get('tp', 1)} × "
            f"PP{layout.get('pp', 1)} page (at most {hi:,} blocks): the run's layout or model is not this plan's, "
            "so its tokens are not the run's; give TP and PP on the import page (layout.tp, layout.pp) or the "
            "run's model"]


def _logged_engine_layers(doc: PlanDocument, run: Mapping[str, Any], engine: JSON, workers: int,
                          notes: list[str]) -> None:
    """The run's KV offload tier and prefix-caching setting, where its log states them (issue 15)."""
    from app.services.plan_layers import logged_offload

    offload, note = logged_offload(run, workers)
    if offload is not None and "kv_offload" not in doc.engine.model_fields_set:
        engine["kv_offload"] = offload
    if note is not None and "kv_offload" not in doc.engine.model_fields_set:
        notes.append(note)
    prefix = (run.get("settings") or {}).get("enable_prefix_caching")
    if isinstance(prefix, bool) and "enable_prefix_caching" not in doc.engine.model_fields_set:
        engine["enable_prefix_caching"] = prefix


def _stated(run: Mapping[str, Any], key: str) -> int | None:
    """A layout size the run states (engine config / args, or exact from worker names)."""
    entry = (run.get("layout") or {}).get(key)
    return _as_int(entry.get("value")) if isinstance(entry, Mapping) else None


def _at_least(run: Mapping[str, Any], key: str) -> int | None:
    """A lower bound on a layout size from the worker names the run prints (vllm_log_layout)."""
    entry = (run.get("layout") or {}).get(key)
    return _as_int(entry.get("at_least")) if isinstance(entry, Mapping) else None


def _run_pp(doc: PlanDocument, run: Mapping[str, Any], settings: Mapping[str, Any]) -> int | None:
    """The run's pipeline degree: given with the import, else stated by the log, else unknown."""
    if "pp" in doc.layout.model_fields_set:
        return doc.layout.pp
    return _as_int(settings.get("pipeline_parallel_size")) or _stated(run, "pp")


def _expert_parallel(run: Mapping[str, Any]) -> bool:
    """Whether the run had expert parallel on: its non-default args say so, or workers print an EP
    index (`_EP{ep_rank}` is in a worker's name only with expert parallel on, multiproc_executor.py @28be48fa)."""
    args = (run.get("settings") or {}).get("non_default_args")
    if isinstance(args, Mapping) and args.get("enable_expert_parallel") is True:
        return True
    ep = (run.get("layout") or {}).get("ep")
    return isinstance(ep, Mapping) and bool(ep.get("value") or ep.get("at_least"))


def _tp_from_blocks(run: Mapping[str, Any], model: object, settings: Mapping[str, Any]) -> int | None:
    """The TP degree the logged engine blocks imply for a known model (`imported_runs.tp_from_blocks`)."""
    from app.services.imported_runs import model_config_of, tp_from_blocks

    config = model_config_of(model if isinstance(model, Mapping) else None)
    if config is None or _as_int(settings.get("tensor_parallel_size")):
        return None
    return tp_from_blocks(run, config, _as_int(settings.get("pipeline_parallel_size")) or 1)


def run_version(run: Mapping[str, Any]) -> str | None:
    """The run's vLLM version: as stated, else the lowest the log's formats allow (its accounting rules)."""
    if isinstance(run.get("vllm_version"), str):
        return str(run["vllm_version"])
    inferred = run.get("version")
    if isinstance(inferred, Mapping) and isinstance(inferred.get("inferred_min"), str):
        return str(inferred["inferred_min"])
    return None


def mla_era_version(run: Mapping[str, Any], model: object) -> tuple[str | None, str]:
    """An MLA model's run whose inferred version range straddles v0.7.1 (where vLLM began caching the
    latent, PR #12528/#12601: app.core.mla_rules) is read at 0.7.1, not at the range's lowest version,
    which would size full K/V; (None, "") for any other run. A stated version is always taken as it is."""
    from app.core.mla_rules import MLA_SINCE
    from app.core.versions import parse_version
    from app.services.imported_runs import model_config_of

    inferred = run.get("version")
    if isinstance(run.get("vllm_version"), str) or not isinstance(inferred, Mapping):
        return None, ""
    low, high = inferred.get("inferred_min"), inferred.get("inferred_max_exclusive")
    if not isinstance(low, str) or not isinstance(high, str):
        return None, ""
    config = model_config_of(model if isinstance(model, Mapping) else None)
    text = config.get("text_config") if isinstance(config, Mapping) else None
    mla = isinstance(config, Mapping) and (config.get("kv_lora_rank") is not None or (
        isinstance(text, Mapping) and text.get("kv_lora_rank") is not None))
    if not mla or not parse_version(low) < MLA_SINCE < parse_version(high):
        return None, ""
    label = ".".join(str(p) for p in MLA_SINCE)
    return label, (
        f"the log's format dates it ≥ {low} < {high}, across v{label}, where vLLM began caching the MLA latent "
        f"(before it: full K/V); read at {label}, the lowest version that caches the latent as this MLA model's run "
        "most likely did. State vllm_version to size it at another"
    )


def _caches_full_kv(run: Mapping[str, Any], config: Mapping[str, object]) -> bool:
    """Whether the run's vLLM cached an MLA model's full K/V (app.core.mla_rules.mla_decision) at the
    version the plan reads it at (`run_version`, or 0.7.1 for a range across it: `mla_era_version`)."""
    from app.core.mla_rules import mla_decision

    text = config.get("text_config")
    if config.get("kv_lora_rank") is None and not (isinstance(text, Mapping) and text.get("kv_lora_rank") is not None):
        return False
    version = mla_era_version(run, {"config": config})[0] or run_version(run)
    if version is None:
        return False
    qc = config.get("quantization_config")
    method = qc.get("quant_method") if isinstance(qc, Mapping) else None
    return not mla_decision(version, method if isinstance(method, str) else None).latent


def _model_for_run(run: Mapping[str, Any], settings: Mapping[str, Any]) -> JSON:
    name = settings.get("model") if isinstance(settings.get("model"), str) else None
    found = catalogue_config_for(name)
    if found is not None:
        return {"catalogue": found[0], "name": name}
    per_token = bytes_per_token_from_run(run)
    if per_token is None:
        raise InputError(
            "model",
            f"the log's model ({name or 'not stated'}) is not in the catalogue and its KV lines do not "
            "give bytes per token: choose the model (the import page's Model list, or model.catalogue "
            "in a plan document) or give its config.json (pasted on the import page, or model.config)",
        )
    return {"kv_bytes_per_token": per_token, "name": name}


def derived_bytes_note(run: Mapping[str, Any], model: Mapping[str, Any]) -> str | None:
    """What a model given by the log's own bytes per token means: the largest figure its smallest KV
    memory and block count allow (`bytes_per_token_from_run`); the page vLLM used can be a few bytes
    smaller (log 14, Qwen3-235B-A22B at TP8: 48,129 read, the model's 48,128), so say the range."""
    per_token = _as_int(model.get("kv_bytes_per_token"))
    engine: Mapping[str, Any] = run.get("engine") or {}
    blocks = _as_int(engine.get("num_gpu_blocks"))
    block_size = _as_int(engine.get("block_size")) or _as_int((run.get("settings") or {}).get("block_size")) or 16
    kvs = [k for r in run.get("ranks") or [] if isinstance(r, Mapping) and (k := _as_int(r.get("kv_bytes")))]
    if per_token is None or not blocks or not kvs:
        return None
    low = min(k for k in kvs if k > 0) // ((blocks + 1) * block_size) + 1
    span = f"{per_token:,} B" if low >= per_token else f"{low:,} – {per_token:,} B (the largest is planned)"
    return (f"KV bytes per token per rank from the log, not from the model: its smallest KV memory over "
            f"{blocks:,} blocks of {block_size} tokens gives {span}; choose the model (or give its config.json) "
            "for the exact figure, its weights and its layers")


def bytes_per_token_from_run(run: Mapping[str, Any]) -> int | None:
    """Per-rank bytes per token implied by a run's KV bytes and block count (an estimate)."""
    engine: Mapping[str, Any] = run.get("engine") or {}
    blocks = _as_int(engine.get("num_gpu_blocks"))
    block_size = _as_int(engine.get("block_size")) or _as_int((run.get("settings") or {}).get("block_size")) or 16
    kvs = [_as_int(r.get("kv_bytes")) for r in run.get("ranks") or [] if isinstance(r, Mapping)]
    kv_values = [k for k in kvs if k and k > 0]  # a negative KV figure (a failed start) implies nothing
    if not blocks or blocks < 0 or not kv_values:
        return None
    implied = min(kv_values) // (blocks * block_size)
    bound = _per_worker_bound(run, engine)
    return (implied if bound is None else min(implied, bound)) or None


def _printed_int(item: object) -> int | None:
    printed = item.get("printed") if isinstance(item, Mapping) else None
    text = printed.replace(",", "") if isinstance(printed, str) else ""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 16 else None


def _per_worker_bound(run: Mapping[str, Any], engine: Mapping[str, Any]) -> int | None:
    """The largest bytes per token every rank's own token figure allows, or None.

    v0.8.2–v0.11.0 print one `GPU KV cache size` per worker (before the minimum; vllm/v1/core/
    kv_cache_utils.py `get_kv_cache_configs` @72c99f2a): worker i holds floor(kv_i / page) blocks, so
    bytes per token ≤ kv_i // tokens_i for each. Blocks grow with KV memory, so the figures pair
    with the ranks' KV bytes in sorted order (the lines name no rank). The binding rank alone allows
    a value one byte too large when its KV bytes sit just above a block boundary (log 14: 48,129 B for
    Qwen3-235B's 48,128 = 94 layers × 1 KV head × 128 × 2 × 2 B, which put 4 of its 8 ranks one block
    below the 14,837 / 14,845 blocks their own lines print)."""
    evidence = (engine.get("evidence") or {}).get("kv_tokens")
    if not isinstance(evidence, Mapping):
        return None
    tokens = [_printed_int(evidence), *(_printed_int(x) for x in evidence.get("also") or [])]
    ranks = [r for r in run.get("ranks") or [] if isinstance(r, Mapping) and (_as_int(r.get("kv_bytes")) or 0) > 0]
    if len(tokens) < 2 or len(tokens) != len(ranks) or any(t is None or t <= 0 for t in tokens):
        return None
    room = sorted((_as_int(r.get("kv_bytes")) or 0) + (_as_int((r.get("tolerance") or {}).get("kv_bytes")) or 0)
                  for r in ranks)
    return min(kv // t for kv, t in zip(room, sorted(t for t in tokens if t is not None), strict=True))


def residuals(run: Mapping[str, Any], config: Mapping[str, object] | None, per_token: int | None = None,
              memo: RankKVMemo | None = None, layout: Mapping[str, int] | None = None) -> JSON:
    """Blocks and tokens recomputed from each rank's parsed KV bytes, against the logged figures.

    Rank by rank where the log states a rank's own figure (per-worker lines of v0.8.2–v0.11.0),
    and for the engine: the minimum recomputed block count against the block count vLLM used.
    A logged block count that cannot fit the stated KV memory becomes a finding. `memo`: the
    model's KV geometry reused across the caller's runs (`RankKVMemo`); without one it is computed.
    `layout`: the TP/PP given with the import, for a log that does not state them.
    """
    rkv = _rkv_for_run(run, config, per_token, memo or RankKVMemo(), layout or {})
    if rkv is None:
        return {
            "ranks": [],
            "engine": None,
            "findings": [],
            "basis": "The log does not name a catalogue model, so blocks cannot be recomputed: "
            "give the model's config.json (CLI: --config).",
        }
    engine: Mapping[str, Any] = run.get("engine") or {}
    logged_engine = _as_int(engine.get("num_gpu_blocks"))
    logged_tokens = _as_int(engine.get("kv_tokens"))
    if logged_engine is None and logged_tokens is not None and rkv.block_size > 0:
        logged_engine = logged_tokens // rkv.block_size * rkv.n_groups
    ranks, findings = [], []
    bounds: list[int] = []  # per rank: the largest KV memory its printed figure allows
    for rec in run.get("ranks") or []:
        kv = _as_int(rec.get("kv_bytes")) if isinstance(rec, Mapping) else None
        if kv is None:
            continue
        computed = rkv.blocks_for(kv)
        own = _as_int(rec.get("num_gpu_blocks"))
        if own is None and _as_int(rec.get("kv_tokens")) is not None and rkv.block_size > 0:
            own = (_as_int(rec.get("kv_tokens")) or 0) // rkv.block_size * rkv.n_groups
        tol = _as_int((rec.get("tolerance") or {}).get("kv_bytes")) or 0
        ranks.append(
            {
                "rank": rec.get("rank"),
                "kv_bytes": kv,
                "computed_blocks": computed,
                "computed_tokens": rkv.tokens_for_blocks(computed),
                "logged_blocks": own,
                "residual_blocks": None if own is None else computed - own,
                "tolerance_blocks": -(-tol * rkv.n_groups // max(1, rkv.page_bytes)) + 1 if tol else 0,
            }
        )
        # The stated KV is the printed figure ("59.32 GiB"): the memory vLLM divided into blocks may be up to
        # its printed precision (`tol`) larger, so only more blocks than that bound holds contradict the log
        # (a figure rounded down made logs 35, 36 and 53 look overfull by 3-15 blocks within their 56-111).
        bounds.append(kv + tol)
        if own is not None and own * rkv.page_bytes > kv + tol + rkv.page_bytes:
            findings.append(_overfull(rec.get("rank"), own, kv, rkv.page_bytes))
    engine_json = None
    if ranks:
        computed_min = min(r["computed_blocks"] for r in ranks)
        tol_blocks = max(r["tolerance_blocks"] for r in ranks)
        residual = None if logged_engine is None else computed_min - logged_engine
        engine_json = {
            "computed_blocks": computed_min,
            "computed_tokens": rkv.tokens_for_blocks(computed_min),
            "logged_blocks": logged_engine,
            "residual_blocks": residual,
            "tolerance_blocks": tol_blocks,
            "within_printed_precision": None if residual is None else abs(residual) <= tol_blocks,
        }
        min_kv = min(r["kv_bytes"] for r in ranks)
        if logged_engine is not None and logged_engine * rkv.page_bytes > min(bounds) + rkv.page_bytes:
            findings.append(_overfull("engine", logged_engine, min_kv, rkv.page_bytes))
    return {
        "ranks": ranks,
        "engine": engine_json,
        **({} if ranks or config is None else {"kv_room_from_blocks": _room_json(run, rkv)}),
        "findings": findings,
        "page_bytes": rkv.page_bytes,
        "block_size": rkv.block_size,
        "kv_bytes_per_token": rkv.kv_bytes_per_token,
    }


def _room_json(run: Mapping[str, Any], rkv: RankKV) -> JSON | None:
    """A run that states no KV memory: the room its logged blocks give each rank (`blocks_room`),
    or None (no block count, several pipeline stages, or a geometry where blocks are not bytes)."""
    from app.services.blocks_room import room_from_blocks, unchecked_note

    found = logged_blocks(run, rkv.block_size)
    if found is None or rkv.pp > 1:
        return None
    try:
        room = room_from_blocks(rkv, *found).as_json()
    except InputError:
        return None
    recs = [r for r in run.get("ranks") or [] if isinstance(r, Mapping)]
    return {**room, "unchecked": unchecked_note(bool(recs) and all(_as_int(r.get("total_bytes")) for r in recs))}


def tp_from_ranks(run: Mapping[str, Any]) -> int | None:
    """The TP degree implied by worker prefixes (Worker_TP7… → at least 8) when the log does not state it."""
    best = None
    for rec in run.get("ranks") or []:
        label = str(rec.get("rank") or "") if isinstance(rec, Mapping) else ""
        match = re.search(r"TP(\d+)", label)
        if match:
            best = max(best or 0, int(match.group(1)) + 1)
    return best


def _overfull(rank: object, blocks: int, kv: int, page: int) -> JSON:
    return {
        "code": "blocks_exceed_memory",
        "message": f"{rank}: the log states {blocks:,} blocks, which need {blocks * page:,} B at {page:,} B per block, "
        f"but only {kv:,} B of KV memory is stated — the log contradicts itself or the model/layout is not what "
        "it seems",
        "line": None,
        "rank": rank,
    }


def _rkv_for_run(run: Mapping[str, Any], config: Mapping[str, object] | None, per_token: int | None,
                 memo: RankKVMemo, layout: Mapping[str, int]) -> RankKV | None:
    settings: Mapping[str, Any] = run.get("settings") or {}
    engine: Mapping[str, Any] = run.get("engine") or {}
    block_size = _as_int(engine.get("block_size")) or _as_int(settings.get("block_size")) or 16
    if config is not None:
        return memo.rank_kv(
            config,
            # what the log states, else what the import gave (its TP/PP fields), else the ranks it printed
            tp=_as_int(settings.get("tensor_parallel_size")) or layout.get("tp") or tp_from_ranks(run) or 1,
            pp=_as_int(settings.get("pipeline_parallel_size")) or layout.get("pp") or 1,
            kv_cache_dtype=str(settings.get("kv_cache_dtype") or "auto"),
            block_size=block_size,
            full_kv=_caches_full_kv(run, config),
        )
    if per_token:
        return rank_kv_uniform(per_token, block_size)
    return None
