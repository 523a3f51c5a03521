"""Export a deployment to one JSON-able dict, and import it back losslessly.

The format (``kvledger.deployment`` version 1) holds the deployment, then every ledger oldest
first with its evidence, source log (as stored, with its original size and whether it was
truncated) and ranks. Ids are left out: they belong to one database. Round trip:
export → import into a fresh database → export gives an equal dict.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload, undefer

from app.core.audit import ROW_FIELDS, LedgerRow
from app.db import records as rec
from app.db.models import Ledger
from app.db.records import InvalidInput
from app.db.repository import (
    DEFAULT_MAX_SOURCE_LOG_BYTES,
    EXPORT_FORMAT,
    EXPORT_VERSION,
    DeploymentRecord,
    LedgerIn,
    add_ledger,
    create_deployment,
    deployment_row,
)


def export_deployment(session: Session, slug: str) -> dict[str, Any]:
    """A deployment and all its ledgers (ranks, evidence, source logs) as one JSON-able dict,
    oldest ledger first. Ids are left out: they belong to one database."""
    deployment = deployment_row(session, slug)
    rows = session.scalars(
        select(Ledger)
        .where(Ledger.deployment_id == deployment.id)
        .order_by(Ledger.created_at, Ledger.id)
        .options(undefer(Ledger.source_log), selectinload(Ledger.ranks))
    ).all()
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "deployment": {
            "slug": deployment.slug,
            "name": deployment.name,
            "model": deployment.model,
            "layout": deployment.layout,
            "hardware": deployment.hardware,
            "created_at": rec.utc(deployment.created_at).isoformat(),
        },
        "ledgers": [
            {
                "created_at": rec.utc(row.created_at).isoformat(),
                "captured_at": row.captured_at.isoformat() if row.captured_at is not None else None,
                "note": row.note,
                "evidence": rec.evidence_of(row),
                "source_log": {
                    "text": row.source_log,
                    "original_bytes": row.source_log_bytes,
                    "truncated": row.source_log_truncated,
                },
                "ranks": [{"rank": r.rank, **{name: getattr(r, name) for name in ROW_FIELDS}} for r in row.ranks],
            }
            for row in rows
        ],
    }


def _field(data: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise InvalidInput(f"{where} must be a JSON object")
    if key not in data:
        raise InvalidInput(f"{where} is missing {key!r}")
    return data[key]


def _datetime(value: object, where: str) -> dt.datetime:
    try:
        return rec.utc(dt.datetime.fromisoformat(rec.text(where, value)))
    except ValueError:
        raise InvalidInput(f"{where} {value!r} is not an ISO date-time") from None


def _import_ledger(data: Mapping[str, Any], where: str) -> tuple[LedgerIn, dt.datetime, tuple[int | None, bool]]:
    ranks_data = _field(data, "ranks", where)
    if not isinstance(ranks_data, list):
        raise InvalidInput(f"{where}.ranks must be a list")
    ranks = []
    for i, rank in enumerate(ranks_data):
        label = _field(rank, "rank", f"{where}.ranks[{i}]")
        unknown = set(rank) - {"rank", *ROW_FIELDS}
        if unknown:
            raise InvalidInput(f"{where}.ranks[{i}] has unknown rows: {', '.join(sorted(unknown))}")
        ranks.append(LedgerRow(label, *(rank.get(name) for name in ROW_FIELDS)))
    captured = _field(data, "captured_at", where)
    try:
        captured_at = dt.date.fromisoformat(captured) if captured is not None else None
    except (TypeError, ValueError):
        raise InvalidInput(f"{where}.captured_at {captured!r} is not an ISO date") from None
    log = _field(data, "source_log", where)
    text = _field(log, "text", f"{where}.source_log")
    original = _field(log, "original_bytes", f"{where}.source_log")
    truncated = _field(log, "truncated", f"{where}.source_log")
    if original is not None:
        rec.count(f"{where}.source_log.original_bytes", original)
    if not isinstance(truncated, bool):
        raise InvalidInput(f"{where}.source_log.truncated must be true or false")
    ledger = LedgerIn(
        ranks=ranks,
        evidence=_field(data, "evidence", where),
        captured_at=captured_at,
        note=_field(data, "note", where),
        source_log=text,
    )
    return ledger, _datetime(_field(data, "created_at", where), f"{where}.created_at"), (original, truncated)


def import_deployment(
    session: Session,
    data: Mapping[str, Any],
    *,
    slug: str | None = None,
    max_source_log_bytes: int = DEFAULT_MAX_SOURCE_LOG_BYTES,
) -> DeploymentRecord:
    """Recreate a deployment from ``export_deployment`` output (under ``slug`` if given)."""
    if _field(data, "format", "the import") != EXPORT_FORMAT:
        raise InvalidInput(f"the import is not a {EXPORT_FORMAT} file")
    if _field(data, "version", "the import") != EXPORT_VERSION:
        raise InvalidInput(f"unsupported {EXPORT_FORMAT} version {data['version']!r}; expected {EXPORT_VERSION}")
    dep = _field(data, "deployment", "the import")
    ledgers = _field(data, "ledgers", "the import")
    if not isinstance(ledgers, list):
        raise InvalidInput("the import's ledgers must be a list")
    parsed = [_import_ledger(item, f"ledgers[{i}]") for i, item in enumerate(ledgers)]
    record = create_deployment(
        session,
        slug if slug is not None else _field(dep, "slug", "deployment"),
        _field(dep, "name", "deployment"),
        _field(dep, "model", "deployment"),
        _field(dep, "layout", "deployment"),
        _field(dep, "hardware", "deployment"),
        created_at=_datetime(_field(dep, "created_at", "deployment"), "deployment.created_at"),
    )
    for ledger, created_at, meta in parsed:
        add_ledger(
            session,
            record.slug,
            ledger,
            max_source_log_bytes=max_source_log_bytes,
            created_at=created_at,
            source_log_meta=meta,
        )
    return record
