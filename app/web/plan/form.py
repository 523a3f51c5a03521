"""The plan form's context: each knob's value, placeholder and options (from the result when
there is one, else the query, the base document and the defaults, so an invalid input still
shows its form with the error beside the field)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.dequant_linear import plain_kernel
from app.core.errors import InputError
from app.core.gpus import PRESETS
from app.core.kvspec import KV_CACHE_DTYPES
from app.core.lora import allowed_ranks
from app.core.speculative import METHODS as SPEC_METHODS
from app.core.versions import parse_version, rules_for
from app.services import model_input, plan_query
from app.web import querystring
from app.web.plan import views

#: The form's fields: one per knob of the knob table.
FORM_KEYS = tuple(knob.key for knob in plan_query.KNOBS)
#: The form's GPU-memory fields, shown only when no measured base document gives the memory.
MEMORY_KEYS = frozenset({"gpu", "gpu_free", "ranks"})


def error_slot_keys(show_memory: bool) -> tuple[str, ...]:
    """The `#err-KEY` slots the plan form renders: a fragment swaps out-of-band only into these
    (htmx logs a console error for an out-of-band target the page lacks)."""
    return FORM_KEYS if show_memory else tuple(k for k in FORM_KEYS if k not in MEMORY_KEYS)
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)


def size_text(value: object) -> str:
    """Bytes as the short form-field text: "80GiB", "512MiB" or a byte count."""
    if not isinstance(value, int) or isinstance(value, bool):
        return ""
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2)):
        if value and value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


#: (slug, name) of every catalogue model: data shipped with the app, read once at import (an
#: immutable table: tests/test_no_result_caches.py).
CATALOGUE_OPTIONS: tuple[tuple[str, str], ...] = tuple(
    (m["slug"], m["name"]) for m in model_input.catalogue_search("", limit=500)
)
#: (name, label) of every GPU preset for the GPU field's list: the total vLLM budgets against.
GPU_OPTIONS: tuple[tuple[str, str], ...] = tuple(
    (p.name, f"{p.total_bytes / 1024**3:.2f} GiB usable (torch's total)") for p in PRESETS
)


def model_options(current: str, with_base: bool) -> list[tuple[str, str]]:
    """(slug, label) for the model select; a blank first entry when a base document sets the model."""
    options = list(CATALOGUE_OPTIONS)
    if current and all(slug != current for slug, _ in options):
        options.insert(0, (current, current))
    return ([("", "— the base document's model —")] if with_base else []) + options


#: The selects whose "not set" option clears the knob (`plan_query.UNSET`), even where a base sets it.
CLEARABLE = tuple(knob.key for knob in plan_query.KNOBS if knob.clearable and not knob.blank_clears)
#: The text fields a blank clears (`plan_query.Knob.blank_clears`): their `default` shows as blank.
BLANK_CLEARS = tuple(knob.key for knob in plan_query.KNOBS if knob.blank_clears)


def form_context(
    query: Mapping[str, str], result: Mapping[str, Any] | None, has_base: bool,
    doc: Mapping[str, Any] | None = None, measured: bool = False,
) -> dict[str, Any]:
    """The form's values, options and placeholders (from the result when there is one; `doc`: the
    plan document it ran, whose own settings the clearable selects show)."""
    form = {key: query.get(key, "") for key in FORM_KEYS}
    form.update({key: "" for key in BLANK_CLEARS if form[key] == plan_query.UNSET})
    form["base"], form["from"] = query.get("base", ""), query.get(querystring.FROM_KEY, "")
    placeholders: dict[str, str] = {}
    tp_options = [1, 2, 4, 8]
    if result is not None:
        _result_values(form, query, result, has_base)
        engine, policy = result["engine"], result["policy"]
        placeholders = {
            "ranks": str(result["layout"]["ranks"]), "vllm": str(result["vllm_version"]),
            "max_model_len": str(engine["max_model_len"]), "max_num_seqs": str(engine["max_num_seqs"]),
            "reserve": size_text(policy["operating_reserve_bytes"]), "live": "not set",
        }  # fmt: skip
        tp_options = list(result.get("allowed_tp") or tp_options)
    _clearable_values(form, query, doc)
    hints = _stated_text(form, query, result, doc) if result is not None else {}
    current_tp = int(form["tp"]) if form["tp"].isascii() and form["tp"].isdigit() else 1  # isdigit() alone takes "²"
    if current_tp not in tp_options:
        tp_options = sorted({*tp_options, current_tp})
    return {
        "form": form,
        "knobs": plan_query.BY_KEY,
        "placeholders": placeholders,
        "hints": hints,
        "options": _options(form, query, result, has_base, tp_options, measured),
        "show_memory": not has_base,
        "gpu_presets": GPU_OPTIONS,
        "reset_url": querystring.page_url("/plan", {k: v for k, v in query.items() if k in ("base", "model")}),
    }


def _result_values(form: dict[str, str], query: Mapping[str, str], result: Mapping[str, Any], has_base: bool) -> None:
    """The values the plan ran with, where the query leaves a field empty."""
    engine, layout, policy = result["engine"], result["layout"], result["policy"]
    source = str(result["model"].get("source") or "")
    form["model"] = query.get("model") or (source.split(":", 1)[1] if source.startswith("catalogue:") else "")
    form.update(
        tp=str(layout["tp"]), pp=str(layout["pp"]), dp=str(layout["dp"]),
        util=str(engine["gpu_memory_utilization"]), mnbt=str(engine["max_num_batched_tokens"]),
        kv_dtype=engine["kv_cache_dtype"],  # block_size is clearable: the document's own, else "vLLM's choice"
        quant=str(engine.get("quantization") or ""),
        growth=str(policy["growth_reserve"]),
    )
    if not form["gpu"] and not has_base:
        form["gpu"] = plan_query.DEFAULT_GPU_NAME
    lora = engine.get("lora") or {}
    form["loras"] = form["loras"] or str(lora.get("max_loras") or "")
    offload = engine.get("kv_offload") or {}  # the tiers the plan ran with (a base's included)
    form["offload"] = form["offload"] or size_text(offload.get("cpu_bytes"))
    form["offload_disk"] = form["offload_disk"] or size_text(offload.get("disk_bytes"))
    form["lora_rank"] = form["lora_rank"] or str(lora.get("max_lora_rank") or "")
    spec = engine.get("speculative") or {}
    form["spec"] = form["spec"] or str(spec.get("method") or "")
    form["spec_tokens"] = form["spec_tokens"] or str(spec.get("num_speculative_tokens") or "")
    # The engine's environment knobs as the plan ran with them (a base document may set them).
    for key in ("mla_off", "fi_sampler", "cg_estimate", "allow_long"):
        stated = engine.get(plan_query.BY_KEY[key].path.split(".", 1)[1])
        form[key] = form[key] or ("" if stated is None else "true" if stated is True else "false")


def _clearable_values(form: dict[str, str], query: Mapping[str, str], doc: Mapping[str, Any] | None) -> None:
    """A clearable select shows the document's own setting (a base's, or its `vllm serve` flag's),
    else "not set" (UNSET): never a value nobody set, and its "not set" option clears a base's."""
    effective = plan_query.effective(doc) if doc is not None else {}
    for key in CLEARABLE:
        if key in query:
            continue
        stated = plan_query.document_value(effective, plan_query.BY_KEY[key].path)
        if key == "quant" and form[key]:
            continue  # the result's (a measured run's own --quantization, shown as in the run)
        knob = plan_query.BY_KEY[key]
        if knob.removes and stated is not None and str(stated) == knob.default:
            stated = None  # the default a removed value gives ("native"): the option that removes it
        form[key] = UNSET if stated is None else str(stated).lower() if isinstance(stated, bool) else str(stated)


