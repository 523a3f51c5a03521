"""50 parallel writers, each with its own session, all land: no lost or duplicated rows."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db import repository as repo
from app.db.models import Ledger, LedgerRank, SavedPlan
from app.db.repository import Conflict
from app.db.session import run_write

from .factories import ledger_in

WRITERS = 50
PLANS_EACH = 3


def _in_parallel(count: int, job: Callable[[int], object]) -> list[object]:
    barrier = threading.Barrier(count)

    def start(i: int) -> object:
        barrier.wait(timeout=30)
        return job(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(start, range(count)))


def _save(session: Session, document: dict[str, int]) -> str:
    return repo.save_plan(session, document, {"ok": True}, "0.1.0")


def test_fifty_parallel_writers_all_land(write_factory: sessionmaker[Session], engine: Engine) -> None:
    run_write(write_factory, lambda s: repo.create_deployment(s, "shared", "Shared", "m"))

    def writer(i: int) -> list[str]:
        slugs = []
        for j in range(PLANS_EACH):
            document = {"writer": i, "n": j}
            slugs.append(run_write(write_factory, partial(_save, document=document)))
        run_write(write_factory, lambda s: repo.add_ledger(s, "shared", ledger_in(note=f"writer {i}")))
        return slugs

    results = _in_parallel(WRITERS, writer)
    acknowledged = [slug for slugs in results for slug in slugs]  # type: ignore[attr-defined]
    assert len(acknowledged) == len(set(acknowledged)) == WRITERS * PLANS_EACH

    with write_factory() as s:
        stored = s.execute(select(SavedPlan.slug, SavedPlan.document)).all()
        assert sorted(slug for slug, _ in stored) == sorted(acknowledged)
        assert sorted((d["writer"], d["n"]) for _, d in stored) == [
            (i, j) for i in range(WRITERS) for j in range(PLANS_EACH)
        ]
        notes = s.scalars(select(Ledger.note)).all()
        assert sorted(notes) == sorted(f"writer {i}" for i in range(WRITERS))
        assert s.scalar(select(func.count(LedgerRank.id))) == WRITERS * 8
        assert repo.count_ledgers(s, "shared") == WRITERS


def test_racing_creates_of_one_deployment_give_one_winner(write_factory: sessionmaker[Session]) -> None:
    def create(i: int) -> str:
        try:
            run_write(write_factory, lambda s: repo.create_deployment(s, "contested", f"try {i}", "m"))
        except Conflict:
            return "conflict"
        return "created"

    outcomes = _in_parallel(20, create)
    assert outcomes.count("created") == 1
    assert outcomes.count("conflict") == 19
    with write_factory() as s:
        assert [d.slug for d in repo.list_deployments(s)] == ["contested"]
