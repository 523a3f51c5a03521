"""Simulation jobs: a small in-process runner for ramps too long to answer in one request.

Theory of operation. `JobRunner.submit(doc)` validates the document on the caller's thread
(so bad input is a 422 before anything is queued), refuses when `max_active` jobs are already
queued or running (`JobLimitError`, a 429 on the web), stores the job under an unguessable id
(`secrets.token_urlsafe`) and queues it. At most `workers` daemon threads run jobs; a thread is
started when work arrives and exits when the queue is empty, so an idle runner holds no
thread. A job reports its progress through the simulator's `progress` callback and is stopped
by its `cancel` callback, which reads a per-job flag that `cancel(id)` sets (a queued job is
cancelled at once). Finished jobs are kept `ttl_s` seconds, and at most `max_jobs` jobs are
stored: the oldest finished ones are dropped first. Every read returns an immutable
`JobView` snapshot taken under the one lock that guards all job state.

The runner knows nothing about HTTP: the web layer maps `InputError` to 422,
`JobLimitError` to 429 and an unknown (or expired) id to 404.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from app.core.errors import InputError
from app.core.sim.io import SimCancelled, parse, simulate_from_json
from app.services.simulation import resolve_pool

log = logging.getLogger(__name__)

JSON = dict[str, Any]
State = Literal["queued", "running", "done", "failed", "cancelled"]
FINISHED: frozenset[str] = frozenset({"done", "failed", "cancelled"})
RunFn = Callable[[JSON, Callable[[float], None], Callable[[], bool]], JSON]

WORK_FIELD = "workload.requests_per_level"


class JobLimitError(Exception):
    """Too many simulations are queued or running; try again when one finishes."""


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


@dataclass(frozen=True)
class JobView:
    """A snapshot of a job, safe to read from any thread."""

    id: str
    state: State
    progress: float
    result: JSON | None
    error: JSON | None
    meta: Mapping[str, Any]
    cancel_requested: bool = False

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def as_json(self) -> JSON:
        return {"id": self.id, "state": self.state, "progress": self.progress,
                "result": self.result, "error": self.error}


@dataclass
class _Job:
    id: str
    doc: JSON
    meta: Mapping[str, Any]
    state: State = "queued"
    progress: float = 0.0
    result: JSON | None = None
    error: JSON | None = None
    finished_at: float | None = None
    cancel_flag: threading.Event = field(default_factory=threading.Event)

    def view(self) -> JobView:
        return JobView(self.id, self.state, self.progress, self.result, self.error, self.meta,
                       self.cancel_flag.is_set())


class JobRunner:
    """A bounded, thread-safe, in-memory simulation job runner (see the module docstring)."""

    def __init__(
        self,
        *,
        max_work: int | None,
        workers: int = 1,
        max_active: int = 4,
        max_jobs: int = 100,
        ttl_s: float = 3600.0,
        run: RunFn = simulate,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1 or max_active < 1 or max_jobs < max_active:
            raise ValueError("need workers >= 1, max_active >= 1 and max_jobs >= max_active")
        self.max_work = max_work
        self.workers = workers
        self.max_active = max_active
        self.max_jobs = max_jobs
        self.ttl_s = ttl_s
        self._run = run
        self._clock = clock
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self._queue: deque[_Job] = deque()
        self._threads = 0
        self._closed = False

    # -- public API -------------------------------------------------------------------------

    def submit(self, doc: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> JobView:
        """Validate and queue `doc`; InputError for bad input, JobLimitError when full."""
        resolved = validate(doc, self.max_work)
        with self._lock:
            self._purge(make_room=True)
            if self._closed:
                raise JobLimitError("The server is shutting down; no new simulations are accepted.")
            if self._active_count() >= self.max_active:
                raise JobLimitError(self._limit_message())
            job = _Job(id=self._new_id(), doc=resolved, meta=dict(meta or {}))
            self._jobs[job.id] = job
            self._queue.append(job)
            if self._threads < self.workers:
                self._threads += 1
                threading.Thread(target=self._work, name=f"simjob-{job.id[:6]}", daemon=True).start()
            return job.view()

    def run_now(self, doc: Mapping[str, Any], max_work: int | None, hint: str = "") -> JSON:
        """Run a small document on the caller's thread; it counts against `max_active` while it runs."""
        resolved = validate(doc, max_work, hint)
        with self._lock:
            self._purge(make_room=True)
            if self._closed or self._active_count() >= self.max_active:
                raise JobLimitError(self._limit_message())
            job = _Job(id=self._new_id(), doc=resolved, meta={"sync": True}, state="running")
            self._jobs[job.id] = job
        try:
            return self._run(job.doc, lambda fraction: None, job.cancel_flag.is_set)
        except SimCancelled:
            raise JobLimitError("The server is shutting down; the simulation was stopped.") from None
        finally:
            with self._lock:
                self._jobs.pop(job.id, None)

    def get(self, job_id: str) -> JobView | None:
        with self._lock:
            self._purge()
            job = self._jobs.get(job_id)
            return None if job is None else job.view()

    def cancel(self, job_id: str) -> JobView | None:
        """Ask a job to stop (a queued job stops at once); finished jobs are left as they are."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            job.cancel_flag.set()
            if job.state == "queued":
                self._queue.remove(job)
                self._finish(job, "cancelled")
            return job.view()

    def active_count(self) -> int:
        with self._lock:
            return self._active_count()

    def shutdown(self) -> None:
        """Refuse new jobs and cancel every queued or running one."""
        with self._lock:
            self._closed = True
            for job in self._jobs.values():
                job.cancel_flag.set()
                if job.state == "queued":
                    self._finish(job, "cancelled")
            self._queue.clear()

    # -- internals (the lock is held by the caller unless stated) ----------------------------

    def _new_id(self) -> str:
        while True:
            job_id = secrets.token_urlsafe(16)
            if job_id not in self._jobs:
                return job_id

    def _active_count(self) -> int:
        return sum(1 for job in self._jobs.values() if job.state not in FINISHED)

    def _limit_message(self) -> str:
        return (f"{self.max_active} simulations are already queued or running on this server, the most it "
                "accepts at once. Wait for one to finish (or cancel one), then try again.")

    def _finish(self, job: _Job, state: State, result: JSON | None = None, error: JSON | None = None) -> None:
        job.state, job.result, job.error = state, result, error
        if state == "done":
            job.progress = 1.0
        job.finished_at = self._clock()
        job.doc = {}

    def _purge(self, make_room: bool = False) -> None:
        """Drop expired jobs; with `make_room`, also the oldest finished ones until one more fits."""
        now = self._clock()
        for job_id in [j.id for j in self._jobs.values() if j.finished_at is not None
                       and now - j.finished_at > self.ttl_s]:
            del self._jobs[job_id]
        if not make_room:
            return
        finished = sorted((j for j in self._jobs.values() if j.finished_at is not None),
                          key=lambda j: j.finished_at or 0.0)
        while len(self._jobs) >= self.max_jobs and finished:
            del self._jobs[finished.pop(0).id]

    def _next(self) -> _Job | None:
        with self._lock:
            if not self._queue:
                self._threads -= 1
                return None
            job = self._queue.popleft()
            job.state = "running"
            return job

    def _work(self) -> None:
        """A worker thread: run queued jobs until the queue is empty (no lock held while running)."""
        while (job := self._next()) is not None:
            self._execute(job)

    def _execute(self, job: _Job) -> None:
        def progress(fraction: float) -> None:
            with self._lock:
                job.progress = max(job.progress, min(float(fraction), 1.0))

        try:
            result = self._run(job.doc, progress, job.cancel_flag.is_set)
        except SimCancelled:
            outcome: tuple[State, JSON | None, JSON | None] = ("cancelled", None, None)
        except InputError as exc:
            outcome = ("failed", None, {"field": exc.field, "message": exc.message})
        except Exception:  # a bug: logged with its traceback, reported without one
            reference = secrets.token_hex(6)
            log.exception("simulation job %s failed (reference %s)", job.id, reference)
            outcome = ("failed", None, {"field": "", "message": "The simulation failed on our side. The error "
                                                                 f"was logged with reference {reference}."})
        else:
            outcome = ("done", result, None)
        with self._lock:
            # A run that completed before it saw a cancel keeps its result.
            self._finish(job, *outcome)
