"""tamper evidence and private addresses: content hashes, DELETE and REPLACE refused, listed plans, ledger slugs

Columns: ``saved_plan.content_hash`` and ``saved_plan.listed`` (default false: a plan is in the
/p list only when its saver asked); ``ledger.slug`` (its address, 128 random bits),
``ledger.source_log_sha256`` and ``ledger.content_hash``. Existing rows get their slug and hash
here (a data migration; the UPDATE guard of 0003 is lifted for it and put back) and stay
unlisted.

Triggers, besides 0003's UPDATE guard. SQLite: BEFORE DELETE raises on ``ledger``,
``ledger_rank`` and ``saved_plan``; BEFORE INSERT raises when the new row would collide with a
stored one (``INSERT OR REPLACE`` deletes the old row without firing DELETE triggers unless
recursive_triggers is on, so the collision is refused before it happens). PostgreSQL: one
plpgsql function raising on DELETE (row trigger) and TRUNCATE (statement trigger); it has no
REPLACE (``ON CONFLICT DO UPDATE`` is an UPDATE, refused by 0003).

Downgrade drops the addresses and hashes (old /l/{slug} links stop working), so it refuses
while ledgers or plans are stored unless forced (``app.db.migration_guard``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 12:50:00+00:00
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from alembic import op

from app.core.audit import LATER_ROW_FIELDS, ROW_FIELDS
from app.db import records
from app.db.migration_guard import refuse_data_loss

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("ledger", "ledger_rank", "saved_plan")
PG_FUNCTION = "kvledger_refuse_delete"
#: Which stored row a new one must not collide with (SQLite's REPLACE guard).
COLLISION = {
    "saved_plan": "id = NEW.id OR slug = NEW.slug",
    "ledger": "id = NEW.id OR slug = NEW.slug",
    "ledger_rank": "id = NEW.id OR (ledger_id = NEW.ledger_id AND (ordinal = NEW.ordinal OR rank = NEW.rank))",
}
# 0003's UPDATE guard, lifted while existing rows get their hash.
SQLITE_UPDATE_GUARD = (
    "CREATE TRIGGER {t}_append_only BEFORE UPDATE ON {t} "
    "BEGIN SELECT RAISE(ABORT, '{t} rows are immutable: UPDATE refused'); END"
)


def upgrade() -> None:
    op.add_column("saved_plan", sa.Column("listed", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column("saved_plan", sa.Column("content_hash", sa.String(length=64), nullable=True))
    op.add_column("ledger", sa.Column("slug", sa.String(length=32), nullable=True))
    op.add_column("ledger", sa.Column("source_log_sha256", sa.String(length=64), nullable=True))
    op.add_column("ledger", sa.Column("content_hash", sa.String(length=64), nullable=True))
    op.create_index(op.f("ix_ledger_slug"), "ledger", ["slug"], unique=True)
    _with_update_guard_lifted(_hash_existing_rows)
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} rows are immutable: DELETE refused'); END"
            )
            op.execute(
                f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
                f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {COLLISION[table]}) "
                f"BEGIN SELECT RAISE(ABORT, '{table} rows are immutable: REPLACE refused'); END"
            )
    elif dialect == "postgresql":
        op.execute(
            f"CREATE FUNCTION {PG_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION '% rows are immutable: % refused', TG_TABLE_NAME, TG_OP "
            "USING ERRCODE = 'restrict_violation'; END $$"
        )
        for table in TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION {PG_FUNCTION}()"
            )
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION {PG_FUNCTION}()"
            )


def _with_update_guard_lifted(work: Any) -> None:
    dialect = op.get_bind().dialect.name
    for table in ("ledger", "saved_plan"):
        if dialect == "sqlite":
            op.execute(f"DROP TRIGGER {table}_append_only")
        elif dialect == "postgresql":
            op.execute(f"ALTER TABLE {table} DISABLE TRIGGER {table}_append_only")
    work()
    for table in ("ledger", "saved_plan"):
        if dialect == "sqlite":
            op.execute(SQLITE_UPDATE_GUARD.format(t=table))
        elif dialect == "postgresql":
            op.execute(f"ALTER TABLE {table} ENABLE TRIGGER {table}_append_only")


def _plan_table() -> sa.TableClause:
    return sa.table(
        "saved_plan",
        sa.column("id", sa.Integer()),
        sa.column("slug", sa.String()),
        sa.column("parent_id", sa.Integer()),
        sa.column("title", sa.String()),
        sa.column("document", sa.JSON()),
        sa.column("summary", sa.JSON()),
        sa.column("core_version", sa.String()),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("listed", sa.Boolean()),
        sa.column("content_hash", sa.String()),
    )


def _ledger_table() -> sa.TableClause:
    kinds = {str: sa.String(), int: sa.BigInteger(), float: sa.Float()}
    return sa.table(
        "ledger",
        sa.column("id", sa.Integer()),
        sa.column("slug", sa.String()),
        sa.column("deployment_id", sa.Integer()),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("captured_at", sa.Date()),
        sa.column("note", sa.Text()),
        # the evidence columns as of this revision (later ones, e.g. 0007's, do not exist yet)
        *(sa.column(key, kinds[kind]) for key, (kind, _) in records.EVIDENCE_TYPES.items()
          if key not in records.LATER_EVIDENCE_KEYS),
        sa.column("source_log", sa.Text()),
        sa.column("source_log_bytes", sa.BigInteger()),
        sa.column("source_log_truncated", sa.Boolean()),
        sa.column("source_log_sha256", sa.String()),
        sa.column("content_hash", sa.String()),
    )


def _hash_existing_rows() -> None:
    bind = op.get_bind()
    plans = _plan_table()
    slugs = dict(bind.execute(sa.select(plans.c.id, plans.c.slug)).all())
    for row in bind.execute(sa.select(plans)).all():
        plan = SimpleNamespace(**row._asdict())
        plan.listed = False
        digest = records.plan_hash(plan, slugs.get(row.parent_id))
        bind.execute(sa.update(plans).where(plans.c.id == row.id).values(content_hash=digest))
    ledgers = _ledger_table()
    row_fields = [name for name in ROW_FIELDS if name not in LATER_ROW_FIELDS]  # the columns of this revision
    ranks = sa.table("ledger_rank", sa.column("ledger_id"), sa.column("rank"), sa.column("ordinal"),
                     *(sa.column(name) for name in row_fields))
    deployments = dict(bind.execute(sa.text("SELECT id, slug FROM deployment")).all())
    for row in bind.execute(sa.select(ledgers)).all():
        ledger = SimpleNamespace(**row._asdict())
        ledger.slug = _ledger_slug()
        ledger.source_log_sha256 = records.sha256_text(row.source_log)
        rank_rows = bind.execute(
            sa.select(ranks).where(ranks.c.ledger_id == row.id).order_by(ranks.c.ordinal)
        ).all()
        content = [{"rank": r.rank, "ordinal": r.ordinal, **{n: getattr(r, n) for n in row_fields}} for r in rank_rows]
        digest = records.ledger_hash(ledger, deployments[row.deployment_id], content)
        bind.execute(
            sa.update(ledgers).where(ledgers.c.id == row.id).values(
                slug=ledger.slug, source_log_sha256=ledger.source_log_sha256, content_hash=digest
            )
        )


def _ledger_slug() -> str:
    """As `app.db.repository.new_ledger_slug`: 128 random bits, never all digits."""
    while True:
        slug = secrets.token_urlsafe(16)
        if not slug.isdigit():
            return slug


def downgrade() -> None:
    refuse_data_loss(
        ("ledger", "saved_plan"),
        "drops the content hashes, listed flags and ledger addresses of stored rows (old /l/{slug} links stop working)",
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_replace")
    elif dialect == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {PG_FUNCTION}()")
    op.drop_index(op.f("ix_ledger_slug"), table_name="ledger")
    for table, column in (("ledger", "content_hash"), ("ledger", "source_log_sha256"), ("ledger", "slug"),
                          ("saved_plan", "content_hash"), ("saved_plan", "listed")):
        op.drop_column(table, column)
