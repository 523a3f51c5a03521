"""refuse UPDATE on ledgers, their rank rows and saved plans (append-only at the DB level)

SQLite: a BEFORE UPDATE trigger that RAISEs. PostgreSQL: one plpgsql function raising an
exception, attached as a BEFORE UPDATE row trigger to each table. Other dialects: no guard
(the repository offers no update either way).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 10:41:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("ledger", "ledger_rank", "saved_plan")
PG_FUNCTION = "kvledger_refuse_update"


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} rows are immutable: UPDATE refused'); END"
            )
    elif dialect == "postgresql":
        op.execute(
            f"CREATE FUNCTION {PG_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION '% rows are immutable: UPDATE refused', TG_TABLE_NAME "
            "USING ERRCODE = 'restrict_violation'; END $$"
        )
        for table in TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION {PG_FUNCTION}()"
            )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only")
    elif dialect == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {PG_FUNCTION}()")
