"""Bringing the database up on start, and a little demo data for an empty database.

`prepare_database(settings)` runs the Alembic migrations to head and, when `settings.demo_data`
is on and the database holds no saved plan and no deployment, stores three saved plans (one of
them a new version of another) and one deployment with three ledgers across vLLM upgrades,
built from real public start-up logs shipped in `app/data/demo/` (sources in its README). The
three logs are of different models and layouts (no public source has one deployment's sequence),
so the deployment is labelled illustrative in its name and model fields, which its pages show.
Everything is seeded in one transaction: two servers starting at once seed at most once.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import __version__ as CORE_VERSION
from app.db import repository as repo
from app.db.models import Deployment, SavedPlan
from app.db.session import is_sqlite, run_write, sqlite_path, upgrade_to_head
from app.services import plans
from app.services.ledger_import import ledger_from_log
from app.settings import Settings

DEMO_DIR = Path(__file__).resolve().parents[1] / "data" / "demo"
DEMO_DEPLOYMENT = repo.DeploymentRecord(
    0, "demo-3090-box", "Demo (illustrative): RTX 3090 boxes across vLLM upgrades",
    "illustrative: three public logs of different models and layouts, not one deployment's history",
    "4 workers, tensor parallel", "NVIDIA GeForce RTX 3090, 24 GB (23.58 GiB)", dt.datetime(2025, 4, 1, tzinfo=dt.UTC),
)
# (log file, date it was captured, note)
DEMO_LEDGERS: tuple[tuple[str, dt.date, str], ...] = (
    ("07-v083-3090-mp-util099.log", dt.date(2025, 4, 12),
     "vLLM 0.8 (V0 engine), gpu_memory_utilization 0.99: weights leave little KV room. "
     "Public log from vllm-project/vllm PR 14447."),
    ("18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log", dt.date(2025, 10, 2),
     "vLLM 0.10/0.11, Qwen3-VL-30B-A3B on four 3090s (TP4). Public log."),
    ("21-v021plus-6x3090-tp4-cg-profiling.log", dt.date(2026, 5, 14),
     "vLLM 0.21+: CUDA-graph memory is profiled and subtracted from the budget. Public log."),
)
LLAMA_TP4: dict[str, Any] = {
    "title": "Llama-3.1-70B, TP4 on H100 80GB",
    "model": {"catalogue": "llama-3.1-70b"},
    "gpu": {"name": "H100 80GB"},
    "layout": {"tp": 4},
}
LLAMA_TP4_085: dict[str, Any] = {
    **LLAMA_TP4,
    "title": "Llama-3.1-70B, TP4, utilization 0.85",
    "engine": {"gpu_memory_utilization": 0.85},
}
QWEN_FP8: dict[str, Any] = {
    "title": "Qwen3-8B on one 24 GiB GPU, FP8 KV cache",
    "model": {"catalogue": "qwen3-8b"},
    "gpu": {"total": "24 GiB"},
    "engine": {"kv_cache_dtype": "fp8"},
}


def prepare_database(settings: Settings) -> None:
    """Migrate `settings.database_url` to head; seed the demo data into an empty database.
    An in-memory SQLite URL is left alone: each connection would see its own empty database."""
    if is_sqlite(settings.database_url) and sqlite_path(settings.database_url) is None:
        return
    upgrade_to_head(settings.database_url)
    if settings.demo_data:
        seed_demo(settings)


def _is_empty(session: Session) -> bool:
    plans = session.scalar(select(func.count(SavedPlan.id))) or 0
    deployments = session.scalar(select(func.count(Deployment.id))) or 0
    return plans == 0 and deployments == 0


def demo_ledgers() -> list[tuple[repo.LedgerIn, dt.datetime]]:
    out = []
    for name, captured, note in DEMO_LEDGERS:
        text = (DEMO_DIR / name).read_text(encoding="utf-8")
        ledger, _ = ledger_from_log(text, note=note, captured_at=captured)
        created = dt.datetime.combine(captured, dt.time(12, 0), tzinfo=dt.UTC)
        out.append((ledger, created))
    return out


def seed_demo(settings: Settings) -> bool:
    """Store the demo data if the database is empty; True when it did."""
    from app.db.session import open_database

    db = open_database(settings)
    with db.read() as session:
        if not _is_empty(session):  # the usual case on every start after the first: no work
            db.dispose()
            return False
    computed = [(doc, plans.run_plan(doc)) for doc in (LLAMA_TP4, LLAMA_TP4_085, QWEN_FP8)]
    ledgers = demo_ledgers()

    def work(session: Session) -> bool:
        if not _is_empty(session):
            return False
        d = DEMO_DEPLOYMENT
        repo.create_deployment(session, d.slug, d.name, d.model, d.layout, d.hardware, created_at=d.created_at)
        for ledger, created in ledgers:
            repo.add_ledger(session, d.slug, ledger, created_at=created)
        # The demo plans are listed (shown on /p); a plan someone saves is unlisted unless they ask.
        first = repo.save_plan(session, computed[0][0], computed[0][1], CORE_VERSION, LLAMA_TP4["title"], listed=True)
        repo.save_plan(session, computed[1][0], computed[1][1], CORE_VERSION, LLAMA_TP4_085["title"],
                       parent_slug=first, listed=True)
        repo.save_plan(session, computed[2][0], computed[2][1], CORE_VERSION, QWEN_FP8["title"], listed=True)
        return True

    try:
        return run_write(db.write, work)
    except repo.Conflict:  # another server seeded first
        return False
    finally:
        db.dispose()
