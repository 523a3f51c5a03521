"""Simulation jobs in the database: the one queue every server worker shares (issue 16 §2), and
the caps, expiry, fairness and rate limit of issue 12 item 3.

Each function runs inside the caller's transaction (`run_write` with a write session) and
commits nothing itself. The rules, all enforced here so they hold across processes:

- **Serialised decisions.** `submit` and `claim` first take a transaction-scoped lock:
  PostgreSQL `pg_advisory_xact_lock(LOCK_KEY)`; SQLite's write sessions already hold the
  database write lock from `BEGIN IMMEDIATE`. Counting and inserting (or claiming) is then
  one atomic step: two workers cannot both take the last slot.
- **Claim.** The oldest queued row is picked with `SELECT … FOR UPDATE SKIP LOCKED` (PostgreSQL;
  SQLAlchemy renders nothing on SQLite) and taken with a conditional
  `UPDATE … WHERE id = :id AND state = 'queued'`: a row that a cancel changed first is not
  claimed. At most `workers` jobs run at once over all server workers.
- **Cancel through the row.** `cancel` sets `cancel_requested` (and cancels a queued job at
  once); the worker running it reads the flag back with every heartbeat (`beat`).
- **Stale claims.** A running job whose worker has not written a heartbeat for `stale_s`
  (its process died) is failed with a message, so it never holds a slot forever.
- **Caps and fairness.** Queued + running jobs: at most `max_active` over everyone and
  `client_active` per client. Stored jobs per client: at most `client_jobs`; the client's
  *own* oldest finished jobs make room. Stored jobs overall: at most `max_jobs`; when full,
  new jobs are refused (with the seconds until the oldest expires) rather than dropping
  anyone's result before its expiry. A finished job is readable for `ttl_s`.
- **Rate limit.** A token bucket per client in `rate_bucket`: `burst` submissions at once,
  refilled at `rate_per_min`; an empty bucket refuses with the seconds until the next token.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.orm import Session, defer

from app.db.models import RateBucket, SimJob

#: pg_advisory_xact_lock key of job decisions ("kvljobs"); the migrations use another.
LOCK_KEY = 0x6B766C6A6F6273
ACTIVE = ("queued", "running")
STALE_MESSAGE = ("The server process running this simulation stopped before it finished (it was restarted or "
                 "killed). Start it again.")


@dataclass(frozen=True)
class JobLimits:
    """The caps above (ranges in app.settings)."""

    workers: int = 1
    max_active: int = 4
    client_active: int = 2
    client_jobs: int = 20
    max_jobs: int = 1000
    ttl_s: float = 3600.0
    rate_per_min: float = 30.0
    burst: int = 10
    stale_s: float = 60.0


class JobRefused(Exception):
    """A submission the caps or the rate limit refuse; `retry_after_s` for the Retry-After header."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = max(1, int(retry_after_s))


@dataclass(frozen=True)
class JobRow:
    id: str
    owner: str
    kind: str
    state: str
    progress: float
    meta: Mapping[str, Any]
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    cancel_requested: bool
    claimed_by: str | None
    document: dict[str, Any] | None = None


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """Stored datetimes are UTC; SQLite hands them back naive."""
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _row(job: SimJob, with_document: bool = False) -> JobRow:
    return JobRow(job.id, job.owner, job.kind, job.state, float(job.progress), dict(job.meta or {}),
                  job.result, job.error, bool(job.cancel_requested), job.claimed_by,
                  job.document if with_document else None)


def _lock(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})


def _count(session: Session, *where: Any) -> int:
    return int(session.scalar(select(func.count()).select_from(SimJob).where(*where)) or 0)


def _fail_stale(session: Session, limits: JobLimits, now: dt.datetime) -> None:
    stale = (SimJob.state == "running") & (SimJob.heartbeat_at < now - dt.timedelta(seconds=limits.stale_s))
    session.execute(delete(SimJob).where(stale & (SimJob.kind == "sync")))
    session.execute(update(SimJob).where(stale).values(
        state="failed", error={"field": "", "message": STALE_MESSAGE}, document=None, finished_at=now,
        expires_at=now + dt.timedelta(seconds=limits.ttl_s)))


