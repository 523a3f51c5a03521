"""The simulator: its page, its jobs (progress, cancel, results) and its JSON API.

Pages: GET /sim (the form; the plan page's what-if query selects that plan's binding-rank
pool), POST /sim/jobs (start a job, 303 to its page), GET /sim/jobs/{id} (progress polled by
htmx every 500 ms on the `job` block, which stops polling once the job has finished; without
JavaScript a <meta refresh> reloads it), POST /sim/jobs/{id}/cancel. Every page has a .json
twin. API under /api/v1: POST /simulate (synchronous, small runs), POST /sim/jobs,
GET /sim/jobs/{id}, POST /sim/jobs/{id}/cancel.

Jobs live in the database (`app.services.sim_jobs.JobRunner`, kept on `app.state.sim_jobs`,
created on first use; the router's lifespan stops this process's running jobs at shutdown), so
any server worker answers for any job. Work per request is capped by `Settings.sim_max_work`
(422 naming the field); the caps, per-client fairness and rate limit (429 with Retry-After) by
`app.db.jobs` with the `Settings.sim_*` values. A client is its address (`client_key`).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Body, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from app.core.errors import InputError
from app.core.sim.cost import CostModel
from app.core.sim.doc_schema import simulation_document_schema
from app.services import clients
from app.services.sim_jobs import JobRunner, JobView, limits_of
from app.services.simulation import resolve_pool
from app.web import htmx, querystring
from app.web.deps import database
from app.web.openapi import body_schema, errors, register_body
from app.web.plan import opening, views
from app.web.querystring import page_url
from app.web.responses import expect_page, render
from app.web.sim import charts, forms

#: POST /api/v1/simulate answers within the request: at most this much work (seed 002's ramp).
SYNC_MAX_WORK = 20_000
STATE_WORDS = {"queued": "Queued", "running": "Running", "done": "Done", "failed": "Failed",
               "cancelled": "Cancelled"}
WORKER_HEADER = "X-KVLedger-Worker"
#: htmx's "stop polling" status.
STOP_POLLING = 286
_RUNNER_LOCK = threading.Lock()


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    runner = getattr(app.state, "sim_jobs", None)
    if isinstance(runner, JobRunner):
        runner.shutdown()


router = APIRouter(lifespan=_lifespan)
pages = APIRouter(include_in_schema=False)
api = APIRouter(prefix="/api/v1", tags=["simulation"])
register_body("SimulationDocument", simulation_document_schema())

SimBody = Annotated[
    dict[str, Any],
    Body(description="A simulation document, the same JSON as `kvledger simulate`.",
         examples=[{"pool": {"blocks": 1783, "block_size": 16},
                    "workload": {"shared_prefix_tokens": 512, "shared_fraction": 0.7, "requests_per_level": 500},
                    "ramp": [1, 4, 16, 32], "seed": 2}]),
]


def runner_of(request: Request) -> JobRunner:
    """The app's job runner (created on first use, with the app's work cap)."""
    app, state = request.app, request.app.state
    with _RUNNER_LOCK:
        runner = getattr(state, "sim_jobs", None)
        if not isinstance(runner, JobRunner):
            runner = JobRunner(lambda: database(app), max_work=state.settings.sim_max_work,
                               limits=limits_of(state.settings))
            state.sim_jobs = runner
        return runner


def client_key(request: Request) -> str:
    """Who a job belongs to for the per-client caps and rate limit (app.services.clients)."""
    return clients.key_of(request.client.host if request.client is not None else "")


def _job(request: Request, job_id: str) -> JobView:
    job = runner_of(request).get(job_id)
    if job is None:
        raise HTTPException(404)
    return job


def _plan_doc(request: Request, plan_query: Mapping[str, str]) -> dict[str, Any] | None:
    if not plan_query:
        return None
    try:
        base_doc = views.resolve_base(plan_query, request.app.state.bases)
    except InputError as exc:
        raise exc.under("plan") from None
    # The plan page's own document, at the layout it opens at when the query states no TP/PP (its
    # note says so): simulate that plan's pool, not the TP1 one the bare document would give.
    try:
        return opening.opened_document(plan_query, base_doc)[0]
    except InputError as exc:
        raise exc.under("plan") from None


def _pool_context(request: Request, plan_query: Mapping[str, str]) -> dict[str, Any]:
    """The plan's binding-rank pool (or why there is none) and the scheduler placeholders."""
    placeholders = {"max_num_seqs": "256 (vLLM default)", "max_num_batched_tokens": "8192 (vLLM default)"}
    illustrative = {"cost_placeholders": {k: f"{v:.3g} (illustrative)" for k, v in asdict(CostModel()).items()},
                    "cost_source": "illustrative defaults: an 8B bf16 model on a ~1 TB/s card; calibrate against "
                                   "your engine"}
    if not plan_query:
        return {"pool": None, "pool_error": None, "scheduler_placeholders": placeholders, **illustrative}
    try:
        resolved = resolve_pool({"plan": _plan_doc(request, plan_query)})
    except InputError as exc:  # named as the request wrote the key (querystring.as_written)
        error = str(querystring.as_written(exc, request.query_params.multi_items()))
        return {"pool": None, "pool_error": error, "scheduler_placeholders": placeholders, **illustrative}
    pool, scheduler = resolved["pool"], resolved["scheduler"]
    return {
        "pool": {**pool, "source": resolved["pool_source"]},
        "pool_error": None,
        "scheduler_placeholders": {k: f"{scheduler[k]} (the plan's)" for k in placeholders},
        "cost_placeholders": {k: f"{v:.3g} (estimated)" for k, v in resolved["cost_model"].items()},
        "cost_source": resolved["cost_source"],
    }


