"""deployments, ledgers and their per-rank rows

Revision ID: 0001
Revises:
Create Date: 2026-11-29 10:36:13+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.migration_guard import refuse_data_loss

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_EVIDENCE_STRINGS = (
    ("vllm_version", 100),
    ("vllm_commit", 100),
    ("model_id", 300),
    ("model_revision", 100),
    ("config_sha256", 64),
    ("quantization", 100),
    ("kv_cache_dtype", 50),
)
_RANK_ROWS = (
    "total_bytes",
    "free_at_start_bytes",
    "requested_bytes",
    "weights_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "activation_bytes",
    "kv_bytes",
    "num_gpu_blocks",
    "kv_tokens",
)


def upgrade() -> None:
    op.create_table(
        "deployment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("model", sa.String(length=300), nullable=False),
        sa.Column("layout", sa.Text(), nullable=False),
        sa.Column("hardware", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployment")),
        sa.UniqueConstraint("slug", name=op.f("uq_deployment_slug")),
    )
    op.create_table(
        "ledger",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("captured_at", sa.Date(), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        *(sa.Column(name, sa.String(length=length), nullable=True) for name, length in _EVIDENCE_STRINGS),
        sa.Column("block_size", sa.Integer(), nullable=True),
        sa.Column("tp", sa.Integer(), nullable=True),
        sa.Column("pp", sa.Integer(), nullable=True),
        sa.Column("dp", sa.Integer(), nullable=True),
        sa.Column("ep", sa.Integer(), nullable=True),
        sa.Column("gpu_type", sa.String(length=200), nullable=True),
        sa.Column("driver_version", sa.String(length=100), nullable=True),
        sa.Column("cuda_version", sa.String(length=100), nullable=True),
        sa.Column("torch_version", sa.String(length=100), nullable=True),
        sa.Column("graph_mode", sa.String(length=100), nullable=True),
        sa.Column("max_num_batched_tokens", sa.Integer(), nullable=True),
        sa.Column("gpu_memory_utilization", sa.Float(), nullable=True),
        sa.Column("kv_cache_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("source_log", sa.Text(), nullable=True),
        sa.Column("source_log_bytes", sa.BigInteger(), nullable=True),
        sa.Column("source_log_truncated", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["deployment_id"], ["deployment.id"], name=op.f("fk_ledger_deployment_id_deployment")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger")),
    )
    # The history list: one deployment's ledgers, newest first.
    op.create_index("ix_ledger_deployment_id_created_at", "ledger", ["deployment_id", "created_at", "id"], unique=False)
    op.create_table(
        "ledger_rank",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("ledger_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.String(length=100), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=True) for name in _RANK_ROWS),
        sa.ForeignKeyConstraint(
            ["ledger_id"], ["ledger.id"], name=op.f("fk_ledger_rank_ledger_id_ledger"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_rank")),
        sa.UniqueConstraint("ledger_id", "ordinal", name=op.f("uq_ledger_rank_ledger_id_ordinal")),
        sa.UniqueConstraint("ledger_id", "rank", name=op.f("uq_ledger_rank_ledger_id_rank")),
    )


def downgrade() -> None:
    refuse_data_loss(("ledger_rank", "ledger", "deployment"))
    op.drop_table("ledger_rank")
    op.drop_index("ix_ledger_deployment_id_created_at", table_name="ledger")
    op.drop_table("ledger")
    op.drop_table("deployment")
