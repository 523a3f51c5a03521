"""A real uvicorn server (started the way `kvledger serve` starts: migrate, then serve) on
SQLite and PostgreSQL: 50 parallel writers over HTTP all land with no lost or duplicated rows,
and a SIGKILL of the server in the middle of a write burst leaves an intact database holding
every acknowledged save."""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text

from app.db import repository as repo
from app.db.models import Ledger, LedgerRank, SavedPlan
from app.db.session import make_engine, make_sessionmaker
from app.settings import Settings

from .saved_support import PLAN_DOC, backend, database_url, log_text, settings, start_server, stop_server

__all__ = ["backend", "database_url", "settings"]  # fixtures

pytestmark = pytest.mark.slow
WRITERS = 50
LOG = "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log"


def _post(url: str, body: bytes, content_type: str, timeout: float = 60) -> dict[str, Any]:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        assert response.status == 201
        data: dict[str, Any] = json.loads(response.read())
        return data


def _save_plan(base: str, i: int) -> str:
    doc = {**PLAN_DOC, "title": f"writer {i}", "engine": {"gpu_memory_utilization": 0.80 + (i % 10) / 100}}
    return str(_post(base + "/api/v1/plans", json.dumps(doc).encode(), "application/json")["slug"])


def _add_ledger(base: str, i: int) -> int:
    body = urllib.parse.urlencode({"text": log_text(LOG), "note": f"writer {i}"}).encode()
    return int(_post(base + "/api/v1/deployments/dep/ledgers", body, "application/x-www-form-urlencoded")["id"])


@pytest.fixture
def server(settings: Settings, tmp_path: Path) -> Iterator[str]:
    proc, url = start_server(settings, tmp_path / "server.log")
    try:
        yield url
    finally:
        stop_server(proc)


def test_fifty_parallel_writers_all_land(settings: Settings, server: str) -> None:
    _post(server + "/api/v1/deployments", json.dumps({"slug": "dep", "name": "Dep"}).encode(), "application/json")
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        plans = list(pool.map(lambda i: _save_plan(server, i), range(WRITERS)))
        ledgers = list(pool.map(lambda i: _add_ledger(server, i), range(WRITERS)))
    assert len(set(plans)) == WRITERS and len(set(ledgers)) == WRITERS

    engine = make_engine(settings.database_url)
    try:
        with make_sessionmaker(engine)() as session:
            stored = session.scalars(select(SavedPlan.slug)).all()
            assert sorted(stored) == sorted(plans)  # none lost, none duplicated
            titles = session.scalars(select(SavedPlan.title)).all()
            assert sorted(titles) == sorted(f"writer {i}" for i in range(WRITERS))
            notes = session.scalars(select(Ledger.note)).all()
            assert sorted(n.split("\n")[0] for n in notes) == sorted(f"writer {i}" for i in range(WRITERS))
            per_ledger = session.execute(
                select(Ledger.id, func.count(LedgerRank.id)).join(LedgerRank).group_by(Ledger.id)
            ).all()
            assert sorted(i for i, _ in per_ledger) == sorted(ledgers) and {n for _, n in per_ledger} == {4}
    finally:
        engine.dispose()


def test_sigkill_mid_burst_keeps_every_acknowledged_save(settings: Settings, tmp_path: Path) -> None:
    proc, url = start_server(settings, tmp_path / "server.log")
    acked: list[str] = []
    stop = threading.Event()

    def hammer(worker: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                acked.append(_save_plan(url, worker * 100_000 + i))
            except (OSError, http.client.HTTPException, ValueError):
                return  # the server is gone; a save without a complete answer was never acknowledged
            i += 1

    threads = [threading.Thread(target=hammer, args=(w,)) for w in range(4)]
    try:
        for thread in threads:
            thread.start()
        while len(acked) < 40 and all(t.is_alive() for t in threads):
            threading.Event().wait(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        stop_server(proc)
    assert proc.returncode == -signal.SIGKILL and len(acked) >= 40

    engine = make_engine(settings.database_url)
    try:
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:
                assert conn.execute(text("PRAGMA integrity_check")).scalars().all() == ["ok"]
                assert conn.execute(text("PRAGMA foreign_key_check")).all() == []
        with make_sessionmaker(engine)() as session:
            for slug in acked:
                assert repo.get_plan(session, slug).slug == slug
            assert session.scalar(select(func.count(SavedPlan.id))) >= len(acked)  # type: ignore[operator]
    finally:
        engine.dispose()
