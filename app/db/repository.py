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
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload, undefer

from app.core.audit import ROW_FIELDS, EvidenceValue, LedgerRow, LedgerSnapshot
from app.db import records as rec
from app.db.models import BaseDocument, Deployment, Ledger, LedgerRank, SavedPlan, utcnow
from app.db.records import CHANGED_OUTSIDE as CHANGED_OUTSIDE
from app.db.records import EVIDENCE_KEYS as EVIDENCE_KEYS
from app.db.records import MAX_BIGINT as MAX_BIGINT
from app.db.records import SLUG_RE as SLUG_RE
from app.db.records import Conflict as Conflict
from app.db.records import InvalidInput as InvalidInput
from app.db.records import NotFound as NotFound
from app.db.records import RepositoryError as RepositoryError
from app.db.records import cap_source_log as cap_source_log
from app.db.records import validate_evidence as validate_evidence

DEFAULT_MAX_SOURCE_LOG_BYTES = 2 * 1024 * 1024
EXPORT_FORMAT = "kvledger.deployment"
EXPORT_VERSION = 1
PLAN_SLUG_BYTES = 16  # 128 bits of randomness from secrets.token_urlsafe
LEDGER_SLUG_BYTES = 16


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
    """A ledger without its source log (what the history list shows). `intact` is False when its
    content hash does not match (changed outside KV Ledger; see `app.db.records`)."""

    id: int
    deployment_slug: str
    created_at: dt.datetime
    captured_at: dt.date | None
    note: str
    evidence: dict[str, EvidenceValue]
    ranks: tuple[LedgerRow, ...]
    source_log_bytes: int | None
    source_log_truncated: bool
    slug: str | None = field(default=None, kw_only=True)
    intact: bool = field(default=False, kw_only=True)


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
    listed: bool = field(default=False, kw_only=True)
    intact: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class PlanRecord(PlanSummary):
    document: Any
    summary: Any


# ---------------------------------------------------------------- validation helpers


# ---------------------------------------------------------------- converters


def _deployment_record(row: Deployment) -> DeploymentRecord:
    return DeploymentRecord(row.id, row.slug, row.name, row.model, row.layout, row.hardware, rec.utc(row.created_at))


def _rank_row(row: LedgerRank | Any) -> LedgerRow:
    return LedgerRow(row.rank, *(getattr(row, name) for name in ROW_FIELDS))


def _rank_content(row: LedgerRank | Any) -> dict[str, Any]:
    """What a rank row contributes to its ledger's content hash."""
    return {"rank": row.rank, "ordinal": row.ordinal, **{name: getattr(row, name) for name in ROW_FIELDS}}


def _ledger_intact(row: Ledger | Any, slug: str, ranks: Sequence[LedgerRank | Any]) -> bool:
    try:
        expected = rec.ledger_hash(row, slug, [_rank_content(r) for r in ranks])
    except (TypeError, ValueError):  # a value no KV Ledger write produces (NaN, a non-JSON type)
        return False
    return row.content_hash is not None and expected == row.content_hash


def _summary_fields(row: Ledger | Any, slug: str, ranks: Sequence[LedgerRank | Any]) -> dict[str, Any]:
    """Fields of a LedgerSummary from an ORM ledger or a column row with the same names."""
    return {
        "id": row.id,
        "slug": row.slug,
        "deployment_slug": slug,
        "created_at": rec.utc(row.created_at),
        "captured_at": row.captured_at,
        "note": row.note,
        "evidence": rec.evidence_of(row),
        "ranks": tuple(_rank_row(r) for r in ranks),
        "source_log_bytes": row.source_log_bytes,
        "source_log_truncated": row.source_log_truncated,
        "intact": _ledger_intact(row, slug, ranks),
    }


def to_snapshot(ledger: LedgerSummary) -> LedgerSnapshot:
    """The audit's view of a stored ledger."""
    label = f"ledger {ledger.id} ({(ledger.captured_at or ledger.created_at.date()).isoformat()})"
    return LedgerSnapshot(ledger.ranks, dict(ledger.evidence), label)


def _plan_intact(row: SavedPlan, parent_slug: str | None) -> bool:
    try:
        return row.content_hash is not None and rec.plan_hash(row, parent_slug) == row.content_hash
    except (TypeError, ValueError):  # a value no KV Ledger write produces (NaN, a non-JSON type)
        return False


def _plan_summary(row: SavedPlan, parent_slug: str | None) -> PlanSummary:
    return PlanSummary(row.slug, parent_slug, row.title, row.core_version, rec.utc(row.created_at),
                       listed=bool(row.listed), intact=_plan_intact(row, parent_slug))


# ---------------------------------------------------------------- deployments


def deployment_row(session: Session, slug: str) -> Deployment:
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
        slug=rec.slug("deployment slug", slug),
        name=rec.text("deployment name", name, 200),
        model=rec.text("deployment model", model, 300),
        layout=rec.text("deployment layout", layout),
        hardware=rec.text("deployment hardware", hardware),
        created_at=rec.utc(created_at) if created_at is not None else utcnow(),
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
    return _deployment_record(deployment_row(session, slug))


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
    ranks = rec.validate_ranks(ledger.ranks)
    note = rec.text("ledger note", ledger.note)
    if ledger.captured_at is not None and not isinstance(ledger.captured_at, dt.date):
        raise InvalidInput(f"captured_at must be a date, got {ledger.captured_at!r}")
    log, log_bytes, truncated = None, None, False
    if ledger.source_log is not None:
        log, log_bytes, truncated = cap_source_log(rec.text("source log", ledger.source_log), max_source_log_bytes)
        if source_log_meta is not None:
            log_bytes = max(log_bytes, source_log_meta[0] or 0)
            truncated = truncated or source_log_meta[1]
    deployment = deployment_row(session, deployment_slug)
    row = Ledger(
        deployment_id=deployment.id,
        created_at=rec.utc(created_at) if created_at is not None else utcnow(),
        captured_at=ledger.captured_at,
        note=note,
        source_log=log,
        source_log_bytes=log_bytes,
        source_log_truncated=truncated,
        source_log_sha256=rec.sha256_text(log),
        slug=new_ledger_slug(),
        **evidence,
    )
    row.ranks = [
        LedgerRank(rank=r.rank, ordinal=i, **{name: r.value(name) for name in ROW_FIELDS}) for i, r in enumerate(ranks)
    ]
    row.content_hash = rec.ledger_hash(row, deployment.slug, [_rank_content(r) for r in row.ranks])
    session.add(row)
    session.flush()
    return row.id


