"""A vLLM start-up log imported into a deployment becomes a ledger: one parsed start-up run's
per-rank rows, its evidence (vLLM version stated or inferred, settings), the parser's findings
appended to the note, and the log text itself (capped by the repository)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.core.audit import ROW_FIELDS, LedgerRow
from app.core.errors import InputError
from app.db import repository as repo
from app.db.session import run_write
from app.services import imports

JSON = dict[str, Any]
MAX_NOTE_CHARS = 20_000



def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _version_text(run: Mapping[str, Any]) -> str | None:
    stated = run.get("vllm_version")
    if isinstance(stated, str) and stated.strip():
        return stated.strip()[:100]
    version = run.get("version") or {}
    low, high = version.get("inferred_min"), version.get("inferred_max_exclusive")
    if not low:
        return None
    return (f"{low} (inferred; before {high})" if high else f"{low}+ (inferred)")[:100]


def _evidence(run: Mapping[str, Any], ranks: Sequence[LedgerRow]) -> dict[str, Any]:
    settings: Mapping[str, Any] = run.get("settings") or {}
    engine: Mapping[str, Any] = run.get("engine") or {}
    util = settings.get("gpu_memory_utilization")
    eager = settings.get("enforce_eager")
    evidence: dict[str, Any] = {
        "vllm_version": _version_text(run),
        "model_id": str(settings["model"])[:300] if settings.get("model") else None,
        "quantization": str(settings["quantization"])[:100] if settings.get("quantization") else None,
        "kv_cache_dtype": str(settings["kv_cache_dtype"])[:50] if settings.get("kv_cache_dtype") else None,
        "block_size": _block_size(settings, engine),
        "tp": _int(settings.get("tensor_parallel_size")),
        "pp": _int(settings.get("pipeline_parallel_size")),
        "dp": _int(settings.get("data_parallel_size")),
        "max_num_batched_tokens": _int(settings.get("max_num_batched_tokens")),
        "gpu_memory_utilization": float(util) if isinstance(util, int | float) and 0 < util <= 1 else None,
        "kv_cache_memory_bytes": _int(settings.get("kv_cache_memory_bytes")),
        "graph_mode": "eager" if eager is True else None,
        **_engine_figures(engine),
    }
    if evidence["tp"] is None:
        tp_ids = {r.get("parallel", {}).get("TP") for r in run.get("ranks") or [] if isinstance(r, Mapping)}
        known = [t for t in tp_ids if isinstance(t, int) and not isinstance(t, bool)]
        evidence["tp"] = max(known) + 1 if known and len(known) == len(ranks) else None
    return {k: v for k, v in evidence.items() if v is not None}


def _engine_figures(engine: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's 'Maximum concurrency for L tokens per request: X' (v1/core/kv_cache_utils.py), with L."""
    concurrency, length = engine.get("max_concurrency"), _int(engine.get("max_concurrency_tokens"))
    if isinstance(concurrency, bool) or not isinstance(concurrency, int | float) or not 0 < concurrency <= 10**9:
        return {}
    return {"max_concurrency": float(concurrency), "max_concurrency_tokens": length}


def _rank_rows(run: Mapping[str, Any]) -> list[LedgerRow]:
    """The run's ranks as ledger rows. vLLM gives every worker the engine's block count (the
    minimum over workers) and prints 'GPU KV cache size: N tokens' for the engine, so a rank
    whose own figures were not printed gets the engine's: every rank with a KV row, or the one
    rank of a run that printed a single process's lines."""
    engine: Mapping[str, Any] = run.get("engine") or {}
    engine_blocks, engine_tokens = _int(engine.get("num_gpu_blocks")), _int(engine.get("kv_tokens"))
    records = [r for r in run.get("ranks") or [] if isinstance(r, Mapping)]
    rows, seen = [], set()
    for i, rank in enumerate(records):
        label = str(rank.get("rank") or f"rank{i}")[:100] or f"rank{i}"
        if label in seen:
            label = f"{label}#{i}"[:100]
        seen.add(label)
        row = LedgerRow(label, *(_int(rank.get(name)) for name in ROW_FIELDS))
        if row.kv_bytes is not None or len(records) == 1:
            if row.num_gpu_blocks is None and engine_blocks is not None:
                row = replace(row, num_gpu_blocks=engine_blocks)
            if row.kv_tokens is None and engine_tokens is not None:
                row = replace(row, kv_tokens=engine_tokens)
        rows.append(row)
    return rows


def _block_size(settings: Mapping[str, Any], engine: Mapping[str, Any]) -> int | None:
    """The block size stated in the log, else the one its engine line implies (tokens ÷ blocks)."""
    stated = _int(settings.get("block_size")) or _int(engine.get("block_size"))
    if stated:
        return stated
    tokens, blocks = _int(engine.get("kv_tokens")), _int(engine.get("num_gpu_blocks"))
    if tokens and blocks and tokens % blocks == 0 and tokens // blocks in (1, 8, 16, 32, 64, 128, 256):
        return tokens // blocks
    return None


def ledger_from_log(
    text: str, run_index: int | None = None, note: str = "", captured_at: dt.date | None = None
) -> tuple[repo.LedgerIn, JSON]:
    """A ledger from one start-up run of a vLLM log (the last run unless `run_index` is given),
    and the parsed log. InputError (field "log" or "run") when there is nothing to store."""
    if not text.strip():
        raise InputError("log", "paste a vLLM startup log or choose a log file")
    if len(note) > MAX_NOTE_CHARS:
        raise InputError("note", f"the note is longer than {MAX_NOTE_CHARS:,} characters")
    if "\x00" in text or "\x00" in note:
        raise InputError("log" if "\x00" in text else "note", "contains a NUL character, which cannot be stored")
    parsed = imports.import_log(text)
    runs = parsed.get("runs") or []
    if not runs:
        raise InputError("log", "no vLLM start-up run was found in this text")
    index = len(runs) - 1 if run_index is None else run_index
    if not 0 <= index < len(runs):
        raise InputError("run", f"this log has {len(runs)} run(s); choose 0 to {len(runs) - 1}")
    run = runs[index]
    ranks = _rank_rows(run)
    if not ranks:
        raise InputError("log", "this run has no per-rank memory lines to store")
    findings = [f"{f.get('code')}: {f.get('message')}" for f in run.get("findings") or [] if isinstance(f, Mapping)]
    full_note = note
    if findings:
        full_note = (note + "\n\n" if note else "") + "Import findings:\n" + "\n".join(f"- {f}" for f in findings)
    evidence = _evidence(run, ranks)
    return repo.LedgerIn(ranks, evidence, captured_at, full_note, text), parsed


def import_log_ledger(
    factory: sessionmaker[Session],
    slug: str,
    text: str,
    *,
    run_index: int | None = None,
    note: str = "",
    captured_at: dt.date | None = None,
    max_source_log_bytes: int = repo.DEFAULT_MAX_SOURCE_LOG_BYTES,
    isolate: Callable[..., tuple[repo.LedgerIn, JSON]] | None = None,
) -> int:
    """Parse `text` and store its run as a new ledger of deployment `slug`; the ledger id.
    `isolate(func, *args)` runs the parse elsewhere (the web: a child process, web/isolation.py)."""
    if isolate is not None:
        ledger, _ = isolate(ledger_from_log, text, run_index, note, captured_at)
    else:
        ledger, _ = ledger_from_log(text, run_index, note, captured_at)
    try:
        return run_write(factory, lambda s: repo.add_ledger(s, slug, ledger, max_source_log_bytes=max_source_log_bytes))
    except repo.InvalidInput as exc:
        raise InputError("log", str(exc)) from None
