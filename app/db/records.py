"""What every module of `app.db` shares about stored records: the domain errors, the checks a
value passes before it is stored, and the content hash that makes a record tamper-evident.

The repository and the exchange (export/import) both import this module; it imports nothing
of theirs (one direction only).

Tamper evidence. Every saved plan and ledger stores `content_hash`, the SHA-256 of its content
as canonical JSON (keys sorted, no whitespace, UTF-8, no NaN): for a plan its slug, parent,
title, listed flag, document, result and core version and creation time; for a ledger its slug,
deployment, dates, note, evidence, ranks and the SHA-256 of its source log (stored beside it as
`source_log_sha256`, so a history page verifies a ledger without reading its log; the full read
checks the log against it too). Every read recomputes the hash; a row whose hash differs (or is
missing) was changed outside KV Ledger, and the reader says so instead of serving it as intact.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.core.audit import LATER_ROW_FIELDS, ROW_FIELDS, EvidenceValue, LedgerRow

MAX_BIGINT = 2**63 - 1
MAX_INT = 2**31 - 1
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
#: The words every reader shows for a record whose content hash does not match.
CHANGED_OUTSIDE = "this record was changed outside KV Ledger"

# Evidence keys, their Python type, and a length limit (strings) or upper bound (ints).
EVIDENCE_TYPES: dict[str, tuple[type, int]] = {
    "vllm_version": (str, 100),
    "vllm_commit": (str, 100),
    "model_id": (str, 300),
    "model_revision": (str, 100),
    "config_sha256": (str, 64),
    "quantization": (str, 100),
    "kv_cache_dtype": (str, 50),
    "block_size": (int, MAX_INT),
    "tp": (int, MAX_INT),
    "pp": (int, MAX_INT),
    "dp": (int, MAX_INT),
    "ep": (int, MAX_INT),
    "gpu_type": (str, 200),
    "driver_version": (str, 100),
    "cuda_version": (str, 100),
    "torch_version": (str, 100),
    "graph_mode": (str, 100),
    "max_num_batched_tokens": (int, MAX_INT),
    "gpu_memory_utilization": (float, 1),
    "kv_cache_memory_bytes": (int, MAX_BIGINT),
    # Engine figures the log states (vLLM's 'Maximum concurrency for L tokens per request: X'),
    # kept beside the per-rank rows (blocks, 'GPU KV cache size' tokens, CUDA graphs).
    "max_concurrency": (float, 10**9),
    "max_concurrency_tokens": (int, MAX_INT),
}
#: Evidence keys added after ledgers were first stored: left out of the content hash while unknown.
LATER_EVIDENCE_KEYS = frozenset({"max_concurrency", "max_concurrency_tokens"})
EVIDENCE_KEYS = tuple(EVIDENCE_TYPES)


class RepositoryError(Exception):
    """Base of the storage layer's domain errors."""


class NotFound(RepositoryError):
    pass


class Conflict(RepositoryError):
    pass


class InvalidInput(RepositoryError):
    pass


# ---------------------------------------------------------------- stored-value checks


def utc(value: dt.datetime) -> dt.datetime:
    """Stored datetimes are UTC; SQLite hands them back naive."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def text(what: str, value: object, max_chars: int | None = None) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character, which cannot be stored")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInput(f"{what} is {len(value)} characters long; at most {max_chars} are allowed")
    return value


def count(what: str, value: object, upper: int = MAX_BIGINT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{what} must be a whole number, got {value!r}")
    if not 0 <= value <= upper:
        raise InvalidInput(f"{what} = {value} is outside 0..{upper}")
    return value


def slug(what: str, value: object) -> str:
    given = text(what, value)
    if not SLUG_RE.match(given):
        raise InvalidInput(
            f"{what} {given!r} must be 1-100 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit"
        )
    return given


def json_value(what: str, value: object) -> Any:
    """`value` as the database hands it back: a JSON round trip (no NaN, no non-JSON types)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} is not plain JSON: {exc}") from None


