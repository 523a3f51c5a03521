"""Saved plans, deployments and ledger history on the web: the router `app.web.app` includes.

The routes live in `plans` (permanent plan links, saving) and `deployments` (deployments,
ledgers, diffs, export/import); `app.web.deps` holds what they share (the database on app
state, one session per request, the write guard). This router's
lifespan opens the database when the server starts and disposes of it when it stops (FastAPI
merges a router's lifespan into the app's on include).
"""

from __future__ import annotations

from fastapi import APIRouter

from app.web.deps import lifespan
from app.web.saved import deployments, plans

#: Pasted logs arrive as form text fields; the body-size middleware caps the whole body, so the
#: multipart parser's own 1 MiB per-field default is lifted here.
FORM_LIMITS = {"max_part_size": 64 * 1024 * 1024}

router = APIRouter(lifespan=lifespan, form_limits=FORM_LIMITS)  # type: ignore[arg-type]
router.include_router(plans.router)
router.include_router(deployments.router)
