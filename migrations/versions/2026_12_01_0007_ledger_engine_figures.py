"""ledgers keep every engine figure a log states: vLLM's maximum concurrency (and the request
length it is stated for) on the ledger, the CUDA-graph estimate beside the actual on each rank

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 16:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.migration_guard import FORCE_ENV, DataLossRefused, forced

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("ledger", sa.Column("max_concurrency", sa.Float(), nullable=True))
    op.add_column("ledger", sa.Column("max_concurrency_tokens", sa.Integer(), nullable=True))
    op.add_column("ledger_rank", sa.Column("cuda_graph_estimate_bytes", sa.BigInteger(), nullable=True))


_ADDED = (("ledger", "max_concurrency"), ("ledger", "max_concurrency_tokens"),
          ("ledger_rank", "cuda_graph_estimate_bytes"))


def downgrade() -> None:
    if not forced():
        bind = op.get_bind()
        held = {f"{t}.{c}": int(bind.execute(sa.text(f"SELECT COUNT(*) FROM {t} WHERE {c} IS NOT NULL")).scalar_one())
                for t, c in _ADDED}
        held = {k: n for k, n in held.items() if n}
        if held:
            rows = ", ".join(f"{k}: {n:,} rows" for k, n in held.items())
            raise DataLossRefused(
                f"this downgrade drops columns that hold data ({rows}); nothing was changed. Back the database "
                f"up first, then force it with `alembic -x force=yes downgrade …` or {FORCE_ENV}=1."
            )
    for table, column in reversed(_ADDED):
        op.drop_column(table, column)
