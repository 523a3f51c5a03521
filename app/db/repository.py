"""Repository: every read and write of deployments, ledgers and saved plans.

Functions take a Session and return plain frozen dataclasses (never ORM objects), so callers
do not depend on a live session. They flush but never commit: the caller owns the
transaction (one per request; see ``app.db.session.run_write``). Ledgers and saved plans are
append-only: there is no update function, and the database refuses UPDATE as well.

Errors are domain errors (no HTTP): ``NotFound``, ``Conflict``, ``InvalidInput``, each with a
message naming what is wrong.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload, undefer

from app.core.audit import ROW_FIELDS, EvidenceValue, LedgerRow, LedgerSnapshot
from app.db.models import BaseDocument, Deployment, Ledger, LedgerRank, SavedPlan, utcnow

DEFAULT_MAX_SOURCE_LOG_BYTES = 2 * 1024 * 1024
EXPORT_FORMAT = "kvledger.deployment"
EXPORT_VERSION = 1
MAX_BIGINT = 2**63 - 1
MAX_INT = 2**31 - 1
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
PLAN_SLUG_BYTES = 16  # 128 bits of randomness from secrets.token_urlsafe

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
}
EVIDENCE_KEYS = tuple(EVIDENCE_TYPES)


class RepositoryError(Exception):
    """Base of the storage layer's domain errors."""


class NotFound(RepositoryError):
    pass


class Conflict(RepositoryError):
    pass


class InvalidInput(RepositoryError):
    pass


@dataclass(frozen=True)
class DeploymentRecord:
    id: int
    slug: str
    name: str
    model: str
    layout: str
    hardware: str
    created_at: dt.datetime


@dataclass(frozen=True)
class LedgerIn:
    """A ledger to store: ranks in order (ordinal = position), evidence by key."""

    ranks: Sequence[LedgerRow]
    evidence: Mapping[str, EvidenceValue] = field(default_factory=dict)
    captured_at: dt.date | None = None
    note: str = ""
    source_log: str | None = None


@dataclass(frozen=True)
class LedgerSummary:
    """A ledger without its source log (what the history list shows)."""

    id: int
    deployment_slug: str
    created_at: dt.datetime
    captured_at: dt.date | None
    note: str
    evidence: dict[str, EvidenceValue]
    ranks: tuple[LedgerRow, ...]
    source_log_bytes: int | None
    source_log_truncated: bool


@dataclass(frozen=True)
class LedgerRecord(LedgerSummary):
    source_log: str | None


@dataclass(frozen=True)
class PlanSummary:
    slug: str
    parent_slug: str | None
    title: str
    core_version: str
    created_at: dt.datetime


@dataclass(frozen=True)
class PlanRecord(PlanSummary):
    document: Any
    summary: Any


# ---------------------------------------------------------------- validation helpers


