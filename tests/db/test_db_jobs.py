"""The job table's rules (app.db.jobs) on SQLite and PostgreSQL, with many threads deciding at
once: a job is claimed once, never more than `workers` run, the caps hold under concurrent
submissions, a cancel beats a claim, dead workers' claims are failed."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.db import jobs
from app.db.jobs import JobLimits, JobRefused
from app.db.models import SimJob
from app.db.session import run_write

T0 = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
DOC: dict[str, Any] = {"pool": {"blocks": 100}}
WIDE = JobLimits(workers=2, max_active=1000, client_active=1000, client_jobs=1000, max_jobs=1000,
                 rate_per_min=10_000, burst=1000)


def _submit(factory: sessionmaker[Session], limits: JobLimits, job_id: str, owner: str = "a",
            now: dt.datetime = T0) -> jobs.JobRow:
    return run_write(factory, lambda s: jobs.submit(s, limits, job_id=job_id, owner=owner, document=DOC, meta={},
                                                    now=now))


def _parallel(n: int, fn: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(n)

    def go(i: int) -> Any:
        barrier.wait()
        try:
            return fn(i)
        except JobRefused as exc:
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(go, range(n)))


def test_each_job_is_claimed_once_and_at_most_workers_run(write_factory: sessionmaker[Session]) -> None:
    for i in range(6):
        _submit(write_factory, WIDE, f"job{i}", now=T0 + dt.timedelta(seconds=i))
    claims = _parallel(8, lambda i: run_write(write_factory, lambda s: jobs.claim(s, WIDE, f"w{i}", T0)))
    taken = [c for c in claims if c is not None]
    assert len(taken) == WIDE.workers  # two running slots over every worker
    assert sorted(c.id for c in taken) == ["job0", "job1"]  # the oldest first, each once
    assert all(c.document == DOC for c in taken)
    def finish(job_id: str) -> Callable[[Session], None]:
        return lambda s: jobs.finish(s, WIDE, job_id, "done", T0, {"ok": 1})

    for c in taken:
        run_write(write_factory, finish(c.id))
    again = _parallel(8, lambda i: run_write(write_factory, lambda s: jobs.claim(s, WIDE, f"w{i}", T0)))
    assert sorted(c.id for c in again if c is not None) == ["job2", "job3"]


def test_the_active_cap_holds_under_concurrent_submissions(write_factory: sessionmaker[Session]) -> None:
    limits = JobLimits(max_active=5, client_active=5, client_jobs=100, max_jobs=100, rate_per_min=10_000, burst=100)
    results = _parallel(12, lambda i: _submit(write_factory, limits, f"j{i}", owner=f"c{i}"))
    accepted = [r for r in results if isinstance(r, jobs.JobRow)]
    refused = [r for r in results if isinstance(r, JobRefused)]
    assert len(accepted) == 5 and len(refused) == 7
    assert all("5 simulations are already queued or running" in r.message for r in refused)


def test_the_rate_limit_holds_under_concurrent_submissions(write_factory: sessionmaker[Session]) -> None:
    limits = JobLimits(max_active=100, client_active=100, client_jobs=100, max_jobs=100, rate_per_min=1, burst=4)
    results = _parallel(10, lambda i: _submit(write_factory, limits, f"r{i}", owner="one"))
    assert sum(isinstance(r, jobs.JobRow) for r in results) == 4
    assert {r.retry_after_s for r in results if isinstance(r, JobRefused)} == {60}


def test_a_cancel_beats_the_claim_and_running_jobs_see_it(write_factory: sessionmaker[Session]) -> None:
    _submit(write_factory, WIDE, "queued")
    cancelled = run_write(write_factory, lambda s: jobs.cancel(s, WIDE, "queued", T0))
    assert cancelled is not None and cancelled.state == "cancelled" and cancelled.cancel_requested
    assert run_write(write_factory, lambda s: jobs.claim(s, WIDE, "w", T0)) is None
    _submit(write_factory, WIDE, "running")
    assert run_write(write_factory, lambda s: jobs.claim(s, WIDE, "w", T0)) is not None
    assert run_write(write_factory, lambda s: jobs.beat(s, "running", 0.3, T0)) is False
    assert run_write(write_factory, lambda s: jobs.cancel(s, WIDE, "running", T0)).state == "running"  # type: ignore[union-attr]
    assert run_write(write_factory, lambda s: jobs.beat(s, "running", 0.4, T0)) is True
    assert run_write(write_factory, lambda s: jobs.cancel(s, WIDE, "nope", T0)) is None


class _ClaimedAfterFirstUpdate:
    """A session whose job another worker claims (queued -> running) right after the first UPDATE
    of a statement sequence: the moment between a cancel's two statements."""

    def __init__(self, session: Session, job_id: str) -> None:
        self.session, self.job_id, self.updates = session, job_id, 0

    def execute(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        result = self.session.execute(statement, *args, **kwargs)
        if getattr(statement, "is_update", False):
            self.updates += 1
            if self.updates == 1:
                self.session.execute(update(SimJob).where(SimJob.id == self.job_id, SimJob.state == "queued")
                                     .values(state="running", claimed_by="w2", heartbeat_at=T0))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def test_a_claim_between_the_cancels_statements_still_gets_the_stop(write_factory: sessionmaker[Session]) -> None:
    """The cancel once asked running jobs first and queued ones second: a job claimed in between was
    neither, and ran to the end (seen as a 'done' job cancelled while queued, test_sim_workers)."""
    _submit(write_factory, WIDE, "j")
    after = run_write(write_factory, lambda s: jobs.cancel(_ClaimedAfterFirstUpdate(s, "j"), WIDE, "j", T0))  # type: ignore[arg-type]
    assert after is not None and after.cancel_requested
    assert after.state == "cancelled"  # queued when the first statement ran: cancelled at once, never claimed


def test_a_dead_workers_claim_is_failed_and_frees_its_slot(write_factory: sessionmaker[Session]) -> None:
    limits = JobLimits(workers=1, max_active=10, client_active=10, client_jobs=10, max_jobs=10, stale_s=60,
                       rate_per_min=10_000, burst=100)
    _submit(write_factory, limits, "orphan")
    _submit(write_factory, limits, "next", now=T0 + dt.timedelta(seconds=1))
    assert run_write(write_factory, lambda s: jobs.claim(s, limits, "dead", T0)).id == "orphan"  # type: ignore[union-attr]
    assert run_write(write_factory, lambda s: jobs.claim(s, limits, "w", T0 + dt.timedelta(seconds=30))) is None
    later = T0 + dt.timedelta(seconds=61)
    assert run_write(write_factory, lambda s: jobs.claim(s, limits, "w", later)).id == "next"  # type: ignore[union-attr]
    with write_factory() as session:
        orphan = jobs.get(session, "orphan", later)
        count = session.scalar(select(func.count()).select_from(SimJob))
    assert orphan is not None and orphan.state == "failed"
    assert "stopped before it finished" in (orphan.error or {})["message"]
    assert count == 2


@pytest.mark.parametrize("kind", ["job", "sync"])
def test_finished_jobs_expire(write_factory: sessionmaker[Session], kind: str) -> None:
    limits = JobLimits(ttl_s=60)
    run_write(write_factory, lambda s: jobs.submit(s, limits, job_id="x", owner="a", document=DOC, meta={}, now=T0,
                                                   kind=kind, claimed_by="w" if kind == "sync" else None))
    if kind == "job":
        run_write(write_factory, lambda s: jobs.claim(s, limits, "w", T0))
    run_write(write_factory, lambda s: jobs.finish(s, limits, "x", "done", T0, {"ok": 1}))
    with write_factory() as session:
        shown = jobs.get(session, "x", T0 + dt.timedelta(seconds=59))
        assert (shown is not None) == (kind == "job")  # a sync run's row is gone once it answered
        assert jobs.get(session, "x", T0 + dt.timedelta(seconds=61)) is None
    run_write(write_factory, lambda s: jobs.purge(s, limits, T0 + dt.timedelta(seconds=61)))
    with write_factory() as session:
        assert session.scalar(select(func.count()).select_from(SimJob)) == 0
