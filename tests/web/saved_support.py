"""Fixtures and helpers for the saved-plans and history tests: a fresh database on SQLite (a real
file) and on PostgreSQL (KVLEDGER_TEST_PG_URL; skipped without it), brought up by
`app.services.demo_data.prepare_database` exactly as `kvledger serve` does, an app and a client on it, and a
real uvicorn server in a subprocess for the concurrency and crash tests.

Import the fixtures into a test module: `from .saved_support import *`-style, by name.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.core.audit import LedgerRow
from app.db import repository as repo
from app.db.session import open_database, run_write
from app.services.demo_data import prepare_database
from app.settings import Settings
from app.web.app import create_app
from app.web.templating import RenderEvent

from .. import server
from .support import TestClient

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "data" / "vllm-logs"
PG_ENV = "KVLEDGER_TEST_PG_URL"
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
GIB = 1024**3
MIB = 1024**2
PLAN_DOC: dict[str, Any] = {"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"total": "80 GiB"}, "layout": {"tp": 4}}
XSS = "<img src=x onerror=alert(1)>"


def log_text(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


def _pg_admin_url() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set: no PostgreSQL server for this test")
    return url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database on this test's backend (dropped afterwards on PostgreSQL)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'db' / 'kvledger.sqlite3'}"
        return
    admin = create_engine(_pg_admin_url(), isolation_level="AUTOCOMMIT")
    name = f"kvl_web_{uuid.uuid4().hex[:16]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(_pg_admin_url()).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Settings on the fresh database, migrated by `prepare_database` (no demo data)."""
    value = Settings(database_url=database_url, demo_data=False)
    prepare_database(value)
    return value


def make_client(settings: Settings) -> TestClient:
    return TestClient(create_app(settings), raise_server_exceptions=True)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with make_client(settings) as test_client:
        yield test_client


@pytest.fixture
def app(client: TestClient) -> FastAPI:
    fastapi_app = client.app
    assert isinstance(fastapi_app, FastAPI)
    return fastapi_app


def last_render(renders: list[RenderEvent], template: str) -> RenderEvent:
    found = [event for event in renders if event.template == template and event.block is None]
    assert found, f"{template} was not rendered; rendered: {[e.template for e in renders]}"
    return found[-1]


def rows(n: int = 8, kv_gib: int = 60, free_drop_rank: int | None = None, graph_mib: int = 300) -> list[LedgerRow]:
    """Measured rows of `n` ranks (rank 0 slightly smaller), optionally one with less free memory."""
    return [
        LedgerRow(
            rank=str(i),
            total_bytes=80 * GIB,
            free_at_start_bytes=79 * GIB - (4 * GIB if i == free_drop_rank else 0),
            requested_bytes=72 * GIB,
            weights_bytes=8 * GIB,
            non_torch_bytes=512 * MIB,
            cuda_graph_bytes=graph_mib * MIB,
            activation_bytes=2 * GIB,
            kv_bytes=kv_gib * GIB - (MIB if i == 0 else 0),
            num_gpu_blocks=100_000 - (1 if i == 0 else 0),
            kv_tokens=None,
        )
        for i in range(n)
    ]


def add_deployment(settings: Settings, slug: str = "dep") -> None:
    db = open_database(settings)
    try:
        run_write(db.write, lambda s: repo.create_deployment(s, slug, f"Deployment {slug}", "m", "TP8", "H100"))
    finally:
        db.dispose()


def add_ledger(settings: Settings, slug: str, ledger: repo.LedgerIn) -> int:
    db = open_database(settings)
    try:
        return run_write(db.write, lambda s: repo.add_ledger(s, slug, ledger))
    finally:
        db.dispose()


def ledger(version: str = "0.20.1", note: str = "", **kwargs: Any) -> repo.LedgerIn:
    evidence: dict[str, str | int | float | None] = {"vllm_version": version, "block_size": 16, "tp": 8,
                                                     "gpu_type": "H100"}
    return repo.LedgerIn(kwargs.pop("ranks", rows()), evidence, None, note, kwargs.pop("log", "INFO start\n"))


# ---------------------------------------------------------------- a real server


def start_server(settings: Settings, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`kvledger serve` in a subprocess on these settings' database (ready when /p.json answers, or
    with a token, which the lists need, when a plan's address answers its 404)."""
    env = {"KVLEDGER_DATABASE_URL": settings.database_url, "KVLEDGER_DEMO_DATA": "1" if settings.demo_data else "0"}
    if settings.write_token:
        env["KVLEDGER_WRITE_TOKEN"] = settings.write_token
    return server.start_server(env, log_path, ready="/p.json?token=" + (settings.write_token or ""))


stop_server = server.stop_server


def with_token(settings: Settings, token: str) -> Settings:
    return replace(settings, write_token=token)