UNSET = plan_query.UNSET

#: The text fields a base may set, shown with the plan's value, and what their blank means
#: (`plan_query` removes the base's value: `Knob.removes`).
STATED_TEXT: Mapping[str, str] = {
    "kv_bytes": "blank: computed from GPU memory utilization", "max_model_len": "blank: the model's length",
    "max_num_seqs": "blank: vLLM's default", "reserve": "blank: none", "live": "blank: not set",
}
#: Where a knob's value is in the result (what the plan uses, resolved: bytes, tokens).
_RESULT_PATHS = {"kv_bytes": ("engine", "kv_cache_memory_bytes"), "max_model_len": ("engine", "max_model_len"),
                 "max_num_seqs": ("engine", "max_num_seqs"), "reserve": ("policy", "operating_reserve_bytes"),
                 "live": ("policy", "avg_live_tokens")}


def _stated_text(
    form: dict[str, str], query: Mapping[str, str], result: Mapping[str, Any], doc: Mapping[str, Any] | None
) -> dict[str, str]:
    """Fill the `STATED_TEXT` fields a base states with the value the plan uses (before, they showed it
    only as a placeholder: "blank: computed" over a 20 GiB --kv-cache-memory-bytes), and say where each
    came from; the hints by key."""
    from app.core.vllm_flags import PLAN_FLAGS

    own = doc or {}
    effective = plan_query.effective(own)
    hints: dict[str, str] = {}
    for key, blank in STATED_TEXT.items():
        path = plan_query.BY_KEY[key].path
        stated = plan_query.document_value(effective, path)
        if key in query or stated is None:
            hints[key] = blank if form[key] else ""
            continue
        section, name = _RESULT_PATHS[key]
        value = result[section].get(name)
        form[key] = size_text(value) if plan_query.BY_KEY[key].kind == "size" else str(value)
        flag = next((f.flag for f in PLAN_FLAGS if f"engine.{f.key}" == path), None)
        if plan_query.document_value(own, path) is None and flag is not None:
            hints[key] = f"from the base's vllm serve {flag}; {blank}"
        else:
            hints[key] = f"from the base plan; {blank}"
    return hints


