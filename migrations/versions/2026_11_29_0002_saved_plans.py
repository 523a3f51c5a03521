"""saved plans, versioned through a parent link

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 10:40:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.migration_guard import refuse_data_loss

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "saved_plan",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("core_version", sa.String(length=50), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["parent_id"], ["saved_plan.id"], name=op.f("fk_saved_plan_parent_id_saved_plan")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saved_plan")),
        sa.UniqueConstraint("slug", name=op.f("uq_saved_plan_slug")),
    )
    op.create_index(op.f("ix_saved_plan_created_at"), "saved_plan", ["created_at"], unique=False)
    op.create_index(op.f("ix_saved_plan_parent_id"), "saved_plan", ["parent_id"], unique=False)


def downgrade() -> None:
    refuse_data_loss(("saved_plan",))
    op.drop_index(op.f("ix_saved_plan_parent_id"), table_name="saved_plan")
    op.drop_index(op.f("ix_saved_plan_created_at"), table_name="saved_plan")
    op.drop_table("saved_plan")