def purge(session: Session, limits: JobLimits, now: dt.datetime) -> None:
    """Drop expired jobs and idle rate buckets; fail stale claims."""
    session.execute(delete(SimJob).where(SimJob.expires_at < now))
    full_after = dt.timedelta(seconds=60.0 * limits.burst / limits.rate_per_min)
    session.execute(delete(RateBucket).where(RateBucket.updated_at < now - full_after))
    _fail_stale(session, limits, now)


def _bucket(session: Session, limits: JobLimits, owner: str, now: dt.datetime) -> RateBucket:
    bucket = session.get(RateBucket, f"sim:{owner}")
    if bucket is None:
        bucket = RateBucket(key=f"sim:{owner}", tokens=float(limits.burst), updated_at=now)
        session.add(bucket)
        return bucket
    elapsed = max(0.0, (now - (_utc(bucket.updated_at) or now)).total_seconds())
    bucket.tokens = min(float(limits.burst), bucket.tokens + elapsed * limits.rate_per_min / 60.0)
    bucket.updated_at = now
    if bucket.tokens < 1.0:
        wait = math.ceil((1.0 - bucket.tokens) * 60.0 / limits.rate_per_min)
        raise JobRefused(f"Too many simulations started from your address: at most {limits.burst} at once and "
                         f"{limits.rate_per_min:g} a minute. Try again in {wait} s.", wait)
    return bucket


def _check_active(session: Session, limits: JobLimits, owner: str) -> None:
    if _count(session, SimJob.state.in_(ACTIVE)) >= limits.max_active:
        raise JobRefused(f"{limits.max_active} simulations are already queued or running on this server, the most "
                         "it accepts at once. Wait for one to finish (or cancel one), then try again.", 5)
    if _count(session, SimJob.state.in_(ACTIVE), SimJob.owner == owner) >= limits.client_active:
        raise JobRefused(f"You already have {limits.client_active} simulations queued or running, the most one "
                         "address may have at once. Wait for one to finish (or cancel one), then try again.", 5)


def _make_room(session: Session, limits: JobLimits, owner: str, now: dt.datetime) -> None:
    """The client's own oldest finished jobs go first; past the overall cap, refuse."""
    mine = _count(session, SimJob.owner == owner)
    if mine >= limits.client_jobs:
        oldest = select(SimJob.id).where(SimJob.owner == owner, SimJob.state.not_in(ACTIVE)) \
            .order_by(SimJob.finished_at, SimJob.id).limit(mine - limits.client_jobs + 1)
        session.execute(delete(SimJob).where(SimJob.id.in_(list(session.scalars(oldest)))))
    if _count(session) >= limits.max_jobs:
        first = _utc(session.scalar(select(func.min(SimJob.expires_at))))
        wait = math.ceil((first - now).total_seconds()) if first is not None else 60
        raise JobRefused(f"This server keeps at most {limits.max_jobs:,} simulations and holds that many; none "
                         f"is dropped before its expiry. Try again in {wait} s.", wait)


def submit(session: Session, limits: JobLimits, *, job_id: str, owner: str, document: Mapping[str, Any],
           meta: Mapping[str, Any], now: dt.datetime, kind: str = "job", claimed_by: str | None = None) -> JobRow:
    """Insert a job (queued; `kind="sync"`: running now on `claimed_by`) or raise JobRefused."""
    _lock(session)
    purge(session, limits, now)
    bucket = _bucket(session, limits, owner, now)
    _check_active(session, limits, owner)
    _make_room(session, limits, owner, now)
    bucket.tokens -= 1.0
    job = SimJob(id=job_id, owner=owner, kind=kind, state="running" if kind == "sync" else "queued", progress=0.0,
                 document=None if kind == "sync" else dict(document), meta=dict(meta), result=None, error=None,
                 cancel_requested=False, claimed_by=claimed_by, created_at=now,
                 heartbeat_at=now if kind == "sync" else None)
    session.add(job)
    session.flush()
    return _row(job)


