"""Sizing pages and API: GET /size (the form, the ranked table and the chart; htmx swaps the
form and results, with an indicator while the search runs), GET /size.json (the same answer as
JSON) and POST /api/v1/size (a sizing document, the same JSON as `kvledger size --json`).

The search is CPU-bound: it runs under the app's CPU limiter (`app.web.cpu`), off the event loop,
so other pages stay served while it runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse, Response

from app.services.model_input import catalogue_search
from app.services.sizing import run_size
from app.sizing_schema import DEFAULT_GPUS, SizingDocument
from app.web import cpu, htmx
from app.web.openapi import body_schema, register_body
from app.web.querystring import encode, page_url
from app.web.responses import expect_page, render
from app.web.size import charts, forms

router = APIRouter()
register_body("SizingDocument", SizingDocument)

SizeBody = Annotated[
    dict[str, Any],
    Body(description="A sizing document, the same JSON as `kvledger size`.",
         examples=[{"model": {"catalogue": "llama-3.1-70b"},
                    "target": {"max_model_len": 32768, "concurrency": 40, "avg_live_tokens": 12000},
                    "gpus": list(DEFAULT_GPUS), "max_gpus": 16,
                    "options": {"kv_cache_dtype": ["auto", "fp8"], "quantization": [None, "fp8"], "pp": [1, 2]},
                    "policy": {"growth_reserve": 0.08}}]),
]


@router.post("/api/v1/size", tags=["api"], summary="Search the deployments that serve a target (sizing document)",
             openapi_extra=body_schema("SizingDocument"))
async def post_size(request: Request, doc: SizeBody) -> JSONResponse:
    return JSONResponse(await cpu.run(request, run_size, doc))


def _query(request: Request) -> dict[str, str]:
    query = forms.clean(request.query_params)
    return query or dict(forms.EXAMPLE)


@router.get("/size.json", include_in_schema=False)
async def size_json(request: Request) -> JSONResponse:
    doc = forms.document(_query(request))
    return JSONResponse({**(await cpu.run(request, run_size, doc)), "document": doc})


@router.get("/size", include_in_schema=False)
async def size_page(request: Request) -> Response:
    query = _query(request)
    models = [(m["slug"], m["name"]) for m in catalogue_search("", limit=500)]
    form = {key: query.get(key, "") for key in forms.KEYS}
    base = {"nav": "size", "form": form, "models": models, "error": None, "field_errors": {}, "answer": None,
            "json_url": "/size.json?" + encode(query), "chart": None}  # fmt: skip
    spec = expect_page(request, "pages/size.html", base, fragment=("sizing",), field_key=forms.field_key)
    # htmx pushes the canonical URL (sorted, blanks dropped), not the raw form submission, of an
    # answer and of a refusal alike (app.web.errors.input_error: the plan page's asked_url).
    fragment = htmx.details(request).wants_fragment
    if fragment:
        request.state.asked_url, request.state.asked_push = (lambda: page_url("/size", query)), True
    answer = await cpu.run(request, run_size, forms.document(query))
    headers = {"HX-Push-Url": page_url("/size", query)} if fragment else None
    return render(request, spec, {"answer": answer, "chart": charts.figure(answer)}, headers=headers)