def validate_evidence(evidence: Mapping[str, object]) -> dict[str, EvidenceValue]:
    """Known keys only, each of its type; None means unknown."""
    if not isinstance(evidence, Mapping):
        raise InvalidInput(f"evidence must be an object of key → value, got {type(evidence).__name__}")
    clean: dict[str, EvidenceValue] = {}
    for key, value in evidence.items():
        if key not in EVIDENCE_TYPES:
            raise InvalidInput(f"unknown evidence key {key!r}; known keys: {', '.join(EVIDENCE_KEYS)}")
        kind, limit = EVIDENCE_TYPES[key]
        if value is None:
            clean[key] = None
        elif kind is str:
            clean[key] = text(f"evidence {key}", value, limit)
        elif kind is int:
            clean[key] = count(f"evidence {key}", value, limit)
        elif isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= limit:
            raise InvalidInput(f"evidence {key} must be a number in (0, {limit}], got {value!r}")
        else:
            clean[key] = float(value)
    return clean


def validate_ranks(ranks: Sequence[object]) -> list[LedgerRow]:
    """A ledger's ranks: at least one, labelled uniquely (≤ 100 characters), every row a count."""
    if not ranks:
        raise InvalidInput("a ledger needs at least one rank")
    seen: set[str] = set()
    for row in ranks:
        if not isinstance(row, LedgerRow):
            raise InvalidInput(f"ledger ranks must be LedgerRow, got {type(row).__name__}")
        text("rank label", row.rank, 100)
        if not row.rank:
            raise InvalidInput("rank label must not be empty")
        if row.rank in seen:
            raise InvalidInput(f"rank {row.rank!r} appears twice in one ledger")
        seen.add(row.rank)
        for name in ROW_FIELDS:
            value = row.value(name)
            if value is not None:
                count(f"rank {row.rank} {name}", value)
    return list(ranks)  # type: ignore[arg-type]


def evidence_of(row: Any) -> dict[str, EvidenceValue]:
    """The evidence columns of a ledger row (ORM object or column row), every key present."""
    return {key: getattr(row, key, None) for key in EVIDENCE_KEYS}


def cap_source_log(text: str, max_bytes: int) -> tuple[str, int, bool]:
    """(stored text, original size in UTF-8 bytes, truncated?). Over the cap, the head and the
    tail are kept and a marker line in between says how many bytes were left out; the stored
    text is at most ``max_bytes`` UTF-8 bytes."""
    data = text.encode("utf-8")
    size = len(data)
    if size <= max_bytes:
        return text, size, False
    template = "\n[kvledger: {} bytes of this {}-byte log omitted here]\n"
    budget = max(0, max_bytes - len(template.format(size, size).encode("utf-8")))
    head = data[: budget // 2].decode("utf-8", "ignore")
    tail = data[size - (budget - budget // 2) :].decode("utf-8", "ignore") if budget else ""
    omitted = size - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
    return head + template.format(omitted, size) + tail, size, True


# ---------------------------------------------------------------- content hashes


def canonical_json(value: Any) -> bytes:
    """One byte string per JSON value: keys sorted, no whitespace, UTF-8, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def sha256_text(value: str | None) -> str | None:
    return hashlib.sha256(value.encode("utf-8")).hexdigest() if value is not None else None


def _iso(value: dt.datetime | dt.date | None) -> str | None:
    if isinstance(value, dt.datetime):
        return utc(value).isoformat()
    return value.isoformat() if value is not None else None


def plan_hash(row: Any, parent_slug: str | None) -> str:
    """The content hash of a saved plan row (ORM object or column row with the same names)."""
    content = {
        "kind": "saved_plan",
        "slug": row.slug,
        "parent": parent_slug,
        "title": row.title,
        "listed": bool(row.listed),
        "document": row.document,
        "summary": row.summary,
        "core_version": row.core_version,
        "created_at": _iso(row.created_at),
    }
    return hashlib.sha256(canonical_json(content)).hexdigest()


def ledger_hash(row: Any, deployment_slug: str, ranks: Sequence[Mapping[str, Any]]) -> str:
    """The content hash of a ledger row and its ranks (each a mapping of rank, ordinal and the
    row fields); the source log enters through its own hash, `row.source_log_sha256`."""
    content = {
        "kind": "ledger",
        "slug": row.slug,
        "deployment": deployment_slug,
        "created_at": _iso(row.created_at),
        "captured_at": _iso(row.captured_at),
        "note": row.note,
        "evidence": {k: v for k, v in evidence_of(row).items() if v is not None or k not in LATER_EVIDENCE_KEYS},
        "source_log_sha256": row.source_log_sha256,
        "source_log_bytes": row.source_log_bytes,
        "source_log_truncated": bool(row.source_log_truncated),
        "ranks": [{k: v for k, v in r.items() if v is not None or k not in LATER_ROW_FIELDS} for r in ranks],
    }
    return hashlib.sha256(canonical_json(content)).hexdigest()