def _utc(value: dt.datetime) -> dt.datetime:
    """Stored datetimes are UTC; SQLite hands them back naive."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _text(what: str, value: object, max_chars: int | None = None) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character, which cannot be stored")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInput(f"{what} is {len(value)} characters long; at most {max_chars} are allowed")
    return value


def _count(what: str, value: object, upper: int = MAX_BIGINT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{what} must be a whole number, got {value!r}")
    if not 0 <= value <= upper:
        raise InvalidInput(f"{what} = {value} is outside 0..{upper}")
    return value


def _slug(what: str, value: object) -> str:
    text = _text(what, value)
    if not SLUG_RE.match(text):
        raise InvalidInput(
            f"{what} {text!r} must be 1-100 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit"
        )
    return text


def _json_value(what: str, value: object) -> Any:
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
            clean[key] = _text(f"evidence {key}", value, limit)
        elif kind is int:
            clean[key] = _count(f"evidence {key}", value, limit)
        elif isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= limit:
            raise InvalidInput(f"evidence {key} must be a number in (0, {limit}], got {value!r}")
        else:
            clean[key] = float(value)
    return clean


def _validate_ranks(ranks: Sequence[object]) -> list[LedgerRow]:
    if not ranks:
        raise InvalidInput("a ledger needs at least one rank")
    seen: set[str] = set()
    for row in ranks:
        if not isinstance(row, LedgerRow):
            raise InvalidInput(f"ledger ranks must be LedgerRow, got {type(row).__name__}")
        _text("rank label", row.rank, 100)
        if not row.rank:
            raise InvalidInput("rank label must not be empty")
        if row.rank in seen:
            raise InvalidInput(f"rank {row.rank!r} appears twice in one ledger")
        seen.add(row.rank)
        for name in ROW_FIELDS:
            value = row.value(name)
            if value is not None:
                _count(f"rank {row.rank} {name}", value)
    return list(ranks)  # type: ignore[arg-type]


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


# ---------------------------------------------------------------- converters


def _deployment_record(row: Deployment) -> DeploymentRecord:
    return DeploymentRecord(row.id, row.slug, row.name, row.model, row.layout, row.hardware, _utc(row.created_at))


def _rank_row(row: LedgerRank | Any) -> LedgerRow:
    return LedgerRow(row.rank, *(getattr(row, name) for name in ROW_FIELDS))


def _evidence(row: Ledger | Any) -> dict[str, EvidenceValue]:
    return {key: getattr(row, key) for key in EVIDENCE_KEYS}


def _summary_fields(row: Ledger | Any, slug: str, ranks: Sequence[LedgerRank | Any]) -> dict[str, Any]:
    """Fields of a LedgerSummary from an ORM ledger or a column row with the same names."""
    return {
        "id": row.id,
        "deployment_slug": slug,
        "created_at": _utc(row.created_at),
        "captured_at": row.captured_at,
        "note": row.note,
        "evidence": _evidence(row),
        "ranks": tuple(_rank_row(r) for r in ranks),
        "source_log_bytes": row.source_log_bytes,
        "source_log_truncated": row.source_log_truncated,
    }


def to_snapshot(ledger: LedgerSummary) -> LedgerSnapshot:
    """The audit's view of a stored ledger."""
    label = f"ledger {ledger.id} ({(ledger.captured_at or ledger.created_at.date()).isoformat()})"
    return LedgerSnapshot(ledger.ranks, dict(ledger.evidence), label)


def _plan_summary(row: SavedPlan, parent_slug: str | None) -> PlanSummary:
    return PlanSummary(row.slug, parent_slug, row.title, row.core_version, _utc(row.created_at))


# ---------------------------------------------------------------- deployments


def _deployment_row(session: Session, slug: str) -> Deployment:
    row = session.scalars(select(Deployment).where(Deployment.slug == slug)).one_or_none()
    if row is None:
        raise NotFound(f"no deployment with slug {slug!r}")
    return row


def create_deployment(
    session: Session,
    slug: str,
    name: str,
    model: str,
    layout: str = "",
    hardware: str = "",
    *,
    created_at: dt.datetime | None = None,
) -> DeploymentRecord:
    row = Deployment(
        slug=_slug("deployment slug", slug),
        name=_text("deployment name", name, 200),
        model=_text("deployment model", model, 300),
        layout=_text("deployment layout", layout),
        hardware=_text("deployment hardware", hardware),
        created_at=_utc(created_at) if created_at is not None else utcnow(),
    )
    if session.scalar(select(Deployment.id).where(Deployment.slug == slug)) is not None:
        raise Conflict(f"a deployment with slug {slug!r} already exists")
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:
        raise Conflict(f"a deployment with slug {slug!r} already exists") from None
    return _deployment_record(row)


def get_deployment(session: Session, slug: str) -> DeploymentRecord:
    return _deployment_record(_deployment_row(session, slug))


def list_deployments(session: Session) -> list[DeploymentRecord]:
    rows = session.scalars(select(Deployment).order_by(Deployment.name, Deployment.slug))
    return [_deployment_record(row) for row in rows]


