"""Deployments and their ledgers: list and create, the history page (chart, alerts, ledgers),
importing a log as a new ledger, one ledger, the diff of two, export and import. Every page has
a `.json` twin; the API twins of the writes live under /api/v1/deployments.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from typing import Annotated, Any

from fastapi import APIRouter, Body, File, Form, Query, Request, UploadFile
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

from app.core.errors import InputError
from app.db import repository as repo
from app.services import deployments, ledger_import
from app.services.deployments import deployment_json, diff_json, history_json, ledger_json
from app.web.deps import ListGuard, SessionDep, WriterDep, database
from app.web.openapi import errors
from app.web.plan import workflows
from app.web.responses import expect_page, render
from app.web.saved import present

router = APIRouter()
#: What the two deployment-creating operations can answer besides 201 (the error body is
#: `{"error": {"field", "message"}}`); declared so OpenAPI states it.
CREATE_ERRORS: dict[int | str, dict[str, Any]] = {
    **errors(401, 403, 422, 503), 409: {**errors(409)[409], "description": "the slug is taken (error.field = slug)"}}


class DeploymentBody(BaseModel):
    slug: str = Field(description="short name in URLs: a-z, 0-9, '.', '_', '-'")
    name: str
    model: str = ""
    layout: str = ""
    hardware: str = ""


def _deployment_in(body: DeploymentBody | dict[str, str]) -> deployments.DeploymentIn:
    data = body.model_dump() if isinstance(body, DeploymentBody) else body
    fields = ("slug", "name", "model", "layout", "hardware")
    return deployments.DeploymentIn(**{k: str(data.get(k, "")) for k in fields})


def _list_context(request: Request, session: Session) -> dict[str, Any]:
    records = repo.list_deployments(session)
    return present.deployments_context(request, records)


# ---------------------------------------------------------------- deployments


@router.get("/d", include_in_schema=False, dependencies=[ListGuard])
def deployments_page(request: Request, session: SessionDep) -> Response:
    return render(request, expect_page(request, "pages/deployments.html", _list_context(request, session)))


@router.get("/d.json", include_in_schema=False, dependencies=[ListGuard])
@router.get("/api/v1/deployments", tags=["api"], summary="Every deployment", dependencies=[ListGuard],
            responses=errors(401, 503))
def deployments_json(session: SessionDep) -> JSONResponse:
    records = repo.list_deployments(session)
    return JSONResponse({"deployments": [deployment_json(r) for r in records]})


@router.post("/d", include_in_schema=False)
def create_deployment_form(
    request: Request,
    session: SessionDep,
    writer: WriterDep,
    slug: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
    model: Annotated[str, Form()] = "",
    layout: Annotated[str, Form()] = "",
    hardware: Annotated[str, Form()] = "",
) -> Response:
    form = {"slug": slug, "name": name, "model": model, "layout": layout, "hardware": hardware}
    context = {**_list_context(request, session), "form": form, "active_form": "create"}
    expect_page(request, "pages/deployments.html", context)
    record = deployments.create_deployment(writer, _deployment_in(form))
    return RedirectResponse(f"/d/{record.slug}", status_code=303)


@router.post("/api/v1/deployments", tags=["api"], status_code=201, responses=CREATE_ERRORS,
             summary="Create a deployment (a named series of ledgers)")
def create_deployment_api(writer: WriterDep, body: DeploymentBody) -> JSONResponse:
    record = deployments.create_deployment(writer, _deployment_in(body))
    return JSONResponse(deployment_json(record), status_code=201, headers={"Location": f"/d/{record.slug}"})


@router.post("/api/v1/deployments/import", tags=["api"], status_code=201, responses=CREATE_ERRORS,
             summary="Import a deployment exported by /d/{slug}/export.json")
def import_deployment_api(
    writer: WriterDep,
    data: Annotated[dict[str, Any], Body(description="a kvledger.deployment export")],
    slug: Annotated[str | None, Query(description="store it under this slug instead")] = None,
) -> JSONResponse:
    record = deployments.import_deployment(writer, data, slug)
    return JSONResponse(deployment_json(record), status_code=201, headers={"Location": f"/d/{record.slug}"})


@router.post("/d/import", include_in_schema=False)
def import_deployment_form(
    request: Request,
    session: SessionDep,
    writer: WriterDep,
    slug: Annotated[str, Form()] = "",
    text: Annotated[str, Form()] = "",
    file: Annotated[UploadFile | None, File()] = None,
) -> Response:
    expect_page(request, "pages/deployments.html", {**_list_context(request, session), "active_form": "import"})
    content = workflows.upload_text(text, file, request.app.state.settings.max_body_bytes, "file")
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        raise InputError("file", f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    record = deployments.import_deployment(writer, data, slug.strip() or None)
    return RedirectResponse(f"/d/{record.slug}", status_code=303)


@router.get("/d/{slug}.json", include_in_schema=False, dependencies=[ListGuard])
def deployment_json_twin(slug: str, session: SessionDep, page: int = 1) -> JSONResponse:
    history = deployments.deployment_history(session, slug, page)
    return JSONResponse(history_json(history))


@router.get("/d/{slug}/export.json", include_in_schema=False, dependencies=[ListGuard])
def export_deployment(slug: str, session: SessionDep) -> JSONResponse:
    data = deployments.export_deployment(session, slug)
    disposition = f'attachment; filename="kvledger-{slug}.json"'
    return JSONResponse(data, headers={"Content-Disposition": disposition})


def _history_page(request: Request, session: Session, slug: str, page: int = 1) -> dict[str, Any]:
    history = deployments.deployment_history(session, slug, page)
    return present.history_context(history, request)


@router.get("/d/{slug}", include_in_schema=False, dependencies=[ListGuard])
def deployment_page(request: Request, session: SessionDep, slug: str, page: int = 1) -> Response:
    context = _history_page(request, session, slug, page)
    return render(request, expect_page(request, "pages/deployment.html", context))


# ---------------------------------------------------------------- ledgers


def _date(text: str) -> dt.date | None:
    if not text.strip():
        return None
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise InputError("captured_at", "give the date as YYYY-MM-DD") from None


def _whole(text: str) -> int | None:
    """A whole number written in ASCII digits (at most 18 of them), else None: str.isdigit() takes
    '²' and int() takes no more than 4,300 digits, and either was a 500 here."""
    value = text.strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else None


def _run(text: str) -> int | None:
    if not text.strip():
        return None
    run = _whole(text)
    if run is None:
        raise InputError("run", "the run is a number: 0 for the first start-up in the log")
    return run


LogForm = Annotated[str, Form(description="the vLLM start-up log text")]


def _store_log(request: Request, writer: Any, slug: str, text: str, file: UploadFile | None,
               run: str, note: str, captured_at: str) -> int:
    """Import the log as a new ledger of deployment `slug`; its id."""
    settings = request.app.state.settings
    content = workflows.log_text(text, file, settings.max_log_bytes)
    return ledger_import.import_log_ledger(writer, slug, content, run_index=_run(run), note=note,
                                           captured_at=_date(captured_at),
                                           isolate=functools.partial(request.app.state.isolation.run, "log"))


@router.post("/d/{slug}/ledgers", include_in_schema=False)
def import_log_form(
    request: Request,
    slug: str,
    session: SessionDep,
    writer: WriterDep,
    text: LogForm = "",
    file: Annotated[UploadFile | None, File()] = None,
    run: Annotated[str, Form()] = "",
    note: Annotated[str, Form()] = "",
    captured_at: Annotated[str, Form()] = "",
) -> Response:
    context = _history_page(request, session, slug)
    context["form"] = {"note": note, "captured_at": captured_at, "run": run}
    expect_page(request, "pages/deployment.html", context)
    ledger_id = _store_log(request, writer, slug, text, file, run, note, captured_at)
    with database(request.app).read() as fresh:  # a new session: sees the commit
        address = repo.get_ledger(fresh, ledger_id, with_source_log=False).slug
    return RedirectResponse(f"/l/{address}", status_code=303)


@router.post("/api/v1/deployments/{slug}/ledgers", tags=["api"], status_code=201, responses=errors(409, 503),
             summary="Import a vLLM start-up log (text or file) as a new ledger of a deployment")
def import_log_api(
    request: Request,
    slug: str,
    session: SessionDep,
    writer: WriterDep,
    text: LogForm = "",
    file: Annotated[UploadFile | None, File()] = None,
    run: Annotated[str, Form(description="which start-up run (default: the last)")] = "",
    note: Annotated[str, Form()] = "",
    captured_at: Annotated[str, Form(description="YYYY-MM-DD")] = "",
) -> JSONResponse:
    ledger_id = _store_log(request, writer, slug, text, file, run, note, captured_at)
    ledger = repo.get_ledger(session, ledger_id, with_source_log=False)  # its first query: sees the commit
    return JSONResponse(ledger_json(ledger), status_code=201, headers={"Location": f"/l/{ledger.slug}"})


#: What a retired numeric ledger address (/l/{n}, /l/{n}.json) answers: 410 Gone, for every n,
#: stored or not (so the answer tells nothing about which numbers exist).
RETIRED = ("Ledgers are no longer addressed by number: numbered addresses could be counted through. "
           "Each ledger has an unguessable link, /l/<slug>; find it on its deployment's history page.")


@router.get("/l/{number:int}.json", include_in_schema=False)
@router.get("/l/{number:int}", include_in_schema=False)
def retired_ledger_number(number: int) -> Response:
    raise HTTPException(410, RETIRED)


@router.get("/l/{slug}.json", include_in_schema=False)
def ledger_json_twin(slug: str, session: SessionDep) -> JSONResponse:
    view = deployments.ledger_view(session, repo.ledger_id_for_slug(session, slug))
    out = ledger_json(view.ledger)
    out["alerts"] = [{"code": x.code, "message": x.message, "rank": x.rank} for x in view.alerts]
    out["previous"] = view.previous_id
    out["previous_slug"] = view.previous_slug
    return JSONResponse(out)


@router.get("/l/{slug}", include_in_schema=False)
def ledger_page(request: Request, slug: str, session: SessionDep) -> Response:
    view = deployments.ledger_view(session, repo.ledger_id_for_slug(session, slug))
    context = {"nav": "deployments", "view": view, "ledger": view.ledger, "row_fields": ROW_LABELS,
               "json_url": f"/l/{slug}.json"}
    return render(request, expect_page(request, "pages/ledger.html", context))


ROW_LABELS = (
    ("total_bytes", "total"), ("free_at_start_bytes", "free at start"), ("requested_bytes", "requested"),
    ("weights_bytes", "weights"), ("non_torch_bytes", "non-torch"),
    ("cuda_graph_estimate_bytes", "CUDA graphs (vLLM's estimate)"), ("cuda_graph_bytes", "CUDA graphs"),
    ("activation_bytes", "activation"), ("kv_bytes", "KV"), ("num_gpu_blocks", "blocks"), ("kv_tokens", "tokens"),
)


def _ledger_id(session: Session, text: str, field: str) -> int:
    """The ledger a diff side names by its slug (the last part of its /l/<slug> link)."""
    given = text.strip().rstrip("/").rsplit("/", 1)[-1]
    if not given or given.isdigit():
        raise InputError(field, "give the ledger's link or slug (/l/<slug>, on the deployment's history page); "
                                "ledger numbers are no longer addresses")
    try:
        return repo.ledger_id_for_slug(session, given)
    except repo.NotFound:
        raise InputError(field, f"no ledger has the address {given[:40]!r}") from None


def _max_model_len(text: str) -> int | None:
    if not text.strip():
        return None
    tokens = _whole(text)
    if tokens is None or tokens <= 0:
        raise InputError("max_model_len", "max_model_len is a positive number of tokens")
    return tokens


@router.get("/diff.json", include_in_schema=False)
def diff_json_twin(session: SessionDep, a: str = "", b: str = "", max_model_len: str = "") -> JSONResponse:
    view = deployments.ledger_diff(session, _ledger_id(session, a, "a"), _ledger_id(session, b, "b"),
                                   _max_model_len(max_model_len))
    return JSONResponse(diff_json(view))


@router.get("/diff", include_in_schema=False)
def diff_page(request: Request, session: SessionDep, a: str = "", b: str = "", max_model_len: str = "") -> Response:
    form = {"a": a, "b": b, "max_model_len": max_model_len}
    spec = expect_page(request, "pages/ledger_diff.html",
                       {"nav": "deployments", "form": form, "view": None, "error": None, "field_errors": {},
                        "row_fields": ROW_LABELS, "json_url": ""})
    if not a and not b:
        return render(request, spec)
    view = deployments.ledger_diff(session, _ledger_id(session, a, "a"), _ledger_id(session, b, "b"),
                                   _max_model_len(max_model_len))
    json_url = f"/diff.json?a={view.a.slug}&b={view.b.slug}" + (f"&max_model_len={view.max_model_len}"
                                                            if view.max_model_len else "")
    return render(request, spec, {"view": view, "json_url": json_url})
