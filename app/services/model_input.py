"""The model a plan names, as the core takes it: an inline config.json, a catalogue entry (its
config's sha256 pinned) or bare KV bytes per token; online fp8 applied where the engine asks for it.
Also the catalogue search and the `kvledger kv-bytes` report of a config."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from app.core.errors import InputError
from app.core.kvspec import rank_kv
from app.core.max_len import long_length_note
from app.core.mla_rules import gpu_family, mla_sizing
from app.core.model_config import shape_from_config
from app.core.plan import ModelInput
from app.core.shape import ModelShape, check_given_max_model_len, default_max_model_len, online_fp8_shape
from app.core.versions import CURRENT_VLLM, parse_version
from app.core.vision import vision_geometry
from app.schemas import PlanDocument
from app.services.memo import memoised

if TYPE_CHECKING:
    from app.ingest.catalogue import CatalogueEntry

JSON = dict[str, Any]


def resolve_model(doc: PlanDocument) -> ModelInput:
    """The model input of a document (catalogue entries pin their config's sha256)."""
    spec = doc.model
    if spec is None:
        raise InputError("model", "give model: {config: …}, {catalogue: name} or {kv_bytes_per_token: N}")
    if spec.kv_bytes_per_token is not None:
        return ModelInput(kv_bytes_per_token=spec.kv_bytes_per_token, name=spec.name, source="kv_bytes_per_token",
                          stated_quantization=spec.quantization)
    index = spec.safetensors_index.model_dump() if spec.safetensors_index is not None else None
    if spec.catalogue is not None:
        from app.ingest.catalogue import get_model

        try:
            entry = get_model(spec.catalogue)
        except KeyError as exc:
            raise InputError("model.catalogue", str(exc.args[0]) if exc.args else "unknown model") from None
        shape = _catalogue_shape(entry) if index is None else shape_of(entry.config, "model.catalogue", index)
        return ModelInput(
            shape=shape, name=spec.name or entry.hf_id, source=f"catalogue:{entry.slug}", sha256=entry.sha256,
            multimodal="vision_config" in entry.config, vision=vision_geometry(entry.config),
            stated_quantization=spec.quantization,
        )  # fmt: skip
    config = spec.config or {}
    sha = hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    name = spec.name or _str(config.get("_name_or_path"))
    return ModelInput(
        shape=shape_of(config, "model.config", index),
        name=name,
        source="config",
        sha256=sha,
        multimodal="vision_config" in config,
        vision=vision_geometry(config),
        stated_quantization=spec.quantization,
    )


def _catalogue_shape(entry: CatalogueEntry) -> ModelShape:
    """A catalogue model's shape, parsed once per app (`app.services.memo`; keyed by its config's
    sha256, so a changed catalogue is a new key); exact weights from the checkpoint's total_size
    where the catalogue pins it."""
    pinned = {"metadata": {"total_size": entry.index_total_bytes}} if entry.index_total_bytes else None
    return memoised(("catalogue_shape", entry.slug, entry.sha256, entry.index_total_bytes),
                    lambda: shape_of(entry.config, "model.catalogue", pinned))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def shape_of(config: Mapping[str, object], field: str, index: Mapping[str, object] | None = None) -> ModelShape:
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


def quantized(model: ModelInput, quantization: str | None) -> ModelInput:
    """The model as vLLM holds it under `--quantization`: fp8 quantizes an unquantized checkpoint online;
    awq / gptq name the checkpoint's own method (its plain kernels, app.core.dequant_linear), whose weights
    are the checkpoint's, so the model is kept. vLLM refuses a method other than the checkpoint's
    (`ModelConfig._verify_quantization`, vllm/config/model.py @4dd49b06f: "Quantization method specified in
    the model config (...) does not match the quantization method specified in the `quantization` argument")."""
    if quantization is None:
        return model
    if model.shape is None:
        raise InputError("engine.quantization", "needs the model's config.json (or a catalogue model) to size weights")
    if quantization in ("awq", "gptq"):
        own = model.shape.quantization or model.stated_quantization
        if own is None or own.removesuffix("_marlin") != quantization:
            raise InputError("engine.quantization", f"{quantization} needs a {quantization} checkpoint; the model's is "
                             f"{own or 'unquantized'} and vLLM refuses a --quantization that differs from it")
        return model
    shape = model.shape  # online_fp8_shape is pure over a frozen shape: a sizing search quantizes once
    return replace(model, shape=memoised(("online_fp8_shape", shape), lambda: online_fp8_shape(shape)))


def catalogue_search(q: str, limit: int = 20) -> list[JSON]:
    """Catalogue models matching a query (all models for an empty query)."""
    from app.ingest.catalogue import list_models, search_models

    entries = search_models(q, limit) if q.strip() else list_models()[:limit]
    return [{"slug": e.slug, "name": e.name, "hf_id": e.hf_id, "evidence": e.evidence} for e in entries]


def kv_bytes_report(
    config: Mapping[str, object],
    *,
    tp: int = 1,
    pp: int = 1,
    dcp: int = 1,
    kv_cache_dtype: str = "auto",
    block_size: int | None = None,
    max_model_len: int | None = None,
    max_num_batched_tokens: int | None = None,
    vllm_version: str | None = None,
    gpu: str | None = None,
    mla_disable: bool = False,
    allow_long_max_model_len: bool = False,
) -> JSON:
    """`kvledger kv-bytes`: per-rank bytes per token, page bytes and vLLM's per-request worst case.

    An MLA model is sized as ``vllm_version`` caches it (None: the current release) on ``gpu``'s family,
    with ``VLLM_MLA_DISABLE=1`` when ``mla_disable`` (app.core.mla_rules). ``block_size`` None: vLLM's
    default 16, which an MLA backend may replace.

    The options are held to a plan document's bounds (`LayoutDoc`, `EngineDoc`): `--max-model-len
    1e20` printed a 3.3e25-byte request."""
    _check_options(tp=tp, pp=pp, dcp=dcp, kv_cache_dtype=kv_cache_dtype, block_size=block_size,
                   max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens)
    try:
        shape = shape_from_config(config)
    except InputError as exc:  # the file is the config: its fields are config.X, not model.config.X
        field = "config" + exc.field.removeprefix("model.config") if exc.field.startswith("model.config") else exc.field
        raise InputError(field, exc.message) from None
    mla_notes: list[str] = []
    configured = 16 if block_size is None else block_size
    if vllm_version is not None:
        parse_version(vllm_version, "vllm_version")
    if gpu is not None and gpu_family(gpu) is None:
        mla_notes.append(f"GPU {gpu!r}: no MLA block-size rule for its family (Hopper, Blackwell, Ampere/Ada)")
    mla = mla_sizing(shape, vllm_version or CURRENT_VLLM, gpu, kv_cache_dtype, configured, block_size is not None,
                     mla_disable)
    shape, configured = mla.shape, mla.block_size
    mla_notes += mla.notes
    rkv = rank_kv(shape, tp=tp, pp=pp, dcp=dcp, kv_cache_dtype=kv_cache_dtype, block_size=configured)
    # `is None`, not `or`: a 0 given is refused by the per-request count below, never replaced by the default
    mml = default_max_model_len(shape)[0] if max_model_len is None else max_model_len
    long_note = None  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: vLLM warns instead of refusing (app.core.max_len rule 5)
    if max_model_len is not None and allow_long_max_model_len and shape.max_len is not None:
        long_note = long_length_note(max_model_len, shape.max_len)
    elif max_model_len is not None:
        try:
            check_given_max_model_len("max_model_len", shape, max_model_len)
        except InputError as exc:  # named by the option the user wrote, as `_check_options` does
            raise InputError(exc.field, exc.message + "; kvledger kv-bytes sizes a run started with it given "
                             "--allow-long-max-model-len").as_written(
                "--max-model-len", "--max-model-len", "engine.max_model_len") from None  # fmt: skip
    mnbt = 8192 if max_num_batched_tokens is None else max_num_batched_tokens
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
        "notes": [*shape.notes, *mla_notes, *rkv.notes, *((long_note,) if long_note else ())],
    }


def _check_options(**options: object) -> None:
    """kv-bytes' options validated as the plan's `layout` and `engine` sections, an error named by
    the option the user wrote: "--max-model-len 0 is out of range: give a whole number from 1 to
    100,000,000 (read as engine.max_model_len)" (it said `engine.max_model_len: …, got 0`)."""
    from app.schemas import EngineDoc, LayoutDoc, validate_section

    for model, root in ((LayoutDoc, "layout"), (EngineDoc, "engine")):
        section = {k: v for k, v in options.items() if k in model.model_fields and v is not None}
        try:
            validate_section(model, section, root)
        except InputError as exc:
            name = exc.field.removeprefix(f"{root}.")
            flag = "--" + name.replace("_", "-")
            raise exc.as_written(flag, flag, exc.field, subject=name) from None
