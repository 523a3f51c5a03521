"""HTML pages and their .json twins. Routes stay short: parse, call, pick template/block, return.

Each page route first declares its page (`expect_page`) so that an InputError raised while
computing is shown inline on that same page by the error mapping.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.core import exports
from app.core.errors import InputError
from app.services import deploy, plan_query, plans
from app.services.base_documents import BaseStore
from app.web import cpu, htmx, querystring
from app.web.plan import form, import_job, present, views, workflows
from app.web.responses import PageSpec, expect_page, render

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)

PLAN = "pages/plan.html"
PLAN_FRAGMENT = ("results", "summary", "field_errors_oob")


def _cache(request: Request) -> views.PlanCache:
    cache: views.PlanCache = request.app.state.plan_cache
    return cache


def _bases(request: Request) -> BaseStore:
    bases: BaseStore = request.app.state.bases
    return bases


@router.get("/")
def home(request: Request, q: str = "") -> Response:
    spec = expect_page(request, "pages/home.html", workflows.home_context(request.app.state.settings, q),
                       fragment=("search_results",))
    return render(request, spec, {"recent": [] if htmx.details(request).request else _recent_plans(request)})


def _recent_plans(request: Request) -> list[dict[str, str]]:
    """The newest saved plans for the home page; none (not an error page) when storage is unavailable."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.db import repository
    from app.web.deps import database, list_token_ok

    if not list_token_ok(request):  # with a token set, the list is the token holder's
        return []
    try:
        with database(request.app).read() as session:
            plans = repository.list_listed_plans(session, 6)
    except SQLAlchemyError:
        log.warning("recent plans unavailable (is the database migrated? run `kvledger db upgrade`)")
        return []
    return [{"title": p.title or p.slug, "url": f"/p/{p.slug}", "when": p.created_at.strftime("%Y-%m-%d %H:%M")}
            for p in plans]


@router.get("/index.json")
def home_json(request: Request, q: str = "") -> Response:
    return JSONResponse(workflows.home_json(q))


@router.get("/plan")
async def plan_page(request: Request) -> Response:
    return await cpu.run(request, _plan_page, request)


def _query_items(request: Request) -> list[tuple[str, str]]:
    """The request's query, parsed once (as `request.query_params` would: latin-1, then
    parse_qsl), for both the what-if keys and the canonical-URL check."""
    return parse_qsl(request.scope["query_string"].decode("latin-1"), keep_blank_values=True)


def _declare_plan(
    request: Request, fragment: tuple[str, ...], items: list[tuple[str, str]] | None = None
) -> tuple[dict[str, str], PageSpec]:
    """The plan page's what-if keys, and its declaration (an error shows inline on the form)."""
    params = querystring.clean(_query_items(request) if items is None else items)
    return params, expect_page(
        request, PLAN, lambda: present.page_context(params, "base" in params, base_doc=_base_or_none(request, params)),
        fragment,
    )


def _base_or_none(request: Request, params: dict[str, str]) -> dict[str, Any] | None:
    """The base document of a plan that failed, for its form and title (None when there is none)."""
    try:
        return views.resolve_base(params, _bases(request))
    except InputError:
        return None


def _plan_page(request: Request) -> Response:
    items = _query_items(request)
    params, spec = _declare_plan(request, PLAN_FRAGMENT, items)
    hx = htmx.details(request)
    if hx.request:  # a refused what-if's address is what was asked (app.web.errors.input_error)
        request.state.asked_url = lambda: form.asked_url(params, _base_or_none(request, params))
    # A slider tick re-renders the results without the levers; they refresh in their own request.
    levers = False if hx.wants_fragment else None
    view = views.plan_view(params, _bases(request), levers, _cache(request), cleaned=True)
    if not hx.request and items != sorted(view.query.items()):
        # A plain GET form submits every field: send the browser to the canonical URL.
        return RedirectResponse(view.url, status_code=303)
    context = _plan_context(request, view, form=not hx.wants_fragment)
    if hx.wants_fragment:
        context["explain_open"] = _explain_open(request)
    response = render(request, spec, context, merge_base=False)
    if hx.request:
        htmx.replace_url(response, view.url)
        vary = response.headers.get("Vary")
        response.headers["Vary"] = f"{vary}, {EXPLAIN_OPEN}" if vary else EXPLAIN_OPEN
    return response


