"""The JSON API under /api/v1 (OpenAPI at /openapi.json, a readable index at /docs).

Bodies are plan documents and texts exactly as the CLI takes them; results are the planning
module's JSON. Bad input is a 422 `{"error": {"field", "message"}}` (see `app.web.errors`); bodies
over the configured size are a 413 before they are read.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from app.core.errors import InputError
from app.schemas import PlanDocument
from app.services import deploy, imports, model_input, plan_query, plans
from app.services.base_documents import BaseStore
from app.web import cpu, querystring
from app.web.openapi import body_schema, errors, register_body
from app.web.plan import import_job, opening, text_body

router = APIRouter(prefix="/api/v1", tags=["api"])
register_body("PlanDocument", PlanDocument)
register_body("PlanComparison", {
    "type": "object", "required": ["a", "b"], "additionalProperties": False,
    "properties": {"a": {"$ref": "#/components/schemas/PlanDocument"},
                   "b": {"$ref": "#/components/schemas/PlanDocument"}},
}, needs=("PlanDocument",))

PlanBody = Annotated[
    dict[str, Any],
    Body(
        description="A plan document, the same JSON as `kvledger plan`.",
        examples=[{"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"total": "80 GiB"}, "layout": {"tp": 4}}],
    ),
]


def shareable_url(doc: dict[str, Any], result: dict[str, Any], bases: BaseStore) -> str:
    """The plan page URL of a document: a what-if query when one reproduces the result exactly,
    else a stored base document (`/plan?base=<id>`)."""
    query = plan_query.query_from_plan(doc)
    layout = doc.get("layout")
    stated = {**query, **{name: plan_query.canonical_value(name, str(layout.get(name, 1) if isinstance(layout, dict)
                                                                       else 1)) for name in ("tp", "pp")}}
    # the plan page's rule: a TP/PP of 1 is left out where the URL without it opens at 1 too
    opening.layout_in_url(query, stated, opening.known_plan(result))
    try:
        same = plans.run_plan(plan_query.plan_from_query(query), with_levers=False) == {**result, "levers": []}
    except InputError:
        same = False
    if same:
        return querystring.page_url("/plan", query)
    return querystring.page_url("/plan", {"base": bases.put(doc)})


@router.post("/plan", summary="Compute a plan document; the result plus its shareable URL",
             openapi_extra=body_schema("PlanDocument"))
async def post_plan(
    request: Request,
    doc: PlanBody,
    check: Annotated[
        bool, Query(description="add `checks` (rank starts, max_model_len fits, reserves) and `checks_pass`")
    ] = False,
) -> JSONResponse:
    return JSONResponse(await cpu.run(request, _plan_with_url, doc, request.app.state.bases, check))


def _plan_with_url(doc: dict[str, Any], bases: BaseStore, check: bool = False) -> dict[str, Any]:
    result = plans.run_plan(doc, check=check)
    if check:
        checked = {k: result.pop(k) for k in ("checks", "checks_pass")}
        return {**result, "url": shareable_url(doc, result, bases), **checked}
    return {**result, "url": shareable_url(doc, result, bases)}


@router.post("/export", summary="A plan document in a deploy format (vllm serve, --config YAML, KServe, Helm, CSV)",
             response_class=Response, openapi_extra=body_schema("PlanDocument"),
             responses={200: {"description": "the export, as its format's media type",
                              "content": {media: {"schema": {"type": "string"}}
                                          for media in ("text/x-shellscript", "application/yaml", "text/csv")}}})
async def post_export(
    request: Request, doc: PlanBody,
    format: Annotated[str, Query(description="serve, vllm-config, kserve, production-stack, llm-d or csv")] = "serve",
) -> Response:
    out = await cpu.run(request, deploy.export_plan, doc, format)
    return Response(out.text, media_type=out.media_type,
                    headers={"Content-Disposition": f'inline; filename="{out.filename}"'})


@router.post("/import/metrics", summary="Read vLLM /metrics (or DCGM exporter) text; beside a plan when given")
async def import_metrics(
    request: Request,
    text: Annotated[str, Body(description="the Prometheus text of a vLLM engine's /metrics, or DCGM exporter's")],
    plan: Annotated[dict[str, Any] | None, Body(description="a plan document to compare with")] = None,
) -> JSONResponse:
    text = text_body.valid_unicode(text)
    if len(text.encode()) > request.app.state.settings.max_log_bytes:
        raise InputError("text", "the metrics text is larger than this server accepts")
    return JSONResponse(await cpu.run(request, deploy.import_metrics, text, plan))


@router.get("/models", summary="Search the model catalogue")
def get_models(q: str = "") -> JSONResponse:
    return JSONResponse({"models": model_input.catalogue_search(q, limit=50)})


_MODEL_FIELD = {"model": "catalogue slug of the model, for residuals"}
_BODY_FORMS = ('Body: JSON `{"text": …}`, or a form (multipart or urlencoded) with a `text` field or a '
               "`file` upload — the same forms as the other text import.")


@router.post("/import/log", summary="Parse vLLM startup logs (JSON text, form text or file upload)",
             description=_BODY_FORMS + " Optional `model`: " + _MODEL_FIELD["model"] + ".",
             openapi_extra=text_body.openapi_body("the vLLM startup log text", _MODEL_FIELD), responses=errors(503))
async def import_log(request: Request) -> Response:
    # the body is spooled, parsed and read in the import child; the server relays the reply (import_job)
    return await import_job.json_reply(request, ("model",))


@router.post("/import/nvidia-smi", summary="Parse nvidia-smi output (table or --query-gpu CSV)",
             description=_BODY_FORMS,
             openapi_extra=text_body.openapi_body("nvidia-smi output (table or --query-gpu CSV)", {}))
async def import_nvidia_smi(request: Request) -> JSONResponse:
    body = await text_body.read_text_body(request, request.app.state.settings.max_log_bytes, "text")
    return JSONResponse(await run_in_threadpool(imports.import_nvidia_smi, body["text"]))


@router.post("/compare", summary="Two plan documents side by side, every row with its delta",
             openapi_extra=body_schema("PlanComparison"))
async def compare(
    request: Request,
    a: Annotated[dict[str, Any], Body(description="plan document A")],
    b: Annotated[dict[str, Any], Body(description="plan document B")],
) -> JSONResponse:
    return JSONResponse(await cpu.run(request, _compare, a, b))


def _compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return plans.compare(_run_side(a, "a"), _run_side(b, "b"))


def _run_side(doc: dict[str, Any], side: str) -> dict[str, Any]:
    try:
        return plans.run_plan(doc, with_levers=False)
    except InputError as exc:
        raise exc.under(side) from None
