"""Unsaved base documents under their caps and expiry (app.db.bases) on SQLite and PostgreSQL:
a client's own oldest go first, the overall cap evicts the least recently written, a re-write
renews, expired ones are gone, concurrent writers never overshoot."""

from __future__ import annotations

import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db import bases
from app.db.bases import BaseLimits, BaseTooLarge
from app.db.models import BaseDocument
from app.db.session import run_write

T0 = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
LIMITS = BaseLimits(ttl_s=3600, client_bytes=300, max_bytes=500)


def _put(factory: sessionmaker[Session], base_id: str, owner: str, size: int = 100, at: float = 0,
         limits: BaseLimits = LIMITS) -> None:
    run_write(factory, lambda s: bases.put(s, limits, base_id=base_id, document={"id": base_id}, size=size,
                                           owner=owner, now=T0 + dt.timedelta(seconds=at)))


def _ids(factory: sessionmaker[Session]) -> set[str]:
    with factory() as session:
        return set(session.scalars(select(BaseDocument.id)))


def test_a_client_makes_room_from_its_own_and_the_total_from_the_oldest(write_factory: sessionmaker[Session]) -> None:
    _put(write_factory, "b1", "bob", at=0)
    for i in range(5):
        _put(write_factory, f"a{i}", "alice", at=1 + i)
    assert _ids(write_factory) == {"b1", "a2", "a3", "a4"}  # alice holds 300 bytes at most, bob kept his
    _put(write_factory, "b1", "bob", at=10)  # a re-write renews bob's document
    for i in range(3):
        _put(write_factory, f"c{i}", "carol", at=11 + i)
    with write_factory() as session:
        assert bases.stored_bytes(session) <= LIMITS.max_bytes
        assert bases.stored_bytes(session, "alice") <= LIMITS.client_bytes
    assert _ids(write_factory) == {"b1", "a4", "c0", "c1", "c2"}  # the least recently written went


def test_documents_expire_after_their_last_write(write_factory: sessionmaker[Session]) -> None:
    _put(write_factory, "old", "a", at=0)
    _put(write_factory, "kept", "a", at=0)
    _put(write_factory, "kept", "a", at=3000)
    with write_factory() as session:
        assert bases.get(session, LIMITS, "old", T0 + dt.timedelta(seconds=3599)) == {"id": "old"}
        assert bases.get(session, LIMITS, "old", T0 + dt.timedelta(seconds=3601)) is None
        assert bases.get(session, LIMITS, "kept", T0 + dt.timedelta(seconds=3601)) == {"id": "kept"}
    _put(write_factory, "new", "b", at=3601)  # any write purges what expired
    assert _ids(write_factory) == {"kept", "new"}


def test_one_document_over_a_clients_allowance_is_refused(write_factory: sessionmaker[Session]) -> None:
    with pytest.raises(BaseTooLarge, match="at most"):
        _put(write_factory, "huge", "a", size=301)
    assert _ids(write_factory) == set()


def test_concurrent_writers_never_overshoot(write_factory: sessionmaker[Session]) -> None:
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        barrier.wait()
        for j in range(5):
            _put(write_factory, f"w{i}-{j}", f"client{i % 3}", at=i * 10 + j)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(writer, range(8)))
    with write_factory() as session:
        total = session.scalar(select(func.sum(BaseDocument.size_bytes)))
        per_owner = dict(session.execute(select(BaseDocument.owner, func.sum(BaseDocument.size_bytes))
                                         .group_by(BaseDocument.owner)).all())
    assert total is not None and total <= LIMITS.max_bytes
    assert all(v <= LIMITS.client_bytes for v in per_owner.values()), per_owner
