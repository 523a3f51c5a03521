"""base documents behind /plan?base=<id> what-if URLs (imported logs, pasted configs), content-addressed

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 12:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "base_document",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_base_document")),
    )


def downgrade() -> None:
    op.drop_table("base_document")