# ---------------------------------------------------------------- ledgers


def add_ledger(
    session: Session,
    deployment_slug: str,
    ledger: LedgerIn,
    *,
    max_source_log_bytes: int = DEFAULT_MAX_SOURCE_LOG_BYTES,
    created_at: dt.datetime | None = None,
    source_log_meta: tuple[int | None, bool] | None = None,
) -> int:
    """Store a ledger and its ranks; return its id. The source log is capped at
    ``max_source_log_bytes`` (head and tail kept). ``source_log_meta`` (original size,
    truncated) is for imports of logs that were already capped."""
    evidence = validate_evidence(ledger.evidence)
    ranks = _validate_ranks(ledger.ranks)
    note = _text("ledger note", ledger.note)
    if ledger.captured_at is not None and not isinstance(ledger.captured_at, dt.date):
        raise InvalidInput(f"captured_at must be a date, got {ledger.captured_at!r}")
    log, log_bytes, truncated = None, None, False
    if ledger.source_log is not None:
        log, log_bytes, truncated = cap_source_log(_text("source log", ledger.source_log), max_source_log_bytes)
        if source_log_meta is not None:
            log_bytes = max(log_bytes, source_log_meta[0] or 0)
            truncated = truncated or source_log_meta[1]
    deployment = _deployment_row(session, deployment_slug)
    row = Ledger(
        deployment_id=deployment.id,
        created_at=_utc(created_at) if created_at is not None else utcnow(),
        captured_at=ledger.captured_at,
        note=note,
        source_log=log,
        source_log_bytes=log_bytes,
        source_log_truncated=truncated,
        **evidence,
    )
    row.ranks = [
        LedgerRank(rank=r.rank, ordinal=i, **{name: r.value(name) for name in ROW_FIELDS}) for i, r in enumerate(ranks)
    ]
    session.add(row)
    session.flush()
    return row.id


_LEDGER_LIST_COLUMNS = [
    Ledger.id,
    Ledger.created_at,
    Ledger.captured_at,
    Ledger.note,
    Ledger.source_log_bytes,
    Ledger.source_log_truncated,
    *(getattr(Ledger, key) for key in EVIDENCE_KEYS),
]
_RANK_COLUMNS = [LedgerRank.ledger_id, LedgerRank.rank, *(getattr(LedgerRank, name) for name in ROW_FIELDS)]


def count_ledgers(session: Session, deployment_slug: str) -> int:
    deployment = _deployment_row(session, deployment_slug)
    return session.scalar(select(func.count(Ledger.id)).where(Ledger.deployment_id == deployment.id)) or 0


