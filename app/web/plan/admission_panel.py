"""The plan page's numbers: the KPI strip and the admission panel, each row labelled and formatted
from the result, and `COMPUTED_BY`, the core function behind each admission number (page block
`adm-<key>` → this key → the function; tests/web/test_explain_panel.py checks it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core import admission as core_admission
from app.core import encoder_cache, kvrank, kvspec, speculative
from app.core import rank_columns as core_columns
from app.core.json_rows import first_binding
from app.web.formatting import gib, intcomma, ratio
from app.web.plan.rank_table import rank_count

LIMIT_WORDS = {
    "kv_blocks": "KV blocks (memory)",
    "max_num_seqs": "max_num_seqs",
    "max_model_len": "max_model_len (one request does not fit)",
}


def binding_row(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The first binding rank's row, else the first rank's (no scan of rows made when read)."""
    ranks: Sequence[Mapping[str, Any]] = result["ranks"]
    found = first_binding(ranks)
    return found if found is not None else ranks[0] if ranks else {}


def kpis(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    binding = binding_row(result)
    ceiling = result.get("concurrency_ceiling")
    concurrency_sub = f"limit: {LIMIT_WORDS.get(str(result.get('binding_limit')), result.get('binding_limit'))}"
    fits = bool(result.get("will_start"))
    if not fits:
        return _not_starting_kpis(result)
    return [
        {"key": "tokens", "label": "Tokens (block-rounded)", "value": intcomma(result["tokens"]),
         "sub": f"raw {intcomma(result['raw_tokens'])} · {intcomma(result['blocks'])} blocks"},
        {"key": "kv", "label": "KV on the binding rank", "value": gib(binding.get("kv_bytes")),
         "sub": f"{intcomma(result['kv_bytes_per_token'])} B per token per rank"},
        {"key": "binding", "label": "Binding rank", "value": str(result.get("binding_rank")),
         "sub": f"of {intcomma(rank_count(result))} · stranded {gib(result.get('stranded_bytes'))}"},
        {"key": "concurrency", "label": "Concurrent requests",
         "value": intcomma(result.get("concurrency")) if ceiling is not None else "—",
         "sub": concurrency_sub if ceiling is not None else "set avg live tokens per request"},
        {"key": "starts", "label": "vLLM starts", "value": "yes" if fits else "no", "bad": not fits,
         "sub": "max_model_len fits" if result.get("fits_max_model_len")
         else f"largest max_model_len that fits: {intcomma(result.get('largest_max_model_len'))}"},
    ]


def _not_starting_kpis(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A plan vLLM refuses shows no capacity: the figures a started engine would have are "—"."""
    none = "vLLM will not start: no capacity"
    return [
        {"key": "tokens", "label": "Tokens (block-rounded)", "value": "—", "sub": none},
        {"key": "kv", "label": "KV on the binding rank", "value": "—", "sub": none},
        {"key": "binding", "label": "Binding rank", "value": str(result.get("binding_rank")),
         "sub": f"of {intcomma(len(result['ranks']))}"},
        {"key": "concurrency", "label": "Concurrent requests", "value": "—", "sub": none},
        {"key": "starts", "label": "vLLM starts", "value": "no", "bad": True,
         "sub": "why, and what would make it start: above"},
    ]


def _concurrency_text(result: Mapping[str, Any]) -> str:
    """vLLM's "%.2fx" of the unrounded ratio (the core's explanation formats it so): the JSON's
    4-decimal value rounded again to 2 would print 2.83 for 2.82495 (2.825 in the JSON)."""
    explained = _explain(result, "max_concurrency_at_max_model_len")
    text = str(explained.get("result", "")) if explained else ""
    if text.endswith("x"):
        return text[:-1] + "×"
    return f"{ratio(result.get('max_concurrency_at_max_model_len'), 2)}×"


def _explain(result: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    entry = (result.get("explain") or {}).get(key)
    return entry if isinstance(entry, Mapping) else None


@dataclass(frozen=True, slots=True)
class AdmissionRow:
    """One admission-panel number (attribute access keeps the template's hot loop cheap)."""

    key: str
    label: str
    value: str
    badge: str | None = None
    note: str | None = None
    explain: Mapping[str, Any] | None = None


def _limit_words(limit: str, fits: bool, ceiling: object) -> str:
    """The limit row's value: with no live-token figure the core reports max_num_seqs (the only cap
    it can count), which does not make it the first reached (a TP4 Llama-3.1-70B holds 3.45
    max_model_len requests beside a max_num_seqs of 1,024)."""
    if fits and ceiling is None:
        return "unknown (set avg live tokens)"
    return LIMIT_WORDS.get(limit, limit)


def admission(result: Mapping[str, Any]) -> list[AdmissionRow]:
    """The admission panel's rows: label, value, an optional badge and note, and the explain entry."""
    binding = binding_row(result)
    limit = str(result.get("binding_limit"))
    fits = bool(result.get("fits_max_model_len"))
    ceiling = result.get("concurrency_ceiling")

    def row(key: str, label: str, value: str, badge: str | None = None, note: str | None = None) -> AdmissionRow:
        return AdmissionRow(key, label, value, badge, note, _explain(result, key))

    return [
        row("requested_bytes", "Requested budget per rank", gib(binding.get("requested_bytes"))),
        row("kv_bytes", "KV bytes on the binding rank", gib(binding.get("kv_bytes"))),
        row("kv_bytes_per_token", "KV bytes per token, per rank", f"{intcomma(result['kv_bytes_per_token'])} B"),
        row("page_bytes", "Page (one block)", f"{intcomma(result['page_bytes'])} B",
            note=f"block_size {result['block_size']} × per-token bytes of every KV layer on the rank."),
        row("blocks", "Blocks (minimum over ranks)", intcomma(result["blocks"])),
        row("tokens", "Token positions, block-rounded", intcomma(result["tokens"])),
        row("raw_tokens", "Raw token positions", intcomma(result["raw_tokens"]),
            note="KV bytes / per-token bytes on the binding rank, before rounding down to whole blocks."),
        row("schedulable_tokens", "Schedulable tokens", intcomma(result["schedulable_tokens"])),
        row("concurrency_ceiling", "Concurrency ceiling (memory)", intcomma(ceiling),
            note=None if ceiling is not None else "Set the average live tokens per request to get a ceiling."),
        row("binding_limit", "Limit that binds first", _limit_words(limit, fits, ceiling),
            note=f"KV blocks, max_num_seqs ({intcomma(result.get('max_num_seqs'))}) and max_model_len are three "
            "separate limits; this one is reached first." if ceiling is not None or not fits else
            f"Without the average live tokens per request the KV pool's ceiling is unknown: max_num_seqs "
            f"({intcomma(result.get('max_num_seqs'))}) is the only cap known, not the one reached first."),
        row("binding_rank", "Binding rank", str(result.get("binding_rank")),
            note=result.get("binding_reason") or "The rank with the fewest KV blocks sets every rank's count."),
        row("max_concurrency_at_max_model_len", "vLLM max concurrency at max_model_len",
            _concurrency_text(result), badge="derived"),
        row("vllm_kv_cache_size_tokens", "vLLM \u201cGPU KV cache size\u201d",
            f"{intcomma(result['vllm_kv_cache_size_tokens'])} tokens", badge="derived"),
        row("fits_max_model_len", "One max_model_len request fits", "yes" if fits else "no",
            badge=None if fits else "bad",
            note=f"Largest max_model_len that fits: {intcomma(result.get('largest_max_model_len'))} tokens."),
        row("stranded_bytes", "Stranded KV, all ranks", gib(result.get("stranded_bytes")),
            note="Bytes on the other ranks beyond the binding rank's blocks: they cannot hold whole tokens."),
        *_extra_rows(result, row),
    ]


def _extra_rows(result: Mapping[str, Any], row: Callable[..., AdmissionRow]) -> list[AdmissionRow]:
    """Issue 15's rows where the plan has them: the encoder cache, the draft's bytes per token."""
    out = []
    cache = result.get("encoder_cache")
    if cache:
        out.append(row("encoder_cache_bytes", "Encoder cache (in the activation peak)", gib(cache["cache_bytes"]),
                       note=f"{intcomma(cache['encoder_cache_size_tokens'])}-token budget, "
                       f"{cache['items_profiled']} item(s) of {intcomma(cache['max_tokens_per_item'])} tokens "
                       "profiled; the prefill chunk (mnbt) moves it."))  # fmt: skip
    if result.get("draft_kv_bytes_per_token"):
        spec = result["engine"]["speculative"]
        out.append(row("draft_kv_bytes_per_token", "Draft's KV bytes per token",
                       f"{intcomma(result['draft_kv_bytes_per_token'])} B",
                       note=f"{spec['method']}: part of the KV bytes per token; each running request also reserves "
                       f"{spec['lookahead_tokens_per_request']} lookahead slots."))  # fmt: skip
    return out


#: Where each admission-panel number is computed: the page's `adm-<key>` (block `results`, from
#: `admission()` above) → this key → the core function. tests/web/test_explain_panel.py traces a
#: page render and checks that each function runs and, for the pure ones, gives the number shown.
COMPUTED_BY: dict[str, Callable[..., object]] = {
    "requested_bytes": core_columns.work_out_columns,
    "kv_bytes": core_columns.work_out_columns,
    "kv_bytes_per_token": kvspec.rank_kv,
    "page_bytes": kvspec.rank_kv,
    "blocks": core_admission.admit_columns,
    "tokens": core_admission.admit_columns,
    "raw_tokens": kvrank.RankKV.raw_tokens,
    "schedulable_tokens": core_admission.schedulable,
    "concurrency_ceiling": core_admission.admit_columns,
    "binding_limit": core_admission.admit_columns,
    "binding_rank": core_admission.admit_columns,
    "max_concurrency_at_max_model_len": core_admission.admit_columns,
    "vllm_kv_cache_size_tokens": core_admission.admit_columns,
    "fits_max_model_len": core_admission.admit_columns,
    "stranded_bytes": core_admission.admit_columns,
    "encoder_cache_bytes": encoder_cache.encoder_cache_terms,
    "draft_kv_bytes_per_token": speculative.draft_kv_bytes_per_token,
}
