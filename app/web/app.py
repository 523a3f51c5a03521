"""The web application factory: `create_app(settings)` builds a fresh FastAPI app, no globals.

Settings are injected (tests pass their own; `serve` reads the environment once). The factory
builds the template environment, the static asset manifest and the base-document store and
keeps them on `app.state`; adds its one middleware (`app.web.edge`: client context, security
headers, gzip, the body-size cap); registers the error mapping; and
includes the routers of every wing: the plan pages and the JSON API (`app.web.plan`), saved
plans and deployments (`app.web.saved`), the simulator (`app.web.sim`).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import Request
from starlette.responses import Response

from app.resources import resource_path
from app.services.base_documents import DurableBaseStore, MemoryBaseStore, base_limits
from app.settings import Settings
from app.web import openapi
from app.web.assets import HTMX_JS, PLOTLY_JS, StaticAssets
from app.web.deps import WritePolicy
from app.web.edge import Edge
from app.web.errors import install as install_error_mapping
from app.web.isolation import Isolation
from app.web.plan.api import router as api_router
from app.web.plan.examples import base_documents
from app.web.plan.present import levers_flagged
from app.web.plan.routes import router as pages_router
from app.web.plan.views import PlanCache
from app.web.saved.routes import router as saved_router
from app.web.sim.routes import router as sim_router
from app.web.size.routes import router as size_router
from app.web.templating import Templates

TEMPLATES_DIR = resource_path("templates")
STATIC_DIR = resource_path("static")

@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """At shutdown, kill the children still reading logs (SIGTERM is never held up by a parse)."""
    try:
        yield
    finally:
        app.state.isolation.shutdown()
        grace = getattr(app.state, "exit_grace_s", None)
        if grace is not None:  # a `--workers N` process: never held at exit by a stuck thread
            timer = threading.Timer(grace, os._exit, args=(0,))
            timer.daemon = True
            timer.start()


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the KV Ledger web app for `settings` (read from the environment when omitted)."""
    settings = settings or Settings.from_env()
    app = FastAPI(
        title="KV Ledger",
        summary="Per-rank KV-cache capacity planning for vLLM deployments",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        # Pasted logs arrive as one text field; BodySizeLimit caps whole bodies, so the multipart
        # parser's own 1 MiB per-field default is raised to the log cap.
        form_limits={"max_part_size": settings.max_log_bytes},
        lifespan=_lifespan,
        dependencies=[WritePolicy],  # every route: same-origin writes, the token when one is set
    )
    assets = StaticAssets(STATIC_DIR)
    app.state.settings = settings
    app.state.assets = assets
    app.state.templates = Templates(
        TEMPLATES_DIR,
        {"static_url": assets.url, "HTMX_JS": HTMX_JS, "PLOTLY_JS": PLOTLY_JS, "levers_flagged": levers_flagged,
         "token_required": bool(settings.write_token)},
    )
    memory = MemoryBaseStore(fixed=base_documents() if settings.demo_data else None)
    app.state.bases = DurableBaseStore(memory, lambda: _write_sessions(app), base_limits(settings))
    app.state.plan_cache = PlanCache()
    app.state.isolation = Isolation(workers=1, cpu_limit_s=settings.import_time_limit_s,
                                    wall_limit_s=settings.import_wall_limit_s)

    @app.get("/static/{rest:path}", include_in_schema=False)
    async def static(request: Request, rest: str) -> Response:
        return assets.response(request, rest)

    install_error_mapping(app)
    app.include_router(pages_router)
    app.include_router(api_router)
    app.include_router(sim_router)
    app.include_router(size_router)
    app.include_router(saved_router)
    openapi.install(app)  # the error statuses and body schemas FastAPI cannot infer
    # who writes (per-client caps of base documents) and the plan memo of this app; the security
    # headers; gzip; the body caps: one layer (app.web.edge)
    app.add_middleware(Edge, max_body_bytes=settings.max_body_bytes, max_log_bytes=settings.max_log_bytes,
                       memo=app.state.plan_cache.memo, minimum_size=800, compresslevel=6)
    return app


def _write_sessions(app: FastAPI) -> sessionmaker[Session] | None:
    """The app's write session factory (opened on first use), or None when there is no storage."""
    from app.web.deps import database

    return database(app).write


MAX_WORKERS = 64


def worker_app() -> FastAPI:
    """The app of one `kvledger serve --workers N` process (settings from the environment, which
    every worker reads the same; jobs and caps are shared through the database)."""
    app = create_app(Settings.from_env())
    app.state.exit_grace_s = 2.0
    app.state.assets.precompress()
    freeze_startup_objects()
    return app


def serve(host: str, port: int, workers: int = 1) -> None:
    """Bring the database to the latest migration (seeding demo data into an empty one), then run
    the dashboard under uvicorn: `workers` processes (1 … MAX_WORKERS; settings from the environment)."""
    import uvicorn

    from app.services.demo_data import prepare_database

    if not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"--workers must be from 1 to {MAX_WORKERS}, got {workers}")
    settings = Settings.from_env()
    prepare_database(settings)
    # SIGTERM: requests get 5 s to finish, then are cancelled; the lifespan kills import children
    # and stops this process's simulations.
    options: dict[str, Any] = {"host": host, "port": port, "log_level": "info", "access_log": False,
                               "timeout_graceful_shutdown": 5}
    if workers > 1:
        uvicorn.run("app.web.app:worker_app", factory=True, workers=workers, **options)
        return
    app = create_app(settings)
    app.state.assets.precompress()
    freeze_startup_objects()
    uvicorn.run(app, **options)
    exit_past_stuck_threads()


def exit_past_stuck_threads(grace_s: float = 2.0) -> None:
    """After uvicorn stopped: a worker thread still inside a long computation would hold the
    interpreter's exit (it joins non-daemon threads) however long it runs. Wait `grace_s`, then
    leave without it (storage commits are transactions: nothing half-written survives)."""
    deadline = time.monotonic() + grace_s
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        logging.shutdown()
        os._exit(0)


def freeze_startup_objects() -> None:
    """Move everything start-up created (modules, the app, the catalogue) out of the garbage
    collector's reach: with ~125k such objects a full collection takes ~75 ms, a pause some
    request would wait through; after `gc.freeze` it scans only what requests create."""
    gc.collect()
    gc.freeze()
