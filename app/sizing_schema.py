"""The sizing document (issue 13): what must be served, on which GPUs, within how many.

Validated like the plan document (`app.schemas`): pydantic checks shapes, types and the stated
ranges; every failure is an `InputError` naming the dotted field (`gpus[1]`, `options.tp[0]`). An
unknown GPU lists the presets nearest to its name. The model is the plan document's `model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from app.core.errors import InputError
from app.core.gpus import resolve_gpu
from app.schema_bounds import bound_message
from app.schemas import MAX_TOKENS, ModelDoc, NoBoolNumbers, Size

DEFAULT_GPUS = ("H100 80GB", "H200 141GB", "A100 80GB", "L40S 48GB")


class _Strict(NoBoolNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _kv_dtype(value: object) -> object:
    from app.core.kvspec import KV_CACHE_DTYPES

    if isinstance(value, str) and value not in KV_CACHE_DTYPES:
        raise ValueError(f"unknown KV cache dtype {value!r}; vLLM accepts {', '.join(KV_CACHE_DTYPES)}")
    return value


def _unique(value: object) -> object:
    """A list given with repeats is read once per distinct value (first order kept)."""
    if isinstance(value, list):
        out: list[object] = []
        for item in value:
            if item not in out:
                out.append(item)
        return out
    return value


KvDtype = Annotated[str, BeforeValidator(_kv_dtype)]


class TargetDoc(_Strict):
    """`concurrency` requests averaging `avg_live_tokens` (default: max_model_len each), and / or
    `tokens` resident KV tokens over all replicas, or only `max_model_len` (one request fits)."""

    max_model_len: int | None = Field(default=None, ge=1, le=100_000_000)
    concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    avg_live_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _consistent(self) -> TargetDoc:
        if self.max_model_len is None and self.concurrency is None and self.tokens is None:
            raise ValueError("give max_model_len, concurrency (with avg_live_tokens) or tokens")
        if self.avg_live_tokens is not None and self.concurrency is None:
            raise ValueError("avg_live_tokens goes with concurrency (the requests that average it)")
        if self.avg_live_tokens and self.max_model_len and self.avg_live_tokens > self.max_model_len:
            raise ValueError(f"avg_live_tokens {self.avg_live_tokens:,} is more than max_model_len "
                             f"{self.max_model_len:,}")  # fmt: skip
        return self


def _default_quantization() -> list[Literal["fp8"] | None]:
    return [None, "fp8"]


class OptionsDoc(_Strict):
    """The settings tried (each list in full, best first; repeats are dropped)."""

    tp: Annotated[list[Annotated[int, Field(ge=1, le=4096)]], BeforeValidator(_unique)] | None = Field(
        default=None, min_length=1, max_length=64
    )  # None: every degree the model allows up to max_gpus
    pp: Annotated[list[Annotated[int, Field(ge=1, le=1024)]], BeforeValidator(_unique)] = Field(
        default_factory=lambda: [1], min_length=1, max_length=16
    )
    kv_cache_dtype: Annotated[list[KvDtype], BeforeValidator(_unique)] = Field(
        default_factory=lambda: ["auto", "fp8"], min_length=1, max_length=16
    )
    quantization: Annotated[list[Literal["fp8"] | None], BeforeValidator(_unique)] = Field(
        default_factory=_default_quantization, min_length=1, max_length=2
    )
    gpu_memory_utilization: Annotated[
        list[Annotated[float, Field(gt=0, le=1)]], BeforeValidator(_unique)
    ] | None = Field(default=None, min_length=1, max_length=16)  # None: the version's default
    engines_per_gpu: Annotated[list[Annotated[int, Field(ge=1, le=16)]], BeforeValidator(_unique)] = Field(
        default_factory=lambda: [1, 2, 4], min_length=1, max_length=16
    )


class SizingEngineDoc(_Strict):
    """Engine settings every candidate shares (vLLM's defaults where left out)."""

    block_size: int = Field(default=16, ge=1, le=4096)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    max_num_seqs: int | None = Field(default=None, ge=1, le=1_000_000)
    enforce_eager: bool = False
    #: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a target max_model_len above the model's derived length is
    #: planned as vLLM starts it, with its warning (the plan's engine.allow_long_max_model_len)
    allow_long_max_model_len: bool = False


class SizingPolicyDoc(_Strict):
    growth_reserve: float = Field(default=0.0, ge=0, lt=1)
    operating_reserve: Size = 0


class SizingDocument(_Strict):
    model: ModelDoc
    target: TargetDoc
    gpus: list[Annotated[str, Field(min_length=1, max_length=120)]] = Field(
        default_factory=lambda: list(DEFAULT_GPUS), min_length=1, max_length=32
    )
    max_gpus: int = Field(default=8, ge=1, le=4096)
    options: OptionsDoc = Field(default_factory=OptionsDoc)
    engine: SizingEngineDoc = Field(default_factory=SizingEngineDoc)
    policy: SizingPolicyDoc = Field(default_factory=SizingPolicyDoc)
    vllm_version: str | None = Field(default=None, max_length=64)
    limit: int = Field(default=20, ge=1, le=500)
    title: str | None = Field(default=None, max_length=200)

    @model_validator(mode="after")
    def _estimable(self) -> SizingDocument:
        if self.model.kv_bytes_per_token is not None:
            raise ValueError("sizing estimates every rank's rows: give model.catalogue or model.config")
        return self

    def presets(self) -> list[tuple[str, int]]:
        """(preset name, total bytes) of each GPU named, in order, once each."""
        out: list[tuple[str, int]] = []
        for i, name in enumerate(self.gpus):
            try:
                preset = resolve_gpu(name, f"gpus[{i}]")
            except InputError as exc:  # the plan's advice (give gpu.total) does not apply here
                raise InputError(exc.field, exc.message.split("; give")[0] + "; `kvledger gpus` lists them") from None
            if (preset.name, preset.total_bytes) not in out:
                out.append((preset.name, preset.total_bytes))
        return out


_TYPE_TAGS = ("int", "float", "str", "bool")


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.startswith(("function-", "list[", "nullable[", "literal[")) and part not in _TYPE_TAGS:
            out += f".{part}" if out else part
    return out


def validate_sizing(doc: object) -> SizingDocument:
    """Validate a sizing document, raising InputError with the first problem's field path."""
    if isinstance(doc, SizingDocument):
        return doc
    if not isinstance(doc, Mapping):
        raise InputError("", f"a sizing document must be a JSON object, got {type(doc).__name__}")
    try:
        validated = SizingDocument.model_validate(dict(doc))
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = tuple(p for p in err["loc"] if isinstance(p, int) or _path((p,)))  # validator tags dropped
        message = bound_message(SizingDocument, err, loc) or str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown field (check the spelling)"
        raise InputError(_path(tuple(err["loc"])), message) from None
    validated.presets()  # unknown GPU names: the nearest presets, naming gpus[i]
    return validated