def _form_context(request: Request, values: Mapping[str, str], plan_query: Mapping[str, str]) -> dict[str, Any]:
    return {
        "nav": "sim", "form": dict(values), "plan_query": dict(plan_query), "error": None, "field_errors": {},
        "plan_url": page_url("/plan", plan_query), "reset_url": page_url("/sim", plan_query),
        "json_url": page_url("/sim.json", forms.rerun_query(values, plan_query)),
        "max_work": request.app.state.settings.sim_max_work, **_pool_context(request, plan_query),
    }


def _job_context(job: JobView) -> dict[str, Any]:
    rerun = job.meta.get("rerun")
    return {
        "nav": "sim", "job": job, "state_words": STATE_WORDS[job.state],
        "job_url": f"/sim/jobs/{job.id}", "json_url": f"/sim/jobs/{job.id}.json",
        "cancel_url": f"/sim/jobs/{job.id}/cancel",
        "rerun_url": page_url("/sim", rerun) if isinstance(rerun, Mapping) else "/sim",
        **charts.result_context(job.result),
    }


def _api_headers(request: Request, **more: str) -> dict[str, str]:
    """No caching, and which server process answered (a random tag; `--workers N` serves jobs from any)."""
    return {"Cache-Control": "no-store", WORKER_HEADER: runner_of(request).tag, **more}


def _job_json(job: JobView) -> dict[str, Any]:
    return {**job.as_json(), "url": f"/sim/jobs/{job.id}", "status_url": f"/api/v1/sim/jobs/{job.id}"}


def _render_job(request: Request, job: JobView) -> Response:
    spec = expect_page(request, "pages/sim_job.html", {"nav": "sim"}, fragment=("job",))
    response = render(request, spec, _job_context(job))
    response.headers["Cache-Control"] = "no-store"
    return response


# -- pages ------------------------------------------------------------------------------------


@pages.get("/sim")
def sim_page(request: Request) -> Response:
    items = request.query_params.multi_items()
    values, plan_query = forms.form_values(items), forms.plan_query_of(items)
    context = _form_context(request, values, plan_query)
    spec = expect_page(request, "pages/sim.html", context)
    return render(request, spec, status_code=422 if context["pool_error"] else 200)


@pages.get("/sim.json")
def sim_page_json(request: Request) -> JSONResponse:
    """The document the form would submit, and the pool it simulates."""
    items = request.query_params.multi_items()
    values, plan_query = forms.form_values(items), forms.plan_query_of(items)
    doc = forms.document(values, _plan_doc(request, plan_query))
    resolved = resolve_pool(doc)
    return JSONResponse({"document": doc, "pool": resolved["pool"], "pool_source": resolved.get("pool_source"),
                         "max_work": request.app.state.settings.sim_max_work, "url": page_url("/sim", plan_query)})