#: A slider tick's request names the admission rows whose formula is open (app.js, comma-separated
#: keys); the fragment carries the formula body of those only, a closed row's body is fetched when
#: it is opened. Without the header (a client that does not send it) every body is sent.
EXPLAIN_OPEN = "KV-Explain-Open"


def _explain_open(request: Request) -> frozenset[str] | None:
    value = request.headers.get(EXPLAIN_OPEN)
    return None if value is None else frozenset(k for k in value.split(",") if k)


@router.get("/plan.json")
async def plan_json(request: Request) -> Response:
    return await cpu.run(request, _plan_json, request)


def _plan_json(request: Request) -> Response:
    params = querystring.clean(_query_items(request))
    view = views.plan_view(params, _bases(request), True, _cache(request), cleaned=True)
    return JSONResponse(views.plan_json(view))


@router.get("/plan/export/{fmt}")
async def plan_export(request: Request, fmt: str) -> Response:
    """The plan of this what-if query in a deploy format, as a download (see app.core.exports)."""
    return await cpu.run(request, _plan_export, request, fmt)


def _plan_export(request: Request, fmt: str) -> Response:
    params = querystring.clean(_query_items(request))
    view = views.plan_view(params, _bases(request), False, _cache(request), cleaned=True)
    try:
        out = exports.export(view.result, fmt)
    except exports.ExportError as exc:
        raise InputError("format" if fmt not in exports.FORMATS else "model", str(exc)) from None
    return Response(out.text, media_type=out.media_type,
                    headers={"Content-Disposition": f'attachment; filename="{out.filename}"'})


@router.post("/start/serve")
def start_from_serve(
    request: Request,
    command: Annotated[str, Form()] = "",
    gpu: Annotated[str, Form()] = "",
    gpu_total: Annotated[str, Form()] = "",
) -> Response:
    """A pasted `vllm serve` command line on this GPU (a preset or a size) → its plan page."""
    settings = request.app.state.settings
    expect_page(request, "pages/home.html", lambda: workflows.home_context(settings, "", active_form="serve"))
    if not command.strip():
        raise InputError("serve", "paste a vllm serve command line")
    doc = {"serve": command, "gpu": plan_query.gpu_section(gpu or gpu_total)}
    plans.run_plan(doc, with_levers=False)  # bad input is a form error here, not on the plan page
    return RedirectResponse(workflows.base_plan_url(doc, _bases(request)), status_code=303)


@router.post("/import/metrics")
def import_metrics_page(
    request: Request,
    text: Annotated[str, Form()] = "",
    file: Annotated[UploadFile | None, File()] = None,
) -> Response:
    """vLLM /metrics or DCGM exporter text: every engine's KV figures and length mix."""
    settings = request.app.state.settings
    spec = expect_page(request, "pages/import.html", workflows.import_context(settings, "metrics"))
    metrics = deploy.import_metrics(workflows.upload_text(text, file, settings.max_log_bytes, "metrics"))
    return render(request, spec, {"metrics": metrics, "metrics_text": text})


@router.get("/plan/levers")
async def plan_levers(request: Request) -> Response:
    """The levers card alone (htmx), or the whole page with its levers (no JavaScript)."""
    return await cpu.run(request, _plan_levers, request)


def _plan_levers(request: Request) -> Response:
    params, spec = _declare_plan(request, ("levers",))
    view = views.plan_view(params, _bases(request), True, _cache(request), cleaned=True)
    return render(request, spec, _plan_context(request, view), merge_base=False)


def _plan_context(request: Request, view: views.PlanView, form: bool = True) -> dict[str, Any]:
    """The plan template's context; the save form asks for the write token when the server has one."""
    context = present.plan_context(view, form)
    context["token_required"] = bool(request.app.state.settings.write_token)
    return context