def _options(
    form: Mapping[str, str], query: Mapping[str, str], result: Mapping[str, Any] | None, has_base: bool,
    tp_options: list[int], measured: bool = False,
) -> dict[str, list[tuple[str, str]]]:
    """Each select's (value, label) options."""
    return {
        "models": model_options(form["model"], has_base),
        "tp": [(str(tp), str(tp)) for tp in tp_options],
        "kv_dtypes": [(d, d) for d in KV_CACHE_DTYPES],
        "block_sizes": [(UNSET, _block_size_choice(result)), *((str(b), str(b)) for b in BLOCK_SIZES)],
        "quant": quant_options(result, query, measured),
        "lora_ranks": lora_rank_options(result),
        "spec_methods": [(UNSET, "off"), *((m, m) for m in SPEC_METHODS)],
        "spec_models": [(UNSET, "— none (mtp, ngram) —"), *CATALOGUE_OPTIONS],
        "ep": [("false", "off"), ("true", "on (--enable-expert-parallel)")],
        "offload_backend": [(UNSET, "native"), ("lmcache", "lmcache")],
        "prefix": [(UNSET, "vLLM's default"), ("true", "on"), ("false", "off (--no-enable-prefix-caching)")],
        "fi_sampler": [(UNSET, "not set (native sort)"), ("true", "on (=1)"), ("false", "off (=0)")],
        "cg_estimate": [(UNSET, f"version default ({_estimate_default(result)})"), ("true", "on (=1)"),
                        ("false", "off (=0)")],
    }


def _block_size_choice(result: Mapping[str, Any] | None) -> str:
    """The block-size select's "not set" option: the size vLLM runs the plan with when none is stated."""
    return "vLLM's choice" if result is None else f"vLLM's choice ({result['block_size']})"


def _estimate_default(result: Mapping[str, Any] | None) -> str:
    """What VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS unset means for the plan's vLLM version (app.core.versions)."""
    version = str(result["vllm_version"]) if result is not None else None
    return "on" if rules_for(version).cuda_graphs_in_budget else "off"


