"""Saved plans, deployments and ledger history on the web: the router `app.web.app` includes.

The routes live in `saved_plans` (permanent plan links, saving) and `saved_deployments`
(deployments, ledgers, diffs, export/import); `saved_deps` holds what they share (the database
on app state, one session per request, the write guard, domain-error mapping). This router's
lifespan opens the database when the server starts and disposes of it when it stops (FastAPI
merges a router's lifespan into the app's on include).
"""

from __future__ import annotations

from fastapi import APIRouter

from app.web import saved_deployments, saved_plans
from app.web.saved_deps import lifespan

#: Pasted logs arrive as form text fields; the body-size middleware caps the whole body, so the
#: multipart parser's own 1 MiB per-field default is lifted here.
FORM_LIMITS = {"max_part_size": 64 * 1024 * 1024}

router = APIRouter(lifespan=lifespan, form_limits=FORM_LIMITS)  # type: ignore[arg-type]
router.include_router(saved_plans.router)
router.include_router(saved_deployments.router)
