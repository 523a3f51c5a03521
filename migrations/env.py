"""Alembic environment: the URL comes from the caller, the -x option or app settings."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, pool, text

from app.db.models import Base
from app.db.session import WRITE_OPTION, is_sqlite, make_engine
from app.settings import Settings

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    given = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    if given:
        return str(given)
    return Settings.from_env().database_url


# Several app servers may upgrade at once on start. PostgreSQL: the whole upgrade runs in one
# transaction that first takes this advisory lock; SQLite: in one BEGIN IMMEDIATE transaction.
# Either way a second upgrader waits, then finds the schema current.
PG_LOCK_KEY = 0x6B766C6564676572  # "kvledger"


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        transactional_ddl=True,
        compare_type=True,
    )


def _run(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_LOCK_KEY})
        context.run_migrations()


def run_migrations_offline() -> None:
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=is_sqlite(url),
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_url(), poolclass=pool.NullPool)
    try:
        with engine.execution_options(**{WRITE_OPTION: True}).connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


# Configure logging only when run from the alembic command line, not from the app or tests.
if config.config_file_name is not None and "url" not in config.attributes:
    fileConfig(config.config_file_name, disable_existing_loggers=False)

if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
