"""Simulation jobs for ramps too long to answer in one request, kept in the database so that
every server worker (`kvledger serve --workers N`) sees the same jobs and the same caps.

Theory of operation. `JobRunner.submit(doc, owner)` validates the document on the caller's
thread (bad input is a 422 before anything is queued) and inserts a queued row under an
unguessable id (`secrets.token_urlsafe`); `app.db.jobs.submit` applies the caps, the per-client
fairness and the rate limit in the same transaction (`JobLimitError`, a 429 with Retry-After).
Each process runs at most `limits.workers` daemon threads, which claim queued rows
(`app.db.jobs.claim`: at most `limits.workers` running over all processes); a thread starts
when work arrives (a submit, or a poll that sees a queued job) and exits when nothing is
queued, so an idle runner holds no thread. A running job writes its progress and a heartbeat
at most every `beat_s` seconds from the simulator's callbacks and reads back the row's cancel
flag then; `cancel(id)` sets that flag on the row, from any worker. The only in-process state
is the cancel events of this process's own running jobs (a pure cache of the row's flag).

The runner knows nothing about HTTP: the web layer maps `InputError` to 422,
`JobLimitError` to 429 and an unknown (or expired) id to 404.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.core.errors import InputError
from app.core.sim.io import SimCancelled, parse, simulate_from_json
from app.db import jobs
from app.db.jobs import JobLimits, JobRefused, JobRow
from app.db.models import utcnow
from app.db.session import Database, run_write
from app.services.simulation import resolve_pool
from app.settings import Settings

log = logging.getLogger(__name__)

JSON = dict[str, Any]
State = Literal["queued", "running", "done", "failed", "cancelled"]
FINISHED: frozenset[str] = frozenset({"done", "failed", "cancelled"})
RunFn = Callable[[JSON, Callable[[float], None], Callable[[], bool]], JSON]

WORK_FIELD = "workload.requests_per_level"


T = TypeVar("T")
SHUTDOWN_MESSAGE = "The server stopped while this simulation ran. Start it again."


class JobLimitError(Exception):
    """A cap or the rate limit refused the job; try again in `retry_after_s` seconds."""

    def __init__(self, message: str, retry_after_s: int = 5) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def validate(doc: Mapping[str, Any], max_work: int | None, hint: str = "") -> JSON:
    """The document with a plan resolved to its binding rank's pool; InputError naming the field.

    The work cap (requests_per_level × ramp levels) is checked here, before any work is queued."""
    resolved = resolve_pool(doc)
    cfg, _, _ = parse(resolved)  # a bad document raises SimInputError, an InputError naming the field
    work = cfg.requests_per_level * len(cfg.ramp)
    if max_work is not None and work > max_work:
        raise InputError(
            WORK_FIELD,
            f"requests_per_level × ramp levels = {cfg.requests_per_level:,} × {len(cfg.ramp)} = {work:,} "
            f"exceeds the limit of {max_work:,} this server accepts{hint}",
        )
    return resolved


def simulate(resolved: JSON, progress: Callable[[float], None], cancel: Callable[[], bool]) -> JSON:
    """Run a validated (pool-resolved) document: the same output as `kvledger simulate --json`."""
    return simulate_from_json(resolved, progress=progress, cancel=cancel)


def limits_of(settings: Settings) -> JobLimits:
    """The job caps a server runs with (ranges in app.settings)."""
    return JobLimits(workers=settings.sim_workers, max_active=settings.sim_max_active,
                     client_active=settings.sim_client_active, client_jobs=settings.sim_client_jobs,
                     max_jobs=settings.sim_max_jobs, ttl_s=settings.sim_job_ttl_s,
                     rate_per_min=settings.sim_rate_per_min, burst=settings.sim_rate_burst)


@dataclass(frozen=True)
class JobView:
    """A snapshot of a job's row."""

    id: str
    state: State
    progress: float
    result: JSON | None
    error: JSON | None
    meta: Mapping[str, Any]
    cancel_requested: bool = False

    @classmethod
    def of(cls, row: JobRow) -> JobView:
        state: State = row.state  # type: ignore[assignment]
        return cls(row.id, state, row.progress, row.result, row.error, row.meta, row.cancel_requested)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def as_json(self) -> JSON:
        return {"id": self.id, "state": self.state, "progress": self.progress,
                "result": self.result, "error": self.error}