async def _upload_bytes(form: Mapping[str, Any]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for side in ("prompt", "output"):
        upload = form.get(f"{side}_file")
        if isinstance(upload, UploadFile) and upload.filename:
            out[side] = await upload.read()
    return out


def _decode_uploads(files: Mapping[str, bytes]) -> dict[str, str]:
    """Uploaded lengths files as text, keyed like the pasted-lengths fields they replace."""
    out: dict[str, str] = {}
    for side, data in files.items():
        try:
            out[f"{side}_lengths"] = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InputError(f"workload.{side}_tokens", "the uploaded file is not UTF-8 text") from None
    return out


def _start_from_form(request: Request, values: Mapping[str, str], plan_query: Mapping[str, str],
                     files: Mapping[str, bytes]) -> Response:
    expect_page(request, "pages/sim.html", lambda: _form_context(request, values, plan_query), field_key=forms.form_key)
    doc = forms.document(values, _plan_doc(request, plan_query), _decode_uploads(files))
    job = runner_of(request).submit(doc, client_key(request), meta={"rerun": forms.rerun_query(values, plan_query)})
    return RedirectResponse(f"/sim/jobs/{job.id}", status_code=303)


@pages.post("/sim/jobs")
async def start_job(request: Request) -> Response:
    """Start a job from the form (multipart: lengths may be uploaded); 303 to its page."""
    async with request.form(max_files=2, max_fields=200) as form:
        items = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
        files = await _upload_bytes(form)
    values, plan_query = forms.form_values(items), forms.plan_query_of(items)
    return await run_in_threadpool(_start_from_form, request, values, plan_query, files)


@pages.get("/sim/jobs/{job_id}.json")
def job_json(request: Request, job_id: str) -> JSONResponse:
    return JSONResponse(_job_json(_job(request, job_id)), headers={"Cache-Control": "no-store"})


@pages.get("/sim/jobs/{job_id}")
def job_page(request: Request, job_id: str) -> Response:
    job = runner_of(request).get(job_id)
    if job is None and htmx.details(request).request:
        # A page still polling a job the server no longer has (restart, expiry): htmx stops
        # polling on 286 and swaps in the explanation.
        spec = expect_page(request, "pages/sim_job.html", {"nav": "sim"}, fragment=("job",))
        return render(request, spec, {"job": None}, status_code=STOP_POLLING)
    if job is None:
        raise HTTPException(404)
    return _render_job(request, job)


@pages.post("/sim/jobs/{job_id}/cancel")
def cancel_job_page(request: Request, job_id: str) -> Response:
    """Cancel, then the job block (htmx) or back to the job page (a plain form post)."""
    job = runner_of(request).cancel(job_id)
    if job is None:
        raise HTTPException(404)
    if htmx.details(request).request:
        return _render_job(request, job)
    return RedirectResponse(f"/sim/jobs/{job.id}", status_code=303)


# -- JSON API ---------------------------------------------------------------------------------


@api.post("/simulate", summary="Run a small simulation now; the same JSON as `kvledger simulate --json`",
          openapi_extra=body_schema("SimulationDocument"), responses=errors(429, 503))
def simulate_now(request: Request, doc: SimBody) -> JSONResponse:
    max_work = min(request.app.state.settings.sim_max_work, SYNC_MAX_WORK)
    result = runner_of(request).run_now(doc, max_work, hint="; POST larger runs to /api/v1/sim/jobs",
                                        owner=client_key(request))
    return JSONResponse(result)


@api.post("/sim/jobs", status_code=202, summary="Start a simulation job; poll its status_url",
          openapi_extra=body_schema("SimulationDocument"), responses=errors(429, 503))
def start_job_api(request: Request, doc: SimBody) -> JSONResponse:
    job = runner_of(request).submit(doc, client_key(request))
    return JSONResponse(_job_json(job), status_code=202,
                        headers=_api_headers(request, Location=f"/api/v1/sim/jobs/{job.id}"))


@api.get("/sim/jobs/{job_id}", summary="A job's state, progress, and result or error", responses=errors(503))
def get_job_api(request: Request, job_id: str) -> JSONResponse:
    return JSONResponse(_job_json(_job(request, job_id)), headers=_api_headers(request))


@api.post("/sim/jobs/{job_id}/cancel", summary="Cancel a queued or running job", responses=errors(503))
def cancel_job_api(request: Request, job_id: str) -> JSONResponse:
    job = runner_of(request).cancel(job_id)
    if job is None:
        raise HTTPException(404)
    return JSONResponse(_job_json(job), headers=_api_headers(request))


router.include_router(pages)
router.include_router(api)
