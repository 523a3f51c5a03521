"""SIGKILL in the middle of a write burst leaves an intact database holding every
acknowledged write.

The burst runs in a child process that prints each write only after its commit returned.
``burst_then_kill`` takes any command line that behaves that way, so a server-level variant
(start ``kvledger serve``, drive ``POST /api/v1/plans`` from a client that prints each returned
slug, kill the server) can reuse it and ``assert_every_ack_landed`` unchanged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, select, text

from app.db import repository as repo
from app.db.models import Ledger, LedgerRank
from app.db.session import make_engine, make_sessionmaker, run_write

REPO_ROOT = Path(__file__).resolve().parents[2]
BURST = 10_000  # far more than the time allows: the kill always lands mid-burst
KILL_AFTER = 60


def burst_then_kill(command: list[str], kill_after: int, timeout_s: float = 60) -> list[str]:
    """Run ``command``; SIGKILL it once ``kill_after`` writes were acknowledged on stdout.
    Returns every complete acknowledgement line (also those printed just before the kill)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    child = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    acks: list[str] = []
    try:
        while len(acks) < kill_after:
            line = child.stdout.readline()
            assert line.endswith("\n"), f"the writer stopped early (exit {child.poll()})"
            acks.append(line.strip())
        os.kill(child.pid, signal.SIGKILL)
        rest, _ = child.communicate(timeout=timeout_s)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, "the writer finished before it was killed"
    complete = rest.split("\n")[:-1]  # a torn last line was never acknowledged
    return acks + [line.strip() for line in complete if line.strip()]


def assert_every_ack_landed(url: str, acks: list[str]) -> None:
    engine = make_engine(url)
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA integrity_check")).scalars().all() == ["ok"]
            assert conn.execute(text("PRAGMA foreign_key_check")).all() == []
    factory = make_sessionmaker(engine)
    with factory() as s:
        for ack in acks:
            kind, key = ack.split(" ", 1)
            if kind == "plan":
                assert repo.get_plan(s, key).slug == key
            else:
                assert len(repo.get_ledger(s, int(key)).ranks) == 8
        # No torn ledger: every stored ledger has all its rank rows.
        per_ledger = s.execute(
            select(Ledger.id, func.count(LedgerRank.id)).outerjoin(LedgerRank).group_by(Ledger.id)
        ).all()
        assert {count for _, count in per_ledger} <= {8}
    engine.dispose()


def test_sigkill_mid_burst_keeps_every_acknowledged_write(db_url: str) -> None:
    engine = make_engine(db_url)
    run_write(make_sessionmaker(engine, write=True), lambda s: repo.create_deployment(s, "burst", "Burst", "m"))
    engine.dispose()
    command = [sys.executable, "-m", "tests.db.burst_writer", db_url, str(BURST)]
    acks: list[str] = []
    # Three bursts on the same database, each killed at a different point.
    for round_kill in (KILL_AFTER, KILL_AFTER // 2 + 1, KILL_AFTER // 3 + 2):
        acks += burst_then_kill(command, round_kill)
        assert_every_ack_landed(db_url, acks)
    assert any(a.startswith("ledger ") for a in acks) and any(a.startswith("plan ") for a in acks)
    # The database is usable afterwards (WAL recovered, no stale lock).
    engine = make_engine(db_url)
    slug = run_write(make_sessionmaker(engine, write=True), lambda s: repo.save_plan(s, {}, {}, "0.1.0"))
    assert slug
    engine.dispose()
