"""Engine and session factories (`Database`, `open_database`), and bringing a database to the
latest migration.

SQLite: every connection gets ``journal_mode=WAL``, ``foreign_keys=ON`` and ``busy_timeout``.
The driver's own implicit transaction handling is switched off and SQLAlchemy emits BEGIN
itself, so SAVEPOINTs work. A *write* session (``make_sessionmaker(engine, write=True)``)
starts with ``BEGIN IMMEDIATE``: it takes the write lock up front and waits (busy_timeout)
for other writers, instead of failing with "database is locked" when a read-then-write
transaction finds the database changed under it. Read sessions use a plain deferred BEGIN
and never block on writers (WAL).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.resources import resource_path
from app.settings import Settings

MIGRATIONS_DIR = resource_path("migrations")
ALEMBIC_INI = resource_path("alembic.ini")

WRITE_OPTION = "kvledger_write"
T = TypeVar("T")


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL, or None for in-memory / non-SQLite databases."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def ensure_sqlite_dir(url: str) -> None:
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)


def make_engine(url: str, busy_timeout_ms: int = 10_000, **kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite connections get WAL, foreign keys and a busy timeout."""
    if not is_sqlite(url):
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(url, **kwargs)
    ensure_sqlite_dir(url)
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see below)
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def make_sessionmaker(engine: Engine, *, write: bool = False) -> sessionmaker[Session]:
    """Sessions bound to ``engine``; ``write=True`` takes SQLite's write lock at BEGIN."""
    bind = engine.execution_options(**{WRITE_OPTION: True}) if write else engine
    return sessionmaker(bind=bind, expire_on_commit=False)


def is_retryable(exc: BaseException) -> bool:
    """True for SQLite's "database is locked"/"busy" errors, which are safe to retry."""
    return isinstance(exc, OperationalError) and any(
        word in str(exc.orig).lower() for word in ("database is locked", "database is busy")
    )


def run_write(factory: sessionmaker[Session], work: Callable[[Session], T], *, attempts: int = 5) -> T:
    """Run ``work`` in one transaction and commit; retry a few times if SQLite stays locked
    past its busy timeout. Domain errors and other failures roll back and propagate."""
    for attempt in range(1, attempts + 1):
        try:
            with factory() as session, session.begin():
                return work(session)
        except OperationalError as exc:
            if attempt == attempts or not is_retryable(exc):
                raise
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` that works from any working directory."""
    config = Config(str(ALEMBIC_INI)) if ALEMBIC_INI.exists() else Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["url"] = url
    return config


def upgrade_to_head(url: str) -> None:
    """Bring the database at ``url`` to the latest migration (creating a SQLite file's folder)."""
    ensure_sqlite_dir(url)
    command.upgrade(alembic_config(url), "head")


@dataclass(frozen=True)
class Database:
    """An engine and its read and write session factories (kept on `app.state`)."""

    engine: Engine
    read: sessionmaker[Session]
    write: sessionmaker[Session]

    def dispose(self) -> None:
        self.engine.dispose()


def open_database(settings: Settings) -> Database:
    """Engine and session factories for `settings.database_url` (the schema is not touched)."""
    url = settings.database_url
    kwargs: dict[str, Any] = {}
    if not is_sqlite(url) or sqlite_path(url) is not None:  # not for in-memory SQLite's pool
        kwargs = {"pool_size": 10, "max_overflow": 30, "pool_timeout": 60}
    engine = make_engine(url, busy_timeout_ms=settings.sqlite_busy_timeout_ms, **kwargs)
    return Database(engine, make_sessionmaker(engine), make_sessionmaker(engine, write=True))