_LEDGER_LIST_COLUMNS = [
    Ledger.id,
    Ledger.slug,
    Ledger.content_hash,
    Ledger.source_log_sha256,
    Ledger.created_at,
    Ledger.captured_at,
    Ledger.note,
    Ledger.source_log_bytes,
    Ledger.source_log_truncated,
    *(getattr(Ledger, key) for key in EVIDENCE_KEYS),
]
_RANK_COLUMNS = [LedgerRank.ledger_id, LedgerRank.rank, LedgerRank.ordinal,
                 *(getattr(LedgerRank, name) for name in ROW_FIELDS)]


def count_ledgers(session: Session, deployment_slug: str) -> int:
    deployment = deployment_row(session, deployment_slug)
    return session.scalar(select(func.count(Ledger.id)).where(Ledger.deployment_id == deployment.id)) or 0


def list_ledgers(session: Session, deployment_slug: str, limit: int = 50, offset: int = 0) -> list[LedgerSummary]:
    """One page of a deployment's history, newest first, with ranks and evidence but without
    source logs (two indexed queries)."""
    rec.count("limit", limit, 1000)
    rec.count("offset", offset)
    deployment = deployment_row(session, deployment_slug)
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
    fields = _summary_fields(row, row.deployment.slug, row.ranks)
    if with_source_log and rec.sha256_text(log) != row.source_log_sha256:
        fields["intact"] = False
    return LedgerRecord(**fields, source_log=log)


def new_ledger_slug() -> str:
    """128 random bits, never all digits (an all-digit path is a retired numeric ledger address)."""
    while True:
        slug = secrets.token_urlsafe(LEDGER_SLUG_BYTES)
        if not slug.isdigit():
            return slug


def ledger_id_for_slug(session: Session, slug: str) -> int:
    """The id of the ledger addressed by `slug` (NotFound when none is)."""
    found: int | None = session.scalar(select(Ledger.id).where(Ledger.slug == slug))
    if found is None:
        raise NotFound(f"no ledger with address {slug[:40]!r}")
    return found


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
    *,
    listed: bool = False,
) -> str:
    """Store a new, immutable plan version (in the /p list only if `listed`); return its
    unguessable slug."""
    if not isinstance(document, Mapping):
        raise InvalidInput(f"a plan document must be a JSON object, got {type(document).__name__}")
    doc = rec.json_value("plan document", dict(document))
    result = rec.json_value("plan summary", summary)
    parent_id = _plan_row(session, parent_slug).id if parent_slug is not None else None
    row = SavedPlan(
        slug=new_plan_slug(),
        parent_id=parent_id,
        title=rec.text("plan title", title, 300),
        document=doc,
        summary=result,
        core_version=rec.text("core version", core_version, 50),
        created_at=utcnow(),
        listed=bool(listed),
    )
    row.content_hash = rec.plan_hash(row, parent_slug)
    session.add(row)
    session.flush()
    return row.slug


def get_plan(session: Session, slug: str) -> PlanRecord:
    row = _plan_row(session, slug)
    parent = session.get(SavedPlan, row.parent_id) if row.parent_id is not None else None
    base = _plan_summary(row, parent.slug if parent is not None else None)
    return PlanRecord(**vars(base), document=row.document, summary=row.summary)


def list_listed_plans(session: Session, limit: int = 20) -> list[PlanSummary]:
    """The newest plans their savers chose to list, newest first."""
    rec.count("limit", limit, 1000)
    parent = SavedPlan.__table__.alias("parent")
    rows = session.execute(
        select(SavedPlan, parent.c.slug)
        .outerjoin(parent, parent.c.id == SavedPlan.parent_id)
        .where(SavedPlan.listed.is_(True))
        .order_by(SavedPlan.created_at.desc(), SavedPlan.id.desc())
        .limit(limit)
    ).all()
    return [_plan_summary(plan, parent_slug) for plan, parent_slug in rows]


def plan_children(session: Session, slug: str, limit: int = 20) -> list[PlanSummary]:
    """Newer versions made from this plan (its direct children), newest first (one indexed
    query on ``saved_plan.parent_id``)."""
    rec.count("limit", limit, 1000)
    parent = select(SavedPlan.id).where(SavedPlan.slug == slug).scalar_subquery()
    rows = session.scalars(
        select(SavedPlan).where(SavedPlan.parent_id == parent)
        .order_by(SavedPlan.created_at.desc(), SavedPlan.id.desc()).limit(limit)
    ).all()
    return [_plan_summary(row, slug) for row in rows]


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
        document_json = rec.json_value("document", dict(document))
        session.add(BaseDocument(id=rec.text("base document id", base_id, 32), document=document_json))


def get_base_document(session: Session, base_id: str) -> dict[str, Any] | None:
    """A stored base document, or None."""
    row = session.get(BaseDocument, base_id)
    return dict(row.document) if row is not None and isinstance(row.document, dict) else None
