"""Saved plans: permanent links `/p/{slug}`, their JSON twins, saving from the API and from a
what-if URL, and the list of recent plans. Saved plans are immutable: every method other than
GET on a saved plan's address answers 405.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Body, Form, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import HTTPException

from app.core import exports
from app.core.errors import InputError
from app.db import repository as repo
from app.schemas import PlanDocument
from app.services import saved_plans
from app.services.base_documents import BaseStore
from app.web import querystring
from app.web.deps import LIST_COOKIE, ListGuard, SessionDep, WriterDep, database
from app.web.openapi import body_schema, errors, register_body
from app.web.plan import views
from app.web.responses import expect_page, render
from app.web.saved import present

router = APIRouter()
register_body("PlanDocument", PlanDocument)
IMMUTABLE = "Saved plans are immutable: edit it as a what-if and save a new version (it links back to this one)."
NOT_GET = ["POST", "PUT", "PATCH", "DELETE"]

PlanBody = Annotated[
    dict[str, Any],
    Body(
        description="A plan document, the same JSON as `kvledger plan`.",
        examples=[{"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"total": "80 GiB"}, "layout": {"tp": 4}}],
    ),
]


@router.post("/api/v1/plans", tags=["api"], status_code=201, openapi_extra=body_schema("PlanDocument"),
             responses=errors(404, 409, 503),
             summary="Save a plan document; its permanent slug and URL plus the result")
def api_save_plan(
    request: Request,
    writer: WriterDep,
    doc: PlanBody,
    parent: Annotated[str | None, Query(description="slug of the version this one edits")] = None,
    title: Annotated[str, Query(max_length=300)] = "",
    listed: Annotated[bool, Query(description="show it in the /p list (default: unlisted, only its link opens it)")]
    = False,
) -> JSONResponse:
    saved = saved_plans.save_document(writer, doc, title, parent, listed=listed)
    url = f"/p/{saved.slug}"
    body = {**saved.result, "slug": saved.slug, "url": url, "absolute_url": str(request.base_url).rstrip("/") + url,
            "parent": saved.parent_slug, "listed": listed}
    return JSONResponse(body, status_code=201, headers={"Location": url})


@router.get("/api/v1/plans/{slug}", tags=["api"], summary="A saved plan (the same JSON as /p/{slug}.json)",
            responses=errors(409, 503))
def api_get_plan(slug: str, session: SessionDep) -> JSONResponse:
    opened = saved_plans.open_plan(session, slug)
    return JSONResponse(saved_plans.plan_json(opened, f"/p/{slug}"))


@router.api_route("/api/v1/plans/{slug}", methods=["PUT", "PATCH", "DELETE"], include_in_schema=False)
@router.api_route("/p/{slug}/export/{fmt}", methods=NOT_GET, include_in_schema=False)
@router.api_route("/p/{slug}.json", methods=NOT_GET, include_in_schema=False)
@router.api_route("/p/{slug}", methods=NOT_GET, include_in_schema=False)
def immutable(slug: str) -> Response:
    raise HTTPException(405, IMMUTABLE, headers={"Allow": "GET"})


@router.get("/p", include_in_schema=False, dependencies=[ListGuard])
def saved_list(request: Request, session: SessionDep) -> Response:
    spec = expect_page(request, "pages/saved_plans.html", present.saved_list_context([], request))
    plans = repo.list_listed_plans(session, 50)
    return render(request, spec, {"plans": plans})


@router.get("/p.json", include_in_schema=False, dependencies=[ListGuard])
def saved_list_json(session: SessionDep) -> JSONResponse:
    plans = repo.list_listed_plans(session, 50)
    return JSONResponse({"plans": [saved_plans.summary_json(p) for p in plans]})


@router.get("/p/{slug}.json", include_in_schema=False)
def saved_plan_json(slug: str, session: SessionDep) -> JSONResponse:
    opened = saved_plans.open_plan(session, slug)
    return JSONResponse(saved_plans.plan_json(opened, f"/p/{slug}"))


@router.get("/p/{slug}", include_in_schema=False)
def saved_plan_page(request: Request, slug: str, session: SessionDep) -> Response:
    opened = saved_plans.open_plan(session, slug)
    newer = saved_plans.children(session, slug)
    try:
        context = present.saved_plan_context(opened, newer, request.app.state.bases, request)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        # A row the validator never saw (written around KV Ledger, or by an older core): explain it.
        return render(request, expect_page(request, "pages/saved_plan_broken.html", {
            "nav": "saved", "record": opened.record, "recomputed": opened.recomputed, "json_url": f"/p/{slug}.json",
            "reason": "Its stored result is not one this version of KV Ledger can display, and today's core "
                      "cannot recompute it either (below). It was probably written outside KV Ledger.",
        }))
    spec = expect_page(request, "pages/saved_plan.html", context)
    return render(request, spec)


@router.get("/p/{slug}/export/{fmt}", include_in_schema=False)
def saved_plan_export(slug: str, fmt: str, session: SessionDep) -> Response:
    """The saved result (not today's recomputation) in a deploy format, as a download."""
    if fmt not in exports.FORMATS:
        raise InputError("format", f"unknown format {fmt!r}; expected one of {', '.join(exports.FORMATS)}")
    record = saved_plans.open_plan(session, slug).record
    if not record.intact:  # never a deploy config from numbers nobody saved
        raise HTTPException(409, f"{repo.CHANGED_OUTSIDE[0].upper()}{repo.CHANGED_OUTSIDE[1:]}: "
                                 f"its export is refused (open /p/{slug} for what is stored).")
    try:
        out = exports.export(record.summary, fmt)
    except exports.ExportError as exc:
        raise InputError("model", str(exc)) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        raise InputError("plan", "this saved plan's stored result cannot be exported by this version of "
                                 f"KV Ledger (open /p/{slug} for why)") from None
    return Response(out.text, media_type=out.media_type,
                    headers={"Content-Disposition": f'attachment; filename="{out.filename}"'})


@router.post("/plans", include_in_schema=False)
def save_from_whatif(
    request: Request,
    session: SessionDep,
    writer: WriterDep,
    plan: Annotated[str, Form(description="a /plan URL or its query string")] = "",
    parent: Annotated[str, Form()] = "",
    title: Annotated[str, Form()] = "",
    listed: Annotated[str, Form(description="any value: show it in the /p list")] = "",
) -> Response:
    """Save the what-if a plan URL describes (the page's canonical query) → 303 to its link."""
    form = {"plan": plan, "parent": parent, "title": title, "listed": bool(listed)}
    recent = repo.list_listed_plans(session, 50)
    expect_page(request, "pages/saved_plans.html", {**present.saved_list_context(recent, request), "form": form})
    bases = request.app.state.bases
    query = querystring.from_text(plan)
    if not query and urlsplit(plan.strip()).path.rstrip("/").split("/")[-1] != "plan":
        # (a bare /plan is the default plan: its canonical address has no query at all)
        raise InputError("plan", "paste the address of a plan page (/plan?…) or its query string")
    edits = parent.strip() or query.get(querystring.FROM_KEY, "")
    if edits and "base" in query and bases.get(query["base"]) is None:
        _restore_parent_base(database(request.app).read, edits, query["base"], bases)
    try:
        doc = views.plan_view(query, bases, levers=False).doc
    except InputError as exc:  # about one what-if key of the address: show it on the address field
        key = querystring.field_key(exc.field) or exc.field
        raise InputError("plan", f"{exc.message} ({key})" if key else exc.message) from None
    # A what-if opened with "Edit as a what-if" names the saved plan it edits (`from`): a new version of it.
    parent = parent.strip() or query.get(querystring.FROM_KEY, "")
    saved = _save_what_if(writer, doc, title, parent, bool(listed))
    return RedirectResponse(f"/p/{saved.slug}", status_code=303)


@router.post("/unlock", include_in_schema=False)
def unlock_lists(
    request: Request,
    token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/p",
) -> Response:
    """Let this browser see the lists: the write policy has checked the token (form field `token`);
    it is kept in an HttpOnly, SameSite=Strict cookie that only the list guard reads (it never
    authorises a write)."""
    target = next if next.startswith("/") and not next.startswith("//") and "\\" not in next else "/p"
    response = RedirectResponse(target, status_code=303)
    if token and request.app.state.settings.write_token:
        response.set_cookie(LIST_COOKIE, token, httponly=True, samesite="strict", path="/")
    return response


def _save_what_if(writer: sessionmaker[Session], doc: dict[str, Any], title: str, parent: str,
                  listed: bool) -> saved_plans.Saved:
    """Save the what-if (a new version of `parent` when given); a parent that is no saved plan is
    an error on the save form's `parent` field, naming it."""
    try:
        return saved_plans.save_document(writer, doc, title, parent or None, listed=listed)
    except repo.NotFound:
        raise InputError("parent", f"no saved plan {parent[:40]!r} to make a new version of") from None


def _restore_parent_base(reader: sessionmaker[Session], parent: str, base_id: str, bases: BaseStore) -> None:
    """An edit link names its saved plan's document by content id; after a restart the base
    store may have forgotten it, but the parent plan still holds it."""
    with reader() as session:
        record = repo.get_plan(session, parent)
    if bases.put(record.document) != base_id:
        raise InputError("plan", f"the base document {base_id!r} is not the saved plan {parent!r}'s document")
