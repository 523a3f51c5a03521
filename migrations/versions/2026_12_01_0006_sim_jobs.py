"""simulation jobs in the database (every server worker shares the queue, caps and results), the
job-submission rate limit, and the cap and expiry of unsaved base documents

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 12:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sim_job",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("document", sa.JSON(), nullable=True),
        sa.Column("meta", sa.JSON(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sim_job")),
    )
    op.create_index("ix_sim_job_state_created_at", "sim_job", ["state", "created_at"])
    op.create_index("ix_sim_job_owner_created_at", "sim_job", ["owner", "created_at"])
    op.create_table(
        "rate_bucket",
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rate_bucket")),
    )
    with op.batch_alter_table("base_document") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("size_bytes", sa.BigInteger(), server_default="0", nullable=False))
        batch.add_column(sa.Column("used_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index(batch.f("ix_base_document_used_at"), ["used_at"])
    # Existing documents: their size now, last used when they were written.
    size = "length(CAST(document AS TEXT))"
    op.execute(sa.text(f"UPDATE base_document SET size_bytes = {size}, used_at = created_at"))


def downgrade() -> None:
    # Jobs, rate buckets and the new base-document columns are transient bookkeeping: nothing
    # a user saved is lost by dropping them.
    with op.batch_alter_table("base_document") as batch:
        batch.drop_index(batch.f("ix_base_document_used_at"))
        batch.drop_column("used_at")
        batch.drop_column("size_bytes")
        batch.drop_column("owner")
    op.drop_table("rate_bucket")
    op.drop_index("ix_sim_job_owner_created_at", table_name="sim_job")
    op.drop_index("ix_sim_job_state_created_at", table_name="sim_job")
    op.drop_table("sim_job")
