"""The plan document: the one validator the CLI, the API, the pages and the database share.

Pydantic checks the shape and types; sizes go through `app.core.units.parse_bytes`; every
failure becomes an `InputError` naming the dotted field path (e.g. `ranks[2].total`).
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from app.core.errors import InputError
from app.core.gpus import resolve_gpu
from app.core.units import MAX_BYTES, fmt_bytes, parse_bytes
from app.ingest.vllm_serve import filled_from_serve
from app.schema_bounds import bound_message


def _size(value: object) -> int:
    if type(value) is int and 0 <= value <= MAX_BYTES:  # the common case, checked as parse_bytes would
        return value
    try:
        return parse_bytes(value, "")
    except InputError as exc:
        raise ValueError(exc.message) from exc


Size = Annotated[int, BeforeValidator(_size)]


#: Stated ranges (README "Reliability"): sizes 0 … 4 PiB (`units.MAX_BYTES`), token counts ≤ 10⁹,
#: KV bytes per token ≤ 1 GiB; the other counts carry their own bounds below.
MAX_TOKENS = 10**9
#: Ranks a plan may have (a `ranks` list or `gpu.count`); past `rank_groups.FULL_RANKS_MAX` the
#: result summarises them (groups of identical ranks, distributions).
MAX_RANKS = 131_072
MAX_BYTES_PER_TOKEN = 1024**3


def _admits_bool(annotation: object) -> bool:
    """Whether a field of this type may hold a JSON true/false: not an int or float one (pydantic's
    lax mode reads true as 1 and 1.0), unless bool is one of its alternatives."""
    if annotation is bool:
        return True
    if annotation in (int, float):
        return False
    origin = get_origin(annotation)
    if origin is Annotated:
        return _admits_bool(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(_admits_bool(a) for a in get_args(annotation) if a is not type(None))
    return True  # str, Literal, lists, models…: their own validation says what they take


@cache
def _numeric_field(model: type[BaseModel], name: str) -> bool:
    return not _admits_bool(model.model_fields[name].annotation)


def _is_flag(annotation: object) -> bool:
    """A field that holds only true/false (or null): `bool`, `bool | None`."""
    if annotation is bool:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args == [bool]
    return False


@cache
def _flag_field(model: type[BaseModel], name: str) -> bool:
    return _is_flag(model.model_fields[name].annotation)


def _shown(value: object) -> str:
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "an object"
    return repr(value[:40] if isinstance(value, str) else value)[:60]


# The number policy of every JSON input (plan and sizing documents here; the simulation document
# follows it in app.core.sim.io, `json_int` / `json_number`):
# - numbers stay lax as pydantic reads them: a JSON number or a numeric string ("0.9", "4096");
#   an integral float in an integer field is that integer (2.0 → 2; 2.5 is refused, naming it);
# - never a boolean for a number (true is not 1), never NaN or ±infinity (as a number or a string);
# - booleans are strict: only JSON true/false (or null where the field allows it). Pydantic's lax
#   mode read "yes", "on", "f", 1 and 0.0 as booleans, so a string or a number meant for another
#   field planned silently; each is refused naming the field ("expected true or false, got 'yes'").
class NoBoolNumbers(BaseModel):
    """A number field refuses JSON true/false: pydantic's lax mode read `"max_model_len": true` as
    1 and `"gpu_memory_utilization": true` as 1.0 and planned with them. Any field refuses a float
    NaN or infinity (or a string of one), naming it as such; a true/false field refuses anything but
    true/false (the number policy above)."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_number(cls, value: object, info: ValidationInfo) -> object:
        name = info.field_name
        if isinstance(value, bool) and name and _numeric_field(cls, name):
            raise ValueError(f"expected a number, got {str(value).lower()}")
        if name and value is not None and not isinstance(value, bool) and _flag_field(cls, name):
            raise ValueError(f"expected true or false, got {_shown(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            # JSON's NaN / Infinity (Python's json reads them): pydantic compared NaN with the bound
            # and said "Input should be less than or equal to 1", which is not what is wrong.
            raise ValueError(f"expected a finite number, got {value}")
        if isinstance(value, str) and name and _numeric_field(cls, name) and _non_finite_text(value):
            raise ValueError(f"expected a finite number, got {_shown(value)}")
        return value


def _non_finite_text(text: str) -> bool:
    """A string float() reads as NaN or ±infinity ("nan", "inf", "1e999"): pydantic's lax float
    took "nan" and "inf" as numbers."""
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


class _Strict(NoBoolNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SafetensorsMetaDoc(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    total_size: int = Field(gt=0, le=2**50, strict=True)


class SafetensorsIndexDoc(BaseModel):
    """A checkpoint's model.safetensors.index.json (metadata.total_size in bytes; weight_map)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    metadata: SafetensorsMetaDoc
    weight_map: dict[str, str] = Field(default_factory=dict)


class ModelDoc(_Strict):
    config: dict[str, Any] | None = None
    catalogue: str | None = None
    kv_bytes_per_token: int | None = Field(default=None, gt=0, le=MAX_BYTES_PER_TOKEN)
    name: str | None = None
    safetensors_index: SafetensorsIndexDoc | None = None
    #: The checkpoint's quantization as a vLLM run's log states it (`quantization=compressed-tensors`
    #: in the engine config line): set by an import; the run's measured weights rows are the
    #: quantized checkpoint's, whatever the chosen model's config.json says.
    quantization: str | None = Field(default=None, min_length=1, max_length=64)

    @model_validator(mode="after")
    def _one_source(self) -> ModelDoc:
        given = [k for k in ("config", "catalogue", "kv_bytes_per_token") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of config (an HF config.json), catalogue (a model name) or kv_bytes_per_token"
            )
        if self.safetensors_index is not None and self.kv_bytes_per_token is not None:
            raise ValueError("safetensors_index goes with config or catalogue (it sizes the model's weights)")
        return self


class LayoutDoc(_Strict):
    tp: int = Field(default=1, ge=1, le=4096)
    pp: int = Field(default=1, ge=1, le=1024)
    dp: int = Field(default=1, ge=1, le=65536)
    dcp: int = Field(default=1, ge=1, le=1024)
    # --enable-expert-parallel (`enable_expert_parallel` is vLLM's name, accepted too)
    expert_parallel: bool = Field(
        default=False, validation_alias=AliasChoices("expert_parallel", "enable_expert_parallel")
    )


def _kv_dtype(value: object) -> object:
    from app.core.kvspec import KV_CACHE_DTYPES

    if isinstance(value, str) and value not in KV_CACHE_DTYPES:
        raise ValueError(f"unknown KV cache dtype {value!r}; vLLM accepts {', '.join(KV_CACHE_DTYPES)}")
    return value


class LoraDoc(_Strict):
    """``engine.lora``: vLLM's --enable-lora with --max-loras / --max-lora-rank / --max-cpu-loras. The
    rank's allowed values depend on the vLLM version (checked with the plan, app.core.lora.check_lora)."""

    max_loras: int = Field(default=1, ge=1, le=1024)
    max_lora_rank: int = Field(default=16, ge=1, le=512)
    max_cpu_loras: int | None = Field(default=None, ge=1, le=1_000_000)
    #: module names (q_proj, …): one argv word each when written as --lora-target-modules
    target_modules: list[Annotated[str, Field(min_length=1, max_length=64, pattern=r"^\S+$")]] | None = Field(
        default=None, min_length=1, max_length=64
    )


class DraftModelDoc(_Strict):
    """The draft of ``engine.speculative``: a catalogue name or its config.json (``name``: the HF id
    or path the flag gives vLLM)."""

    catalogue: str | None = None
    config: dict[str, Any] | None = None
    name: str | None = Field(default=None, max_length=300)

    @model_validator(mode="after")
    def _one(self) -> DraftModelDoc:
        if (self.catalogue is None) == (self.config is None):
            raise ValueError("give exactly one of catalogue (a model name) or config (the draft's config.json)")
        return self


class SpeculativeDoc(_Strict):
    """``engine.speculative``: vLLM's --speculative-config (method, draft model, tokens per step)."""

    method: Literal["eagle", "eagle3", "mtp", "draft_model", "ngram"] | None = None  # required (services)
    model: DraftModelDoc | None = None
    num_speculative_tokens: int | None = Field(default=None, ge=1, le=64)
def _backend(value: object) -> object:
    from app.core.kv_tiers import BACKENDS

    if isinstance(value, str) and value not in BACKENDS:
        raise ValueError(f"unknown backend {value!r}; vLLM's --kv-offloading-backend accepts {', '.join(BACKENDS)} "
                         "(KVOffloadingBackend, vllm/config/cache.py)")
    return value


class KVOffloadDoc(_Strict):
    """`--kv-offloading-backend` / `--kv-offloading-size` (app.core.kv_tiers): sizes are the engine's
    totals over its TP × PP workers, as vLLM splits them; disk is LMCache's local disk."""

    backend: Annotated[Literal["native", "lmcache"], BeforeValidator(_backend)] = "native"
    cpu_bytes: Size  # above 0: app.core.kv_tiers.check_offload says why (vLLM's reason)
    disk_bytes: Size | None = None
    chunk_size: int = Field(default=256, ge=1, le=1_048_576)  # LMCache's LMCACHE_CHUNK_SIZE


class NodeDoc(_Strict):
    """One host: its memory (what the CPU KV tier's pinned buffers must fit in) and GPUs."""

    host_memory_bytes: Size | None = None  # None: the pinned memory is not checked
    gpus_per_node: int = Field(default=8, ge=1, le=1024)
    host_link: Literal["pcie", "nvlink-c2c"] = "pcie"  # how a CPU-tier hit reaches the GPU


class EngineDoc(_Strict):
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    kv_cache_memory_bytes: Size | None = None
    kv_cache_dtype: Annotated[str, BeforeValidator(_kv_dtype)] = "auto"
    block_size: int = Field(default=16, ge=1, le=4096)
    max_model_len: int | None = Field(default=None, ge=1, le=100_000_000)
    # `--max-model-len auto` (or -1, vLLM ≥ 0.14): with no max_model_len stated, vLLM fits it to the KV
    # memory at start (app.core.plan.AUTO_FIT_SINCE)
    max_model_len_auto: bool = False
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    max_num_seqs: int | None = Field(default=None, ge=1, le=1_000_000)
    enforce_eager: bool = False
    # "fp8": vLLM's online fp8 on an unquantized checkpoint; "awq" / "gptq": the checkpoint's own method forced
    # by name, i.e. the plain dequantizing kernels instead of Marlin (app.core.dequant_linear)
    quantization: Literal["fp8", "awq", "gptq"] | None = None
    num_gpu_blocks_override: int | None = Field(default=None, ge=1, le=100_000_000)
    disable_hybrid_kv_cache_manager: bool = False
    cudagraph_mode: Literal["auto", "NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"] = "auto"
    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1/0 (vLLM ≥ 0.18); None: the version's default (on from 0.21)
    estimate_cudagraphs: bool | None = None
    mla_disable: bool = False  # VLLM_MLA_DISABLE=1: an MLA model caches full K/V (app.core.mla_rules)
    # V1's sampler on FlashInfer's path ("Using FlashInfer for top-p & top-k sampling."); None: not stated,
    # the version's default on the card (app.core.profile_run.flashinfer_sampler_in_use)
    flashinfer_sampler: bool | None = None
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a max_model_len above the model's derived length starts, with
    # vLLM's warning (vllm/config/model.py _get_and_verify_max_len @28be48fa9; app.core.max_len rule 5)
    allow_long_max_model_len: bool = False
    lora: LoraDoc | None = None
    speculative: SpeculativeDoc | None = None
    kv_offload: KVOffloadDoc | None = None
    enable_prefix_caching: bool | None = None  # None: vLLM's default for the version (app.core.prefix_pool)
    async_scheduling: bool | None = None  # None: vLLM's default for the version (app.core.in_flight)

    @model_validator(mode="before")
    @classmethod
    def _block_size_not_set(cls, data: object) -> object:
        """`block_size: null` is "not set" (the plan form's "vLLM's choice"; it wins over a base's
        `--block-size`): the field is left out, so the block size the version's backend picks for the
        model and card applies (app.core.mla_rules reads whether it was set), not a stated 16."""
        if isinstance(data, Mapping) and "block_size" in data and data["block_size"] is None:
            return {k: v for k, v in data.items() if k != "block_size"}
        return data


class PolicyDoc(_Strict):
    growth_reserve: float = Field(default=0.0, ge=0, lt=1)
    operating_reserve: Size = 0
    avg_live_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    free_spread_threshold: Size = 1024**3
    activation_points: list[tuple[Annotated[int, Field(ge=0, le=MAX_TOKENS)], Size]] = Field(
        default_factory=list, max_length=1024
    )


class RankDoc(_Strict):
    label: str | None = Field(default=None, max_length=64)
    total: Size | None = None
    free_at_start: Size | None = None
    weights: Size | None = None
    non_torch: Size | None = None
    cuda_graphs: Size | None = None
    activation: Size | None = None
    kv_room: Size | None = None
    # The engine's logged block count the kv_room was derived from (app.services.blocks_room)
    kv_room_blocks: int | None = Field(default=None, ge=1, le=2**40)

    @model_validator(mode="after")
    def _something(self) -> RankDoc:
        if self.total is None and self.kv_room is None:
            raise ValueError("give the rank's total memory (with its rows) or its measured kv_room")
        if self.kv_room_blocks is not None and self.kv_room is None:
            raise ValueError("kv_room_blocks is the block count a kv_room was derived from: give the kv_room too")
        return self

    @field_validator("free_at_start")
    @classmethod
    def _free_fits(cls, value: int | None, info: ValidationInfo) -> int | None:
        return _free_within_total(value, info.data.get("total"))


def _free_within_total(free: int | None, total: object) -> int | None:
    """Free memory at start is part of the card (torch's mem_get_info returns free ≤ total): a larger
    figure is a typo or the wrong card, and was planned as if the card had it to spare."""
    if free is not None and isinstance(total, int) and free > total:
        raise ValueError(f"{fmt_bytes(free)} is more than the GPU's total ({fmt_bytes(total)}): free memory at "
                         "start is part of the total; give the free memory of this card")
    return free


class GpuDoc(_Strict):
    """A GPU for estimated rows: its total (what torch's mem_get_info reports) or a preset name
    (`kvledger gpus`; nvidia-smi product strings match too), which gives the total."""

    total: Size
    free_at_start: Size | None = None
    name: str | None = Field(default=None, max_length=120)
    count: int | None = Field(default=None, ge=1, le=MAX_RANKS)
    interconnect: Literal["nvlink", "pcie"] | None = None  # None: the preset's usual one, else unknown

    @model_validator(mode="before")
    @classmethod
    def _preset_total(cls, data: object) -> object:
        if isinstance(data, Mapping) and data.get("total") is None and isinstance(data.get("name"), str):
            return {**data, "total": resolve_gpu(data["name"]).total_bytes}
        return data

    @field_validator("free_at_start")
    @classmethod
    def _free_fits(cls, value: int | None, info: ValidationInfo) -> int | None:
        return _free_within_total(value, info.data.get("total"))


class WhatIfDoc(_Strict):
    """Knobs applied as transforms to measured rows: they move what vLLM profiles (tp, prefill
    chunk) or the budget (utilization), and with it a measured KV room."""

    tp: int | None = Field(default=None, ge=1, le=4096)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    quantization: Literal["fp8"] | None = None
    max_loras: int | None = Field(default=None, ge=1, le=1024)  # engine.lora.max_loras on top of the run
    max_lora_rank: int | None = Field(default=None, ge=1, le=512)  # engine.lora.max_lora_rank


class PlanDocument(_Strict):
    model: ModelDoc | None = None
    layout: LayoutDoc = Field(default_factory=LayoutDoc)
    engine: EngineDoc = Field(default_factory=EngineDoc)
    policy: PolicyDoc = Field(default_factory=PolicyDoc)
    ranks: list[RankDoc] | None = Field(default=None, max_length=MAX_RANKS)
    gpu: GpuDoc | None = None
    node: NodeDoc | None = None
    vllm_version: str | None = Field(default=None, max_length=64)
    from_log: str | dict[str, Any] | None = None
    log_run: int = Field(default=0, ge=0, le=100_000)
    whatif: WhatIfDoc | None = None
    title: str | None = Field(default=None, max_length=200)
    # A `vllm serve` command line (or its args list) / a vLLM --config YAML: fills model, layout and
    # engine (app.ingest.vllm_serve.filled_from_serve, run by validate_plan before this model).
    serve: str | list[str] | None = Field(default=None, max_length=1000)
    vllm_config: str | None = Field(default=None, max_length=100_000)
    # What an imported log left unknown (issue 17 item 2): `ranks` then lists only the workers the
    # log prints (at most one entry per worker of the layout), and `notes` says what was done.
    ranks_partial: bool = False
    notes: list[Annotated[str, Field(max_length=1000)]] = Field(default_factory=list, max_length=64)

    @model_validator(mode="after")
    def _has_memory(self) -> PlanDocument:
        if self.from_log is None and not self.ranks and self.gpu is None:
            raise ValueError("give ranks (measured rows), gpu (for estimated rows) or from_log")
        if self.from_log is None and self.model is None:
            raise ValueError("give model: {config: …}, {catalogue: name} or {kv_bytes_per_token: N}")
        return self


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after[_one_source()]", "function-after[_something()]", "function-after[_has_memory()]"):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _gpu_preset(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A gpu given by name only takes its preset's total (an unknown name: an error naming gpu.name)."""
    gpu = doc.get("gpu")
    if not isinstance(gpu, Mapping) or gpu.get("total") is not None:
        return doc
    if isinstance(gpu.get("name"), str):
        return {**doc, "gpu": {**gpu, "total": resolve_gpu(gpu["name"], "gpu.name").total_bytes}}
    raise InputError("gpu.total", "required: give gpu.total or gpu.name (a preset: see `kvledger gpus`)")


def validate_plan(doc: object) -> PlanDocument:
    """Validate a plan document, raising InputError with the first problem's field path."""
    if isinstance(doc, PlanDocument):
        return doc
    if not isinstance(doc, Mapping):
        raise InputError("", f"a plan document must be a JSON object, got {type(doc).__name__}")
    filled, written = filled_from_serve(doc) if "serve" in doc or "vllm_config" in doc else (dict(doc), {})
    filled = dict(_gpu_preset(filled))
    try:
        validated = PlanDocument.model_validate(filled)
        _check_written_lora(validated, written)
    except ValidationError as exc:
        raise _as_written(_input_error(exc, PlanDocument), written) from None
    except InputError as exc:
        raise _as_written(exc, written) from None
    return validated


def _check_written_lora(doc: PlanDocument, written: Mapping[str, str]) -> None:
    """A LoRA setting the command line gave that vLLM refuses (`--max-lora-rank 24`: argparse's choices
    of MaxLoRARanks; LoRAConfig's own checks, vllm/config/lora.py @28be48fa9), refused here, where the
    flag as written is known, so the error names `serve --max-lora-rank` as vLLM's parser does (it
    was named engine.lora.max_lora_rank, a field the user never wrote). The plan checks it again with
    the model's shape (app.core.lora.check_lora in app.services.plan_inputs)."""
    lora = doc.engine.lora
    if lora is None or doc.from_log is not None or not any(p.startswith("engine.lora.") for p in written):
        return
    from app.core.lora import LoraSpec, check_lora
    from app.core.versions import rules_for

    try:
        rules = rules_for(doc.vllm_version)
    except InputError:
        return  # the plan names the bad version
    spec = LoraSpec(lora.max_loras, lora.max_lora_rank, lora.max_cpu_loras,
                    tuple(lora.target_modules) if lora.target_modules is not None else None)  # fmt: skip
    check_lora(spec, rules.version, rules.label)


def _as_written(error: InputError, written: Mapping[str, str]) -> InputError:
    """An error of a field the document's command line filled, under the flag as written there
    ("serve --gpu-memory-utilization"): the user wrote the flag, not our field."""
    where = written.get(error.field)
    if where is None:
        return error
    flag = where.split(" ", 1)[1]
    return error.as_written(where, flag, error.field, subject=error.field.rsplit(".", 1)[-1])


def validate_whatif(section: object) -> WhatIfDoc | None:
    """A document's `whatif` section alone, with the errors `validate_plan` gives (`whatif.tp`)."""
    if section is None:
        return None
    return validate_section(WhatIfDoc, section, "whatif")


def validate_section(model: type[_S], section: object, root: str) -> _S:
    """One section of a plan document (`LayoutDoc`, `EngineDoc`, …) alone, with the bounds and
    errors `validate_plan` gives it (`layout.tp`): e.g. `kvledger kv-bytes`'s options."""
    try:
        return model.model_validate(section)
    except ValidationError as exc:
        raise _input_error(exc, model, (root,)) from None


_S = TypeVar("_S", bound=BaseModel)


def _input_error(exc: ValidationError, model: type[BaseModel], root: tuple[str, ...] = ()) -> InputError:
    """The first error of a validation, under its dotted path, in our words (bounds: app.schema_bounds)."""
    err = exc.errors(include_url=False)[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    message = bound_message(model, err, loc) or str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown field (check the spelling)"
    return InputError(_path((*root, *loc)), message)