class _Beat:
    """A running job's progress and cancel callbacks: both write the heartbeat at most every
    `beat_s` and read the row's cancel flag back (set locally too, for this process's cancels)."""

    def __init__(self, runner: JobRunner, job_id: str) -> None:
        self.runner, self.job_id = runner, job_id
        self.stop = threading.Event()
        self.fraction = 0.0
        self.last = float("-inf")  # the first callback writes at once

    def progress(self, fraction: float) -> None:
        self.fraction = max(self.fraction, min(float(fraction), 1.0))
        self._maybe_write()

    def cancel(self) -> bool:
        self._maybe_write()
        return self.stop.is_set()

    def _maybe_write(self) -> None:
        if time.monotonic() - self.last < self.runner.beat_s:
            return
        self.last = time.monotonic()
        try:
            if self.runner.write(lambda s: jobs.beat(s, self.job_id, self.fraction, self.runner.now())):
                self.stop.set()
        except SQLAlchemyError as exc:  # a busy database never fails the simulation: retried next beat
            log.warning("simulation job %s: heartbeat not written: %s", self.job_id, exc)


class JobRunner:
    """Database-backed simulation jobs (see the module docstring)."""

    def __init__(
        self,
        database: Callable[[], Database],
        *,
        max_work: int | None,
        limits: JobLimits | None = None,
        run: RunFn = simulate,
        clock: Callable[[], dt.datetime] = utcnow,
        poll_s: float = 0.25,
        beat_s: float = 0.5,
    ) -> None:
        self.database, self.max_work, self.limits = database, max_work, limits or JobLimits()
        self._run, self.now, self.poll_s, self.beat_s = run, clock, poll_s, beat_s
        #: Names this process in the job rows it claims; `tag` (random) in the X-KVLedger-Worker header.
        self.tag = secrets.token_hex(6)
        self.worker = f"{os.getpid()}-{self.tag}"
        self._lock = threading.Lock()
        self._beats: dict[str, _Beat] = {}
        self._threads = 0
        self._kicked = False
        self._closed = False

    # -- storage --------------------------------------------------------------------------

    def write(self, work: Callable[[Session], T]) -> T:
        return run_write(self.database().write, work)

    def read(self, work: Callable[[Session], T]) -> T:
        with self.database().read() as session:
            return work(session)

    # -- public API -------------------------------------------------------------------------

    def submit(self, doc: Mapping[str, Any], owner: str = "", meta: Mapping[str, Any] | None = None) -> JobView:
        """Validate and queue `doc`; InputError for bad input, JobLimitError when refused."""
        resolved = validate(doc, self.max_work)
        row = self._insert(resolved, owner, meta or {}, "job")
        self._wake()
        return JobView.of(row)

    def run_now(self, doc: Mapping[str, Any], max_work: int | None, hint: str = "", owner: str = "") -> JSON:
        """Run a small document on the caller's thread; its row counts against the active caps while it runs."""
        resolved = validate(doc, max_work, hint)
        row = self._insert(resolved, owner, {"sync": True}, "sync")
        beat = self._track(row.id)
        try:
            return self._run(resolved, beat.progress, beat.cancel)
        except SimCancelled:
            raise JobLimitError("The server is shutting down; the simulation was stopped.") from None
        finally:
            self._untrack(row.id)
            self.write(lambda s: jobs.finish(s, self.limits, row.id, "cancelled", self.now()))

    def get(self, job_id: str) -> JobView | None:
        row = self.read(lambda s: jobs.get(s, job_id, self.now()))
        if row is not None and row.state == "queued":
            self._wake()  # queued by a server that stopped, or waiting for a slot: someone runs it
        return None if row is None else JobView.of(row)

    def cancel(self, job_id: str) -> JobView | None:
        """Ask a job to stop through its row (a queued job stops at once), from any worker."""
        row = self.write(lambda s: jobs.cancel(s, self.limits, job_id, self.now()))
        with self._lock:
            beat = self._beats.get(job_id)
        if beat is not None:
            beat.stop.set()
        return None if row is None else JobView.of(row)

    def local_running(self) -> int:
        with self._lock:
            return len(self._beats)

    def shutdown(self, grace_s: float = 2.0) -> None:
        """Refuse new jobs here, stop this process's running ones (queued jobs stay queued for
        another worker or the next start) and record the ones that did not stop in time."""
        with self._lock:
            self._closed = True
            beats = list(self._beats.values())
        for beat in beats:
            beat.stop.set()
        deadline = time.monotonic() + grace_s
        while self.local_running() and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            self.write(lambda s: jobs.abandon(s, self.worker, self.limits, self.now()))
        except SQLAlchemyError as exc:
            log.warning("simulation jobs of %s not recorded at shutdown: %s", self.worker, exc)

    # -- internals --------------------------------------------------------------------------

    def _insert(self, resolved: JSON, owner: str, meta: Mapping[str, Any], kind: str) -> JobRow:
        if self._closed:
            raise JobLimitError("The server is shutting down; no new simulations are accepted.")
        job_id = secrets.token_urlsafe(16)
        try:
            return self.write(lambda s: jobs.submit(
                s, self.limits, job_id=job_id, owner=owner, document=resolved, meta=meta, now=self.now(),
                kind=kind, claimed_by=self.worker if kind == "sync" else None))
        except JobRefused as exc:
            raise JobLimitError(exc.message, exc.retry_after_s) from None

    def _track(self, job_id: str) -> _Beat:
        beat = _Beat(self, job_id)
        with self._lock:
            self._beats[job_id] = beat
            if self._closed:
                beat.stop.set()
        return beat

    def _untrack(self, job_id: str) -> None:
        with self._lock:
            self._beats.pop(job_id, None)

    def _wake(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._kicked = True
            if self._threads >= self.limits.workers:
                return
            self._threads += 1
        threading.Thread(target=self._work, name="simjob", daemon=True).start()

    def _keep_going(self) -> bool:
        """Called when nothing could be claimed: stay while jobs are queued (or a wake came in)."""
        try:
            queued = self.read(jobs.has_queued)
        except SQLAlchemyError as exc:
            log.warning("simulation queue unreadable: %s", exc)
            queued = True
        with self._lock:
            if self._closed or not (queued or self._kicked):
                self._threads -= 1
                return False
            self._kicked = False
        time.sleep(self.poll_s if queued else 0.0)
        return True

    def _work(self) -> None:
        """A worker thread: claim and run queued jobs until none is left (no lock held while running)."""
        while True:
            with self._lock:
                self._kicked = False
            try:
                row = None if self._closed else self.write(self._claim)
            except SQLAlchemyError as exc:
                log.warning("simulation job claim failed: %s", exc)
                row = None
            if row is not None and row.document is not None:
                self._execute(row.id, row.document)
            elif not self._keep_going():
                return

    def _claim(self, session: Session) -> JobRow | None:
        return jobs.claim(session, self.limits, self.worker, self.now())

    def _execute(self, job_id: str, document: JSON) -> None:
        beat = self._track(job_id)
        try:
            result = self._run(document, beat.progress, beat.cancel)
        except SimCancelled:
            outcome: tuple[str, JSON | None, JSON | None] = (
                "cancelled", None, {"field": "", "message": SHUTDOWN_MESSAGE} if self._closed else None)
        except InputError as exc:
            outcome = ("failed", None, {"field": exc.field, "message": exc.message})
        except Exception:  # a bug: logged with its traceback, reported without one
            reference = secrets.token_hex(6)
            log.exception("simulation job %s failed (reference %s)", job_id, reference)
            outcome = ("failed", None, {"field": "", "message": "The simulation failed on our side. The error "
                                                                 f"was logged with reference {reference}."})
        else:
            outcome = ("done", result, None)  # a run that completed before it saw a cancel keeps its result
        try:
            state, res, err = outcome
            self.write(lambda s: jobs.finish(s, self.limits, job_id, state, self.now(), res, err))
        except SQLAlchemyError as exc:  # the heartbeat stops: the stale-claim rule fails it later
            log.error("simulation job %s outcome not recorded: %s", job_id, exc)
        finally:
            self._untrack(job_id)
