"""Unsaved base documents (what-if URLs `/plan?base=<id>`) in the database, capped and expiring
(issue 12 item 3: ten anonymous imports had grown the table by 24 MB, without bound).

- **Expiry.** A document not written for `ttl_s` is gone (a re-import or a saved plan's page
  that refers to it writes it again and renews it). Saved plans hold their own document, so
  nothing saved depends on a base document.
- **Per-client cap.** One client address holds at most `client_bytes` of documents (JSON
  size); past it the client's *own* least recently written documents make room. One document
  larger than the whole allowance is refused (`BaseTooLarge`).
- **Overall cap.** At most `max_bytes` in all; past it the least recently written documents
  of anyone go (each client is already bounded by the cap above).

Decisions run under one lock (PostgreSQL advisory lock; SQLite's `BEGIN IMMEDIATE` write
session), so concurrent writers cannot overshoot the caps. Functions run in the caller's
transaction and commit nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select, text, true
from sqlalchemy.orm import Session

from app.db.models import BaseDocument

#: pg_advisory_xact_lock key of base-document writes ("kvlbase").
LOCK_KEY = 0x6B766C62617365
MIB = 1024 * 1024


@dataclass(frozen=True)
class BaseLimits:
    """The caps above (ranges in app.settings)."""

    ttl_s: float = 30 * 86400.0
    client_bytes: int = 8 * MIB
    max_bytes: int = 512 * MIB


class BaseTooLarge(Exception):
    """One document over the per-client allowance."""


def _last_written() -> ColumnElement[Any]:
    return func.coalesce(BaseDocument.used_at, BaseDocument.created_at)


def _lock(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})


def purge(session: Session, limits: BaseLimits, now: dt.datetime) -> None:
    session.execute(delete(BaseDocument).where(_last_written() < now - dt.timedelta(seconds=limits.ttl_s)))


def _evict(session: Session, where: ColumnElement[bool], allowed: int) -> None:
    """Delete the least recently written documents matching `where` until their total ≤ `allowed`."""
    total = int(session.scalar(select(func.coalesce(func.sum(BaseDocument.size_bytes), 0)).where(where)) or 0)
    if total <= allowed:
        return
    doomed: list[str] = []
    for base_id, size in session.execute(select(BaseDocument.id, BaseDocument.size_bytes).where(where)
                                         .order_by(_last_written(), BaseDocument.id)):
        if total <= allowed:
            break
        doomed.append(base_id)
        total -= int(size)
    for start in range(0, len(doomed), 500):
        session.execute(delete(BaseDocument).where(BaseDocument.id.in_(doomed[start:start + 500])))


def put(session: Session, limits: BaseLimits, *, base_id: str, document: Mapping[str, Any], size: int, owner: str,
        now: dt.datetime) -> None:
    """Store (or renew) a document under the caps; BaseTooLarge when it alone exceeds a client's allowance."""
    _lock(session)
    purge(session, limits, now)
    row = session.get(BaseDocument, base_id)
    if row is not None:
        row.used_at = now
        return
    if size > limits.client_bytes:
        raise BaseTooLarge(f"this document is {size / MIB:.1f} MiB as JSON; this server keeps at most "
                           f"{limits.client_bytes / MIB:.1f} MiB of unsaved documents per client")
    _evict(session, BaseDocument.owner == owner, limits.client_bytes - size)
    _evict(session, true(), limits.max_bytes - size)
    session.add(BaseDocument(id=base_id, document=dict(document), owner=owner, size_bytes=size, used_at=now,
                             created_at=now))


def put_many(session: Session, limits: BaseLimits, items: Sequence[tuple[str, Mapping[str, Any], int]], *,
             owner: str, now: dt.datetime) -> None:
    """`put` for several (id, document, size) at once, in the caller's one transaction (a log
    import's plans): one purge, one eviction pass for the room they all need, one insert. The
    caller keeps their sizes together within one client's allowance."""
    _lock(session)
    purge(session, limits, now)
    unique = {base_id: (document, size) for base_id, document, size in items}
    present: set[str] = set()
    for start in range(0, len(unique), 500):
        chunk = list(unique)[start:start + 500]
        for row in session.scalars(select(BaseDocument).where(BaseDocument.id.in_(chunk))):
            row.used_at = now
            present.add(row.id)
    new = {k: v for k, v in unique.items() if k not in present}
    need = sum(size for _, size in new.values())
    if need > limits.client_bytes:
        raise BaseTooLarge(f"these documents are {need / MIB:.1f} MiB as JSON; this server keeps at most "
                           f"{limits.client_bytes / MIB:.1f} MiB of unsaved documents per client")
    _evict(session, BaseDocument.owner == owner, limits.client_bytes - need)
    _evict(session, true(), limits.max_bytes - need)
    session.add_all([BaseDocument(id=base_id, document=dict(document), owner=owner, size_bytes=size, used_at=now,
                                  created_at=now) for base_id, (document, size) in new.items()])


def get(session: Session, limits: BaseLimits, base_id: str, now: dt.datetime) -> dict[str, Any] | None:
    """A stored document that has not expired, or None."""
    row = session.get(BaseDocument, base_id)
    if row is None or not isinstance(row.document, dict):
        return None
    written = row.used_at or row.created_at
    written = written.replace(tzinfo=dt.UTC) if written.tzinfo is None else written
    return None if written < now - dt.timedelta(seconds=limits.ttl_s) else dict(row.document)


def stored_bytes(session: Session, owner: str | None = None) -> int:
    where = true() if owner is None else BaseDocument.owner == owner
    return int(session.scalar(select(func.coalesce(func.sum(BaseDocument.size_bytes), 0)).where(where)) or 0)