def list_ledgers(session: Session, deployment_slug: str, limit: int = 50, offset: int = 0) -> list[LedgerSummary]:
    """One page of a deployment's history, newest first, with ranks and evidence but without
    source logs (two indexed queries)."""
    _count("limit", limit, 1000)
    _count("offset", offset)
    deployment = _deployment_row(session, deployment_slug)
    # Plain column rows, not ORM objects: a page is built fast and leaves little garbage.
    rows = session.execute(
        select(*_LEDGER_LIST_COLUMNS)
        .where(Ledger.deployment_id == deployment.id)
        .order_by(Ledger.created_at.desc(), Ledger.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    ranks: dict[int, list[Any]] = {row.id: [] for row in rows}
    if rows:
        for rank in session.execute(
            select(*_RANK_COLUMNS)
            .where(LedgerRank.ledger_id.in_(list(ranks)))
            .order_by(LedgerRank.ledger_id, LedgerRank.ordinal)
        ):
            ranks[rank.ledger_id].append(rank)
    return [LedgerSummary(**_summary_fields(row, deployment.slug, ranks[row.id])) for row in rows]


def get_ledger(session: Session, ledger_id: int, *, with_source_log: bool = True) -> LedgerRecord:
    """One ledger with its ranks and evidence; its source log unless ``with_source_log`` is
    False (a diff does not need it; ``source_log`` is then None)."""
    options = [selectinload(Ledger.ranks), selectinload(Ledger.deployment)]
    if with_source_log:
        options.append(undefer(Ledger.source_log))
    row = session.scalars(select(Ledger).where(Ledger.id == ledger_id).options(*options)).one_or_none()
    if row is None:
        raise NotFound(f"no ledger with id {ledger_id}")
    log = row.source_log if with_source_log else None
    return LedgerRecord(**_summary_fields(row, row.deployment.slug, row.ranks), source_log=log)


# ---------------------------------------------------------------- saved plans


def new_plan_slug() -> str:
    return secrets.token_urlsafe(PLAN_SLUG_BYTES)


def _plan_row(session: Session, slug: str) -> SavedPlan:
    row = session.scalars(select(SavedPlan).where(SavedPlan.slug == slug)).one_or_none()
    if row is None:
        raise NotFound(f"no saved plan with slug {slug!r}")
    return row


def save_plan(
    session: Session,
    document: Mapping[str, Any],
    summary: Any,
    core_version: str,
    title: str = "",
    parent_slug: str | None = None,
) -> str:
    """Store a new, immutable plan version; return its unguessable slug."""
    if not isinstance(document, Mapping):
        raise InvalidInput(f"a plan document must be a JSON object, got {type(document).__name__}")
    doc = _json_value("plan document", dict(document))
    result = _json_value("plan summary", summary)
    parent_id = _plan_row(session, parent_slug).id if parent_slug is not None else None
    row = SavedPlan(
        slug=new_plan_slug(),
        parent_id=parent_id,
        title=_text("plan title", title, 300),
        document=doc,
        summary=result,
        core_version=_text("core version", core_version, 50),
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    return row.slug


def get_plan(session: Session, slug: str) -> PlanRecord:
    row = _plan_row(session, slug)
    parent = session.get(SavedPlan, row.parent_id) if row.parent_id is not None else None
    base = _plan_summary(row, parent.slug if parent is not None else None)
    return PlanRecord(**vars(base), document=row.document, summary=row.summary)


def list_recent_plans(session: Session, limit: int = 20) -> list[PlanSummary]:
    _count("limit", limit, 1000)
    parent = SavedPlan.__table__.alias("parent")
    rows = session.execute(
        select(SavedPlan, parent.c.slug)
        .outerjoin(parent, parent.c.id == SavedPlan.parent_id)
        .order_by(SavedPlan.created_at.desc(), SavedPlan.id.desc())
        .limit(limit)
    ).all()
    return [_plan_summary(plan, parent_slug) for plan, parent_slug in rows]


def plan_versions(session: Session, slug: str) -> list[PlanSummary]:
    """The ancestry of a plan: the first version first, ``slug`` last."""
    chain: list[SavedPlan] = [_plan_row(session, slug)]
    while chain[-1].parent_id is not None:
        parent = session.get(SavedPlan, chain[-1].parent_id)
        if parent is None:  # pragma: no cover - the foreign key forbids it
            break
        chain.append(parent)
    chain.reverse()
    return [_plan_summary(row, chain[i - 1].slug if i > 0 else None) for i, row in enumerate(chain)]


def put_base_document(session: Session, base_id: str, document: Mapping[str, Any]) -> None:
    """Store a content-addressed base document (a no-op when that id is already stored)."""
    if session.get(BaseDocument, base_id) is None:
        document_json = _json_value("document", dict(document))
        session.add(BaseDocument(id=_text("base document id", base_id, 32), document=document_json))


def get_base_document(session: Session, base_id: str) -> dict[str, Any] | None:
    """A stored base document, or None."""
    row = session.get(BaseDocument, base_id)
    return dict(row.document) if row is not None and isinstance(row.document, dict) else None
