"""The URL is the state: a flat what-if query string ↔ a plan document.

`plan_from_query` turns the plan page's GET parameters into a plan document (on top of an
optional base document: a saved plan or an imported log); `query_from_plan` is its inverse
and drops every value equal to its default, so the canonical query of a what-if is short and
stable (the caller sorts the keys when it builds the URL).

Knobs that change what vLLM profiles (tp, mnbt, quant) or the budget (util) go into the document's
`whatif` section when the base has measured rows: the measured rows stay those of the run, and
the transforms move them (and a measured KV room) rather than reinterpret them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from app.core.errors import InputError
from app.core.gpus import DEFAULT_GPU, find_preset, nearest_presets
from app.core.units import GIB, MIB, parse_bytes
from app.schema_bounds import Limits, limits_at
from app.schemas import PlanDocument

__all__ = ["Limits"]  # the knob's bounds (`Knob.limits`) are the validator's: app.schema_bounds

JSON = dict[str, Any]
Kind = Literal["str", "int", "float", "size", "gpu", "bool"]
_TRUE, _FALSE = ("true", "on", "yes", "1"), ("false", "off", "no", "0")

DEFAULT_MODEL = "llama-3.1-8b"
#: The GPU a plan without one runs on: a real card (its preset's total, app.core.gpus).
DEFAULT_GPU_NAME = DEFAULT_GPU


@dataclass(frozen=True)
class Knob:
    """One what-if knob: the query key (also the form field's name), where its value lives in a
    plan document, how it is parsed, and its default rule. Its limits are the validator's."""

    key: str
    path: str
    kind: Kind
    #: The default when nothing sets it: a fixed text (dropped from canonical URLs) or, with
    #: `vllm_default`, the value vLLM picks for the plan (`app.services.plan_inputs.engine_defaults`).
    default: str | None = None
    vllm_default: bool = False
    #: The `whatif` field it moves when the base has measured rows (they stay the run's).
    whatif: str | None = None
    #: It decides the plan's structure, and so the vLLM defaults of the others.
    structural: bool = False
    #: The range input's (min, max, step); within `limits` (a test asserts it).
    slider: tuple[float, float, float] | None = None
    #: Other document paths whose errors belong to this form field.
    aliases: tuple[str, ...] = ()
    #: The vLLM environment variable the setting is (`vllm/envs.py`), read as this key in a URL
    #: (`app.web.querystring.LEGACY_KEYS`); its 1/0 parse as a bool knob's true/false.
    env: str | None = None
    #: `key=default` (UNSET) clears it: the field is null, vLLM's default, even where the base
    #: document (or its `vllm serve` command) sets it. The plan form's "not set" option sends it.
    clearable: bool = False
    #: With `clearable`: what `key=default` removes instead of nulling the knob's own field, where a
    #: null would make a section that changes the plan (`engine.lora.max_lora_rank: null` turns LoRA
    #: on): an engine section (its null wins over the base's command) or a value inside one (dropped
    #: from a copy of the base's section, so the schema's default applies). No section, nothing removed.
    removes: str | None = None
    #: With `clearable`: a text field, whose empty value is `key=default` (`app.web.querystring.clean`):
    #: blanking it clears a base's value as a select's "not set" does (a blank is dropped otherwise).
    blank_clears: bool = False

    @property
    def limits(self) -> Limits:
        """The bounds the validator (`app.schemas`) puts on the knob's document field."""
        found = LIMITS.get(self.path)
        return found if found is not None else validator_limits(self.path)


#: THE knob table. Adding a knob: one row here, one field in `app.schemas`, one core transform
#: (for a what-if knob) and one line in `templates/partials/_plan_form.html`.
KNOBS: tuple[Knob, ...] = (
    Knob("model", "model.catalogue", "str", structural=True, aliases=("model",)),
    Knob("gpu", "gpu", "gpu", structural=True, aliases=("gpu.name", "gpu.total")),
    Knob("gpu_free", "gpu.free_at_start", "size", structural=True),
    Knob("ranks", "gpu.count", "int", structural=True, aliases=("ranks",)),
    Knob("tp", "layout.tp", "int", default="1", whatif="tp", structural=True, aliases=("layout",)),
    Knob("pp", "layout.pp", "int", default="1", structural=True),
    Knob("dp", "layout.dp", "int", default="1", structural=True),
    Knob("util", "engine.gpu_memory_utilization", "float", vllm_default=True, whatif="gpu_memory_utilization",
         slider=(0.1, 1.0, 0.01)),
    # The text fields a base may set (saved plan, `vllm serve` command): the form shows the plan's
    # value and a blank removes the base's (computed budget, the model's length, vLLM's default, none).
    Knob("kv_bytes", "engine.kv_cache_memory_bytes", "size", clearable=True, removes="engine.kv_cache_memory_bytes",
         blank_clears=True),
    Knob("kv_dtype", "engine.kv_cache_dtype", "str", default="auto"),
    Knob("quant", "engine.quantization", "str", whatif="quantization", clearable=True),
    # No fixed default: vLLM's backend picks the block size for the model and card when none is stated
    # (MLA on Hopper with an fp8 cache: 64, app.core.mla_rules), so a stated 16 is not "not set" and
    # stays in the URL; "not set" (`block_size=default`, the form's "vLLM's choice") leaves it out.
    Knob("block_size", "engine.block_size", "int", clearable=True, removes="engine.block_size"),
    Knob("max_model_len", "engine.max_model_len", "int", clearable=True, removes="engine.max_model_len",
         blank_clears=True),
    Knob("mnbt", "engine.max_num_batched_tokens", "int", vllm_default=True, whatif="max_num_batched_tokens",
         slider=(256, 65536, 256)),
    Knob("max_num_seqs", "engine.max_num_seqs", "int", clearable=True, removes="engine.max_num_seqs",
         blank_clears=True),
    Knob("loras", "engine.lora.max_loras", "int", whatif="max_loras", clearable=True, removes="engine.lora",
         blank_clears=True),  # blank: LoRA off, the base's section gone
    Knob("lora_rank", "engine.lora.max_lora_rank", "int", whatif="max_lora_rank", clearable=True,
         removes="engine.lora.max_lora_rank"),  # not set: vLLM's 16, the base's LoRA slots kept
    Knob("spec", "engine.speculative.method", "str",  # eagle | eagle3 | mtp | draft_model | ngram
         clearable=True, removes="engine.speculative"),  # not set: off, the base's section gone
    Knob("spec_tokens", "engine.speculative.num_speculative_tokens", "int"),
    Knob("spec_model", "engine.speculative.model.catalogue", "str",  # the draft (a catalogue name)
         clearable=True, removes="engine.speculative.model"),
    Knob("growth", "policy.growth_reserve", "float", default="0", slider=(0, 0.5, 0.01)),
    Knob("reserve", "policy.operating_reserve", "size", default="0", clearable=True,
         removes="policy.operating_reserve", blank_clears=True),
    Knob("live", "policy.avg_live_tokens", "int", clearable=True, removes="policy.avg_live_tokens",
         blank_clears=True),
    Knob("vllm", "vllm_version", "str", structural=True, aliases=("vllm",)),
    # Issue 15: DP/EP layouts, KV offload tiers (app.core.kv_tiers), prefix caching (app.core.prefix_pool).
    Knob("ep", "layout.expert_parallel", "bool", default="false", structural=True),
    Knob("offload", "engine.kv_offload.cpu_bytes", "size", aliases=("engine.kv_offload",), clearable=True,
         removes="engine.kv_offload", blank_clears=True),  # blank: no offload, the base's section gone
    Knob("offload_backend", "engine.kv_offload.backend", "str", default="native", clearable=True,
         removes="engine.kv_offload.backend"),  # not set: native, the base's offload sizes kept
    Knob("offload_disk", "engine.kv_offload.disk_bytes", "size", clearable=True,
         removes="engine.kv_offload.disk_bytes", blank_clears=True),  # blank: no disk tier, the CPU tier kept
    Knob("host_mem", "node.host_memory_bytes", "size", aliases=("node",)),
    Knob("gpus_per_node", "node.gpus_per_node", "int"),
    Knob("prefix", "engine.enable_prefix_caching", "bool", clearable=True),
    # Engine environment variables (vllm/envs.py @4dd49b06f); app.core.exports.env_of writes them back.
    Knob("mla_off", "engine.mla_disable", "bool", default="false", env="VLLM_MLA_DISABLE"),  # app.core.mla_rules
    Knob("fi_sampler", "engine.flashinfer_sampler", "bool",  # app.core.profile_run.sampler_bytes_per_logit
         env="VLLM_USE_FLASHINFER_SAMPLER", clearable=True),
    Knob("cg_estimate", "engine.estimate_cudagraphs", "bool",  # app.core.versions.with_cudagraph_estimate
         env="VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", clearable=True),
    Knob("allow_long", "engine.allow_long_max_model_len", "bool", default="false",  # app.core.max_len rule 5
         env="VLLM_ALLOW_LONG_MAX_MODEL_LEN"),
)  # fmt: skip
BY_KEY: Mapping[str, Knob] = MappingProxyType({k.key: k for k in KNOBS})
#: The value that clears a `clearable` knob ("not set": vLLM's default), e.g. `prefix=default`.
UNSET = "default"
#: Every document path (and what-if path) → the knob whose form field shows its errors.
PATH_KEYS: Mapping[str, str] = MappingProxyType({
    **{alias: k.key for k in KNOBS for alias in k.aliases},
    **{k.path: k.key for k in KNOBS},
    **{f"whatif.{k.whatif}": k.key for k in KNOBS if k.whatif},
    **{k.key: k.key for k in KNOBS},
})


#: Each knob's document path split once: `_get` walks them on every request.
_PARTS: Mapping[str, tuple[str, ...]] = MappingProxyType({k.path: tuple(k.path.split(".")) for k in KNOBS})


def validator_limits(path: str) -> Limits:
    """The bounds `app.schemas.PlanDocument` puts on the field at a dotted path (gt/ge, lt/le)."""
    found = limits_at(PlanDocument, path.split("."))
    assert found is not None, path
    return found


#: Each knob's bounds, read from the validator once at import (the schema is code, not input).
LIMITS: Mapping[str, Limits] = MappingProxyType({k.path: validator_limits(k.path) for k in KNOBS})


def field_for_path(path: str) -> str | None:
    """The query key a document field path maps to, for inline form errors: the knob of the
    longest prefix of the path ("ranks[2].total" → "ranks", "whatif.tp" → "tp"); None if none."""
    found = longest_prefix_key(path, PATH_KEYS)
    if found is not None:
        return found
    return PATH_KEYS.get(path.split(".", 1)[0].split("[", 1)[0])


def longest_prefix_key(field: str, keys: Mapping[str, str]) -> str | None:
    """The form key of the longest prefix of a dotted/indexed path in `keys`
    ("ramp[2]" → keys["ramp"], "engine.block_size.x" → keys["engine.block_size"]); None if none."""
    path = field
    while path:
        if path in keys:
            return keys[path]
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            break
        path = path[:cut]
    return None


def structural(query: Mapping[str, str]) -> dict[str, str]:
    """The keys of a what-if query that decide the plan's structure (and the base id)."""
    return {k: v for k, v in query.items() if k == "base" or (k in BY_KEY and BY_KEY[k].structural)}


def vllm_defaults(values: Mapping[str, float]) -> dict[str, str]:
    """The canonical texts of the `vllm_default` knobs, from their values by document path
    (`app.services.plan_inputs.engine_defaults`)."""
    def text(knob: Knob, value: float) -> str:
        return canonical_value(knob.key, str(int(value)) if knob.kind == "int" else str(value))

    return {k.key: text(k, values[k.path]) for k in KNOBS if k.vllm_default and k.path in values}


def drop_defaults(query: Mapping[str, str], defaults: Mapping[str, str]) -> dict[str, str]:
    """The query without values equal to their default (a range input always submits one)."""
    out = dict(query)
    for key, default in defaults.items():
        raw = out.get(key)
        if raw is None:
            continue
        try:
            same = canonical_value(key, raw) == default
        except InputError:
            same = False  # the plan reports the bad value
        if same:
            del out[key]
    return out


def canonical_size(n_bytes: int) -> str:
    if n_bytes and n_bytes % GIB == 0:
        return f"{n_bytes // GIB}GiB"
    if n_bytes and n_bytes % MIB == 0:
        return f"{n_bytes // MIB}MiB"
    return str(n_bytes)


def _canonical_float(value: float) -> str:
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _parse(key: str, kind: str, raw: str) -> object:
    text = raw.strip()
    if text == UNSET and BY_KEY[key].clearable:
        return UNSET
    try:
        if kind == "int":
            return _whole(text.replace(",", "").replace("_", ""))
        if kind == "float":
            value = float(text)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError
            return value
    except ValueError:
        raise InputError(key, f"expected a {'whole number' if kind == 'int' else 'number'}, got {raw!r}") from None
    if kind == "size":
        return canonical_size(parse_bytes(text, key))
    if kind == "gpu":
        return gpu_text(text, key)
    if kind == "bool":
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise InputError(key, f"expected true or false, got {raw!r}")
    if not text:
        raise InputError(key, "must not be empty")
    return text


def _whole(text: str) -> int:
    """A whole number's text; an integral float's too ("2.0", "1e3"), as the plan document reads a
    JSON 2.0 in an integer field (pydantic's lax int): a document's values reach the query as text."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if not value.is_integer():
            raise
        return int(value)


def gpu_text(text: str, field: str = "gpu") -> str:
    """The canonical text of a GPU field: free text that is a size stays that size ("75 GiB" →
    "75GiB"); anything else names a preset ("h100-80gb" → "H100 80GB"; nvidia-smi product strings
    work too). Neither: an InputError naming the field and the nearest presets."""
    text = text.strip()
    if not text:
        raise InputError(field, "must not be empty: pick a GPU or give its memory (e.g. 80GiB)")
    try:
        return canonical_size(parse_bytes(text, field))
    except InputError:
        pass
    preset = find_preset(text)
    if preset is not None:
        return preset.name
    near = ", ".join(repr(n) for n in nearest_presets(text))
    raise InputError(field, f"unknown GPU {text[:60]!r}: pick a preset (nearest: {near}) or give its memory (80GiB)")


def gpu_section(text: str, field: str = "gpu") -> JSON:
    """A plan document's `gpu` for a GPU field's text: {"name": preset} or {"total": size}."""
    value = gpu_text(text or DEFAULT_GPU_NAME, field)
    return {"total": value} if value[:1].isdigit() else {"name": value}


def canonical_value(key: str, raw: str) -> str:
    """The canonical text of one query value (raises InputError naming the key)."""
    kind = BY_KEY[key].kind
    value = _parse(key, kind, raw)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _canonical_float(value)
    return str(value)


def _set(doc: JSON, path: str, value: object) -> None:
    """Set a dotted path, copying each mapping on the way (copy on write: `doc` is a shallow copy
    of an immutable base document, whose nested sections must stay untouched)."""
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        child = node.get(part)
        child = dict(child) if isinstance(child, Mapping) else {}
        node[part] = child
        node = child
    node[parts[-1]] = value


def _measured_base(doc: Mapping[str, object]) -> bool:
    return bool(doc.get("ranks")) or doc.get("from_log") is not None


def whatif_keys(base_doc: Mapping[str, object] | None) -> frozenset[str]:
    """The query keys `plan_from_query` writes into the `whatif` section (a measured base's
    what-if knobs): the rest of the document depends only on the base and the other keys."""
    if base_doc is None or not _measured_base(base_doc):
        return frozenset()
    return frozenset(k.key for k in KNOBS if k.whatif)


def plan_from_query(params: Mapping[str, str], base_doc: Mapping[str, object] | None = None) -> JSON:
    """A plan document from flat what-if parameters (unknown keys are ignored). The base is never
    changed and never deep-copied: the result shares its untouched parts (its ranks, its model)."""
    doc: JSON = dict(base_doc) if base_doc is not None else {}
    if base_doc is None:
        doc["model"] = {"catalogue": DEFAULT_MODEL}
        doc["gpu"] = {"name": DEFAULT_GPU_NAME}
    measured = _measured_base(doc)
    removals: list[str] = []  # after every value is set: a removed section takes the values in it
    for knob in KNOBS:
        key = knob.key
        raw = params.get(key)
        if raw is None or raw.strip() == "":
            continue
        value = _parse(key, knob.kind, raw)
        if value == UNSET and knob.clearable:
            if knob.whatif and measured:
                continue  # a measured run's own setting has no what-if to clear
            if knob.removes is not None:
                removals.append(knob.removes)
            else:
                _set(doc, knob.path, None)  # null: wins over the base's value and its command's flag
            continue
        if key == "model":
            doc["model"] = {"catalogue": value}
        elif knob.whatif and measured:
            _set(doc, f"whatif.{knob.whatif}", value)
        elif key in ("gpu", "ranks") and measured:
            continue
        elif key == "gpu":
            _set_gpu(doc, gpu_section(str(value), key))
        else:
            _seed_section(doc, knob.path, base_doc)
            _set(doc, knob.path, value)
    stated = effective(base_doc) if removals and base_doc is not None else {}
    for path in removals:
        if _get(stated, path) is not None:  # only what the base sets: a value the query alone gives
            _remove(doc, path)  # stays (draft tokens with no method is the method's error)
    return doc


def _seed_section(doc: JSON, path: str, base_doc: Mapping[str, object] | None) -> None:
    """Before a value inside an engine section (engine.lora.max_loras) is set: where only the base's
    `vllm serve` command / --config YAML gives that section, start from a copy of it as the plan reads it.
    `fill_from_serve` merges the engine key by key, so a section of the document's own replaces the
    command's whole: before, `loras=3` over `--enable-lora --max-loras 2 --max-lora-rank 64
    --lora-target-modules q_proj v_proj` dropped the rank and the modules."""
    parts = path.split(".")
    if base_doc is None or len(parts) < 3 or parts[0] != "engine" or _get(doc, f"engine.{parts[1]}") is not None:
        return
    if base_doc.get("serve") is None and base_doc.get("vllm_config") is None:
        return
    section = _get(effective(base_doc), f"engine.{parts[1]}")
    if isinstance(section, Mapping):
        _set(doc, f"engine.{parts[1]}", dict(section))


def _remove(doc: JSON, path: str) -> None:
    """Remove an engine section (null: it wins over the base's `vllm serve` flag, which
    `fill_from_serve` merges into the engine key by key) or a value inside one (from a copy of
    the section as the plan reads it, command included). Creates no section."""
    parent, leaf = path.rsplit(".", 1)
    if parent == "engine":
        _set(doc, path, None)
        return
    section = _get(effective(doc), parent)
    if isinstance(section, Mapping):
        _set(doc, parent, {k: v for k, v in section.items() if k != leaf})


def _set_gpu(doc: JSON, chosen: JSON) -> None:
    """Put a GPU (a preset name or a total) in the document, keeping its count and interconnect."""
    gpu = doc.get("gpu")
    kept = {k: v for k, v in gpu.items() if k not in ("name", "total")} if isinstance(gpu, dict) else {}
    doc["gpu"] = {**kept, **chosen}


def _gpu_value(doc: Mapping[str, object]) -> object:
    """The GPU field's value in a document: the preset's name, else the total."""
    gpu = doc.get("gpu")
    if not isinstance(gpu, Mapping):
        return None
    return gpu.get("name") if gpu.get("name") is not None else gpu.get("total")


def _get(doc: Mapping[str, object], path: str) -> object:
    node: object = doc
    for part in _PARTS.get(path) or path.split("."):
        if type(node) is not dict and not isinstance(node, Mapping):
            return None
        node = node.get(part)
        if node is None:
            return None
    return node


def query_from_plan(
    doc: Mapping[str, object], base: Mapping[str, object] | None = None, defaults: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The canonical flat query of a document built by plan_from_query (defaults dropped).

    A value is dropped when it equals what the document would have without it: the base
    document's own value when the base states one, else the knob's default (its fixed text, or
    the vLLM default given in `defaults`).
    """
    out: dict[str, str] = {}
    whatifs = doc.get("whatif")
    doc, base = effective(doc), effective(base) if base is not None else None
    for knob in KNOBS:
        key, path, kind = knob.key, knob.path, knob.kind
        value = _get(doc, path) if key != "gpu" else _gpu_value(doc)
        whatif = whatifs.get(knob.whatif) if knob.whatif and isinstance(whatifs, Mapping) else None
        if whatif is not None:
            value = whatif
        reference = (_get(base, path) if key != "gpu" else _gpu_value(base)) if base is not None else None
        if value is None:
            if (knob.clearable and reference is not None and not (knob.whatif and _measured_base(base or {}))
                    and not (knob.removes and _text(key, kind, reference) == knob.default)):  # removed: the same
                out[key] = UNSET  # the base sets it, the what-if clears it
            continue
        text = _text(key, kind, value)
        if reference is not None:
            if _text(key, kind, reference) != text:
                out[key] = text
            continue
        defaults_of_key = {knob.default, (defaults or {}).get(key)}
        if base is None:
            defaults_of_key |= {DEFAULT_MODEL if key == "model" else None,
                                DEFAULT_GPU_NAME if key == "gpu" else None}
        if text not in defaults_of_key:
            out[key] = text
    return out


def document_value(doc: Mapping[str, object], path: str) -> object:
    """The value at a knob's document path (None when unset)."""
    return _get(doc, path)


def effective(doc: Mapping[str, object]) -> Mapping[str, object]:
    """A document as the plan reads it: its `vllm serve` command / --config YAML filling the engine
    and layout (`fill_from_serve`), so a value is compared with what the base really sets (a base
    made from `--kv-cache-dtype fp8` holds the flag, not `engine.kv_cache_dtype`: choosing auto
    was dropped from the URL as the default, and the page reopened at fp8)."""
    if doc.get("serve") is None and doc.get("vllm_config") is None:
        return doc
    from app.ingest.vllm_serve import fill_from_serve

    try:
        return fill_from_serve(doc)
    except InputError:
        return doc  # the plan reports the bad command


def _text(key: str, kind: str, value: object) -> str:
    return canonical_value(key, str(value)) if kind != "str" else str(value)
