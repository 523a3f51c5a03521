"""SQLAlchemy 2 typed models. The Alembic migrations own the schema; these must match them
(a test runs ``alembic check``).

Ledgers and saved plans are append-only: the repository offers no update or delete, and the
migrations add triggers that refuse UPDATE (0003), DELETE and SQLite's INSERT OR REPLACE (0005)
on ``ledger``, ``ledger_rank`` and ``saved_plan``. Each plan and ledger carries a content hash
(``app.db.records``) every read verifies.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Tables that refuse UPDATE at the database level (see migrations 0003).
APPEND_ONLY_TABLES = ("ledger", "ledger_rank", "saved_plan")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Deployment(Base):
    """A named series of ledgers: one model on one layout and hardware."""

    __tablename__ = "deployment"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    model: Mapped[str] = mapped_column(String(300))
    layout: Mapped[str] = mapped_column(Text)
    hardware: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    ledgers: Mapped[list[Ledger]] = relationship(back_populates="deployment")


class Ledger(Base):
    """An immutable snapshot of measured per-rank rows with its evidence."""

    __tablename__ = "ledger"
    __table_args__ = (Index("ix_ledger_deployment_id_created_at", "deployment_id", "created_at", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The ledger's address (/l/{slug}): 128 random bits. NULL only on rows written around KV Ledger.
    slug: Mapped[str | None] = mapped_column(String(32), index=True, unique=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployment.id"))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    captured_at: Mapped[dt.date | None] = mapped_column(Date)
    note: Mapped[str] = mapped_column(Text, default="")
    # Evidence: what produced these numbers.
    vllm_version: Mapped[str | None] = mapped_column(String(100))
    vllm_commit: Mapped[str | None] = mapped_column(String(100))
    model_id: Mapped[str | None] = mapped_column(String(300))
    model_revision: Mapped[str | None] = mapped_column(String(100))
    config_sha256: Mapped[str | None] = mapped_column(String(64))
    quantization: Mapped[str | None] = mapped_column(String(100))
    kv_cache_dtype: Mapped[str | None] = mapped_column(String(50))
    block_size: Mapped[int | None] = mapped_column(Integer)
    tp: Mapped[int | None] = mapped_column(Integer)
    pp: Mapped[int | None] = mapped_column(Integer)
    dp: Mapped[int | None] = mapped_column(Integer)
    ep: Mapped[int | None] = mapped_column(Integer)
    gpu_type: Mapped[str | None] = mapped_column(String(200))
    driver_version: Mapped[str | None] = mapped_column(String(100))
    cuda_version: Mapped[str | None] = mapped_column(String(100))
    torch_version: Mapped[str | None] = mapped_column(String(100))
    graph_mode: Mapped[str | None] = mapped_column(String(100))
    max_num_batched_tokens: Mapped[int | None] = mapped_column(Integer)
    gpu_memory_utilization: Mapped[float | None] = mapped_column(Float)
    kv_cache_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # Engine figures the log stated (migration 0007).
    max_concurrency: Mapped[float | None] = mapped_column(Float)
    max_concurrency_tokens: Mapped[int | None] = mapped_column(Integer)
    # The log the numbers came from, capped (head and tail kept; see repository.cap_source_log).
    source_log: Mapped[str | None] = mapped_column(Text, deferred=True)
    source_log_bytes: Mapped[int | None] = mapped_column(BigInteger)
    source_log_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    source_log_sha256: Mapped[str | None] = mapped_column(String(64))
    content_hash: Mapped[str | None] = mapped_column(String(64))

    deployment: Mapped[Deployment] = relationship(back_populates="ledgers")
    ranks: Mapped[list[LedgerRank]] = relationship(
        back_populates="ledger", order_by="LedgerRank.ordinal", cascade="all, delete-orphan"
    )


class LedgerRank(Base):
    """One rank's measured rows in a ledger (bytes are integers; NULL where unknown)."""

    __tablename__ = "ledger_rank"
    __table_args__ = (
        UniqueConstraint("ledger_id", "ordinal"),
        UniqueConstraint("ledger_id", "rank"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ledger_id: Mapped[int] = mapped_column(ForeignKey("ledger.id", ondelete="CASCADE"))
    rank: Mapped[str] = mapped_column(String(100))
    ordinal: Mapped[int] = mapped_column(Integer)
    total_bytes: Mapped[int | None] = mapped_column(BigInteger)
    free_at_start_bytes: Mapped[int | None] = mapped_column(BigInteger)
    requested_bytes: Mapped[int | None] = mapped_column(BigInteger)
    weights_bytes: Mapped[int | None] = mapped_column(BigInteger)
    non_torch_bytes: Mapped[int | None] = mapped_column(BigInteger)
    cuda_graph_bytes: Mapped[int | None] = mapped_column(BigInteger)
    activation_bytes: Mapped[int | None] = mapped_column(BigInteger)
    kv_bytes: Mapped[int | None] = mapped_column(BigInteger)
    num_gpu_blocks: Mapped[int | None] = mapped_column(BigInteger)
    kv_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cuda_graph_estimate_bytes: Mapped[int | None] = mapped_column(BigInteger)  # migration 0007

    ledger: Mapped[Ledger] = relationship(back_populates="ranks")


class SavedPlan(Base):
    """A plan document with the summary the core computed for it. Never updated: an edit is a
    new row whose ``parent_id`` points at the version it came from."""

    __tablename__ = "saved_plan"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("saved_plan.id"), index=True)
    title: Mapped[str] = mapped_column(String(300), default="")
    document: Mapped[Any] = mapped_column(JSON)
    summary: Mapped[Any] = mapped_column(JSON)
    core_version: Mapped[str] = mapped_column(String(50))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    # Shown in the /p list only when the saver asked for it (default: unlisted).
    listed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    content_hash: Mapped[str | None] = mapped_column(String(64))


class BaseDocument(Base):
    """A plan document a what-if URL refers to by content address (`/plan?base=<id>`)."""

    __tablename__ = "base_document"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    document: Mapped[Any] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # The cap and expiry of unsaved documents (app.db.bases): who wrote it, its JSON size, and
    # when it was last written (a re-import of the same content renews it).
    owner: Mapped[str | None] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger, server_default="0")
    used_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), index=True)


class SimJob(Base):
    """A simulation job: the queue, the claim, its progress and cancel flag, and its result until
    `expires_at` (see app.db.jobs). Shared by every server worker; rows are transient."""

    __tablename__ = "sim_job"
    __table_args__ = (Index("ix_sim_job_state_created_at", "state", "created_at"),
                      Index("ix_sim_job_owner_created_at", "owner", "created_at"))

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(8), default="job")
    state: Mapped[str] = mapped_column(String(16), default="queued")
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    document: Mapped[Any] = mapped_column(JSON, nullable=True)
    meta: Mapped[Any] = mapped_column(JSON, nullable=True)
    result: Mapped[Any] = mapped_column(JSON, nullable=True)
    error: Mapped[Any] = mapped_column(JSON, nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    claimed_by: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))


class RateBucket(Base):
    """A token bucket per client key (`sim:<owner>`): the job-submission rate limit, shared by workers."""

    __tablename__ = "rate_bucket"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