def lora_rank_options(result: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The max-LoRA-rank select: the ranks the plan's vLLM version accepts (app.core.lora)."""
    version = parse_version(str(result["vllm_version"])) if result is not None else rules_for(None).version
    return [(UNSET, "16 (vLLM's default)"), *((str(r), str(r)) for r in allowed_ranks(version))]


def quant_options(
    result: Mapping[str, Any] | None, query: Mapping[str, str], measured: bool = False
) -> list[tuple[str, str]]:
    """The weights select: as the checkpoint holds them (UNSET: no --quantization, even where a
    base's command gives one), or online fp8 for an unquantized one."""
    fp8 = ("fp8", "fp8 (--quantization fp8)")
    if result is None:
        return [(UNSET, "as the checkpoint"), fp8]
    model, engine = result["model"], result["engine"]
    if model.get("layers") is None:  # no shape (bytes per token only): weights cannot be resized
        return [("", "as measured")]
    checkpoint = model.get("checkpoint_quantization")
    if checkpoint:
        version = parse_version(str(result["vllm_version"]))
        return checkpoint_quant_options(str(checkpoint), engine.get("quantization"), measured, version)
    if measured and engine.get("quantization") and "quant" not in query:
        return [("", "fp8 (--quantization fp8, as in the run)")]  # a measured run's own setting
    return [(UNSET, f"as the checkpoint ({model.get('dtype') or 'model dtype'})"), fp8]


#: The Marlin kernel vLLM converts an AWQ / GPTQ checkpoint to when no --quantization names the plain one
#: (`AWQMarlinConfig.override_quantization_method`, awq_marlin.py @28be48fa9; GPTQ's, gptq_marlin.py @4dd49b06f).
_MARLIN = {"awq": "awq_marlin", "gptq": "gptq_marlin"}


def checkpoint_quant_options(
    checkpoint: str, forced: object, measured: bool, version: tuple[int, int, int]
) -> list[tuple[str, str]]:
    """The weights select of a quantized checkpoint: what vLLM accepts for it (`ModelConfig.
    _verify_quantization`, vllm/config/model.py @28be48fa9: no --quantization, or the method the override
    resolves to; any other is refused). An AWQ / GPTQ checkpoint runs Marlin by default and its plain
    dequantizing kernel under `--quantization awq|gptq` (app.core.dequant_linear); the select shows the
    plan's own (before, a forced plain-AWQ plan read "as the checkpoint (awq)", and there was no choice).
    A measured run's setting is the run's (no what-if moves it)."""
    family = checkpoint.lower().removesuffix("_marlin")
    plain = f"{family}, plain kernel (--quantization {family})"
    if family == "gptq" and plain_kernel(family, family, version) is None:  # --quantization gptq is auto_gptq
        return [("", f"as the checkpoint ({checkpoint}: vLLM runs auto_gptq, Marlin where the card supports it)")]
    if measured:
        return [("", f"{plain}, as in the run" if forced == family else f"as the checkpoint ({checkpoint})")]
    if family not in _MARLIN or checkpoint.lower() not in (family, _MARLIN[family]):
        return [("", f"as the checkpoint ({checkpoint})")]
    return [(UNSET, f"as the checkpoint ({family}: vLLM runs {_MARLIN[family]} where the card supports it)"),
            (family, plain)]  # fmt: skip


def error_form_values(query: Mapping[str, str], base_doc: Mapping[str, Any] | None) -> dict[str, str]:
    """The form of a plan that cannot be computed: the query's values, else the base document's
    own (what was imported or saved), else each knob's default and vLLM's for the plan where they
    can be told: never a slider's midpoint standing for a value nobody set."""
    values = {knob.key: knob.default for knob in plan_query.KNOBS if knob.default is not None}
    if base_doc is None:  # the model and GPU the plan would run on (the select showed the list's first model)
        values.update(model=plan_query.DEFAULT_MODEL, gpu=plan_query.DEFAULT_GPU_NAME)
    # util and mnbt at vLLM's defaults for the plan the structural keys describe (a slider left empty
    # submits the browser's midpoint, util 0.55 and mnbt 33,024, on the form's first change)
    values.update(views.vllm_defaults(query, base_doc))
    if base_doc is not None:
        values.update({k: v for k, v in plan_query.query_from_plan(base_doc, None).items() if k in FORM_KEYS})
    return {**values, **{k: v for k, v in query.items() if v != ""}}


def gpu_field_text(doc: Mapping[str, Any]) -> str:
    """The GPU field's text for a document: its preset's name, else its total as a short size."""
    gpu = doc.get("gpu")
    if not isinstance(gpu, Mapping):
        return ""
    if isinstance(gpu.get("name"), str):
        return str(gpu["name"])
    total = gpu.get("total")
    return total if isinstance(total, str) else size_text(total)


def asked_url(query: Mapping[str, str], base_doc: Mapping[str, Any] | None) -> str:
    """The address of a what-if the plan refused (a 422): what the user asked, written as the
    canonical URL of a plan is (the values the form submits for every field it leaves at its
    default dropped: a knob's fixed default, vLLM's for the plan, "not set" where no base sets it),
    so a reload gives the same refusal; a value that does not parse stays as typed."""
    defaults = views.vllm_defaults(query, base_doc)
    asked = plan_query.drop_defaults(query, defaults)
    try:
        canonical = views.canonical_query(asked, plan_query.plan_from_query(asked, base_doc), base_doc, defaults)
    except InputError:  # a value that does not parse: the query as typed, less the defaults it holds
        fixed = {knob.key: knob.default for knob in plan_query.KNOBS if knob.default is not None}
        canonical = {k: v for k, v in plan_query.drop_defaults(asked, fixed).items()
                     if not (v == UNSET and base_doc is None)}  # fmt: skip
    return querystring.page_url("/plan", canonical)
