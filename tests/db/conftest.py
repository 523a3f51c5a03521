"""Storage test fixtures: every test runs on SQLite (a real file) and on PostgreSQL.

The PostgreSQL cases need KVLEDGER_TEST_PG_URL (scripts/test.sh always exports it) and are
skipped without it. Each PostgreSQL case gets a freshly created, uniquely named database
(made through the URL's own database as the admin connection) that is dropped afterwards.
Databases are built with the real Alembic migrations, never ``create_all``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.db.session import make_engine, make_sessionmaker, upgrade_to_head

PG_ENV = "KVLEDGER_TEST_PG_URL"
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]

MakeDb = Callable[[], str]


def _pg_admin_url() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set: no PostgreSQL server for this test")
    return url


def _drop_pg_database(admin: Engine, name: str) -> None:
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A PostgreSQL database built once per test session by the real migrations; each test's
    migrated database is a copy of it (CREATE DATABASE ... TEMPLATE), much faster than
    migrating every time."""
    admin = create_engine(_pg_admin_url(), isolation_level="AUTOCOMMIT")
    name = f"kvl_template_{uuid.uuid4().hex[:16]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        upgrade_to_head(_pg_url(name))
        yield name
    finally:
        _drop_pg_database(admin, name)
        admin.dispose()


def _pg_url(name: str) -> str:
    return make_url(_pg_admin_url()).set(database=name).render_as_string(hide_password=False)


class Databases:
    """Fresh databases on one backend: ``empty()`` has no schema, ``migrated()`` is at head."""

    def __init__(self, backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.backend, self.tmp_path, self.request = backend, tmp_path, request
        self.created: list[str] = []
        self.counter = 0
        self.admin = create_engine(_pg_admin_url(), isolation_level="AUTOCOMMIT") if backend == "postgres" else None

    def _new(self, template: str | None) -> str:
        self.counter += 1
        if self.admin is None:
            return f"sqlite:///{self.tmp_path / f'db{self.counter}' / 'kvledger.sqlite3'}"
        name = f"kvl_test_{uuid.uuid4().hex[:16]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
        self.created.append(name)
        return _pg_url(name)

    def empty(self) -> str:
        return self._new(None)

    def migrated(self) -> str:
        if self.admin is None:
            url = self._new(None)
            upgrade_to_head(url)
            return url
        return self._new(self.request.getfixturevalue("pg_template"))

    def close(self) -> None:
        if self.admin is not None:
            for name in self.created:
                _drop_pg_database(self.admin, name)
            self.admin.dispose()


@pytest.fixture
def databases(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Databases]:
    dbs = Databases(backend, tmp_path, request)
    yield dbs
    dbs.close()


@pytest.fixture
def make_db(databases: Databases) -> MakeDb:
    """A factory of fresh databases already at head, on this test's backend."""
    return databases.migrated


@pytest.fixture
def empty_url(databases: Databases) -> str:
    """A fresh database with no schema at all."""
    return databases.empty()


@pytest.fixture
def db_url(databases: Databases) -> str:
    """A fresh database brought to head by the real migrations."""
    return databases.migrated()


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url, busy_timeout_ms=10_000, pool_size=60, max_overflow=10)
    yield eng
    eng.dispose()


@pytest.fixture
def read_factory(engine: Engine) -> sessionmaker[Session]:
    return make_sessionmaker(engine)


@pytest.fixture
def write_factory(engine: Engine) -> sessionmaker[Session]:
    return make_sessionmaker(engine, write=True)