@router.get("/import")
def import_form(request: Request) -> Response:
    spec = expect_page(request, "pages/import.html", workflows.import_context(request.app.state.settings))
    return render(request, spec)


@router.get("/import.json")
def import_form_json(request: Request) -> Response:
    return JSONResponse(workflows.import_form_json(request.app.state.settings))


#: The optional fields of the import form besides the log (`text` or a `file` upload).
IMPORT_FIELDS = ("model", "config", "tp", "pp")


@router.post("/import")
async def import_post(request: Request) -> Response:
    """The import page with its preview (the body is read in the import child: import_job)."""
    settings = request.app.state.settings
    expect_page(request, "pages/import.html", lambda: workflows.import_context(settings, "log"))
    outcome, _ = await import_job.run(request, IMPORT_FIELDS, page_runs=import_job.PAGE_RUNS)
    fields = outcome.fields
    spec = expect_page(request, "pages/import.html", workflows.import_context(
        settings, "log", fields.get("model", ""), fields.get("text", ""), fields.get("config", "")))
    import_job.raise_error(outcome)
    context = await run_in_threadpool(import_job.page_context, outcome, _bases(request))
    return await run_in_threadpool(render, request, spec, context)


@router.post("/import.json")
async def import_post_json(request: Request) -> Response:
    return await import_job.json_reply(request, IMPORT_FIELDS)


@router.post("/start/config")
def start_from_config(
    request: Request,
    config: Annotated[str, Form()] = "",
    gpu: Annotated[str, Form()] = "",
    gpu_total: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
    file: Annotated[UploadFile | None, File()] = None,
    index: Annotated[str, Form()] = "",
    index_file: Annotated[UploadFile | None, File()] = None,
) -> Response:
    settings = request.app.state.settings
    expect_page(request, "pages/home.html", lambda: workflows.home_context(settings, "", active_form="config"))
    upload = workflows.ConfigUpload(config, file, index, index_file)
    doc = workflows.config_document(upload, gpu or gpu_total, name, settings.max_body_bytes)
    return RedirectResponse(workflows.base_plan_url(doc, _bases(request)), status_code=303)


@router.post("/start/nvidia-smi")
def start_from_nvidia_smi(
    request: Request,
    text: Annotated[str, Form()] = "",
    model: Annotated[str, Form()] = "",
) -> Response:
    settings = request.app.state.settings
    expect_page(request, "pages/home.html", lambda: workflows.home_context(settings, "", active_form="nvidia_smi"))
    doc = workflows.nvidia_smi_document(text, model)
    return RedirectResponse(workflows.base_plan_url(doc, _bases(request)), status_code=303)


@router.get("/compare")
async def compare_page(request: Request, a: str = "", b: str = "") -> Response:
    return await cpu.run(request, _compare_page, request, a, b)


def _saved_loader(request: Request) -> workflows.SavedLoader:
    """Reads one saved plan, as saved, for a compare side that names one."""
    from app.services import saved_plans
    from app.web.deps import database

    def load(slug: str) -> Mapping[str, Any]:
        with database(request.app).read() as session:
            return saved_plans.saved_result(session, slug)

    return load


def _compare_page(request: Request, a: str, b: str) -> Response:
    spec = expect_page(request, "pages/compare.html", workflows.compare_form_context(a, b))
    return render(request, spec, workflows.compare_context(a, b, _bases(request), _saved_loader(request)))


@router.get("/compare.json")
async def compare_json(request: Request, a: str = "", b: str = "") -> Response:
    context = await cpu.run(request, workflows.compare_json, a, b, _bases(request), _saved_loader(request))
    return JSONResponse(context)


@router.get("/docs.json")
def api_docs_json() -> Response:
    """The API page's JSON twin is the OpenAPI document itself."""
    return RedirectResponse("/openapi.json", status_code=307)


@router.get("/docs")
def api_docs(request: Request) -> Response:
    spec = expect_page(request, "pages/docs.html", workflows.docs_context(request.app.openapi()))
    return render(request, spec)