def claim(session: Session, limits: JobLimits, worker: str, now: dt.datetime) -> JobRow | None:
    """Take the oldest queued job for `worker` (with its document), or None (none queued, or the
    `workers` running slots are all taken)."""
    _lock(session)
    _fail_stale(session, limits, now)
    if _count(session, SimJob.state == "running", SimJob.kind == "job") >= limits.workers:
        return None
    pick = select(SimJob.id).where(SimJob.state == "queued").order_by(SimJob.created_at, SimJob.id).limit(1) \
        .with_for_update(skip_locked=True)
    job_id = session.scalar(pick)
    if job_id is None:
        return None
    taken = session.execute(update(SimJob).where(SimJob.id == job_id, SimJob.state == "queued").values(
        state="running", claimed_by=worker, heartbeat_at=now))
    if taken.rowcount != 1:  # type: ignore[attr-defined]
        return None
    job = session.get(SimJob, job_id, populate_existing=True)
    return None if job is None else _row(job, with_document=True)


def beat(session: Session, job_id: str, progress: float, now: dt.datetime) -> bool:
    """Record a running job's progress and heartbeat; True when it should stop (cancel asked,
    or the row is no longer this running job's)."""
    flags = session.execute(update(SimJob).where(SimJob.id == job_id, SimJob.state == "running").values(
        progress=progress, heartbeat_at=now).returning(SimJob.cancel_requested)).scalars().all()
    return not flags or bool(flags[0])


def finish(session: Session, limits: JobLimits, job_id: str, state: str, now: dt.datetime,
           result: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> None:
    """A running job's outcome; it is readable until `ttl_s` from now (a sync row is deleted)."""
    session.execute(delete(SimJob).where(SimJob.id == job_id, SimJob.kind == "sync"))
    values: dict[str, Any] = {"state": state, "result": result, "error": error, "document": None,
                              "finished_at": now, "expires_at": now + dt.timedelta(seconds=limits.ttl_s)}
    if state == "done":
        values["progress"] = 1.0
    session.execute(update(SimJob).where(SimJob.id == job_id, SimJob.state == "running").values(**values))


def get(session: Session, job_id: str, now: dt.datetime) -> JobRow | None:
    """A job that has not expired (sync rows are never shown), without its document."""
    job = session.scalar(select(SimJob).options(defer(SimJob.document)).where(SimJob.id == job_id))
    if job is None or job.kind != "job":
        return None
    expires = _utc(job.expires_at)
    return None if expires is not None and expires < now else _row(job)


def cancel(session: Session, limits: JobLimits, job_id: str, now: dt.datetime) -> JobRow | None:
    """Ask a job to stop through its row (a queued one is cancelled at once); None when unknown."""
    row = get(session, job_id, now)
    if row is None:
        return None
    # Queued first, then running: a worker that claims the job between the two statements turns it
    # running before the second one, which then asks it to stop. In the other order a claim between
    # them lost the cancel (the job was neither queued nor, yet, running) and the job ran to the end.
    session.execute(update(SimJob).where(SimJob.id == job_id, SimJob.state == "queued").values(
        state="cancelled", cancel_requested=True, document=None, finished_at=now,
        expires_at=now + dt.timedelta(seconds=limits.ttl_s)))
    session.execute(update(SimJob).where(SimJob.id == job_id, SimJob.state == "running").values(
        cancel_requested=True))
    return get(session, job_id, now)


def has_queued(session: Session) -> bool:
    return session.scalar(select(SimJob.id).where(SimJob.state == "queued").limit(1)) is not None


def abandon(session: Session, worker: str, limits: JobLimits, now: dt.datetime) -> None:
    """At shutdown: this worker's running jobs that did not stop in time are cancelled, its sync rows dropped."""
    session.execute(delete(SimJob).where(SimJob.claimed_by == worker, SimJob.kind == "sync"))
    session.execute(update(SimJob).where(SimJob.claimed_by == worker, SimJob.state == "running").values(
        state="cancelled", cancel_requested=True, document=None, finished_at=now,
        expires_at=now + dt.timedelta(seconds=limits.ttl_s),
        error={"field": "", "message": "The server stopped while this simulation ran. Start it again."}))
