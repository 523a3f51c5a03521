"""Every error that reaches a user is mapped here, in one place, to a response.

- InputError (the domain's "this input is wrong", with a dotted field path; the simulator's
  `SimInputError` is one): 422; its `ConflictError` (a taken slug) 409. On the API and .json
  twins `{"error": {"field", "message"}}`; on
  a page, the page the route declared, re-rendered with the message next to the field (a
  fragment for htmx, else the whole page).
- FastAPI's request validation errors: the same 422 shapes.
- The storage layer's errors: NotFound → 404, Conflict → 409, InvalidInput → 422 (as an
  InputError), a database without its schema → 503 saying what to run. Too many simulation
  jobs (`JobLimitError`) → 429 with Retry-After.
- HTTP errors (404, 405, ...): JSON or a small page.
Routes raise; they never catch to translate. Every handler is registered once, by `install`.
- Anything else is a bug: logged with its traceback, answered with a plain 500 message.
  Never a stack trace in a response.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import OperationalError, ProgrammingError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from app.core.errors import ConflictError, InputError
from app.db import repository as repo
from app.schema_bounds import bound_message
from app.services.sim_jobs import JobLimitError
from app.web import htmx, querystring
from app.web.headers import HEADERS as SECURITY_HEADERS
from app.web.limits import wants_json
from app.web.responses import PageSpec, declared_page, render

log = logging.getLogger(__name__)

ERROR_PAGE = PageSpec("pages/error.html", {"nav": ""})
#: Words of a database error that mean the schema is missing (migrations not run).
SCHEMA_WORDS = ("no such table", "does not exist", "undefinedtable")
NO_SCHEMA = "The database has no schema yet: run `kvledger db upgrade` (or start with `kvledger serve`)."


def error_json(field: str, message: str, status_code: int) -> JSONResponse:
    return JSONResponse({"error": {"field": field, "message": message}}, status_code=status_code)


def error_context(exc: InputError, field_key: Callable[[str], str | None] | None = None) -> dict[str, Any]:
    """The template context of an input error: the message, and where it belongs in the form
    (`field_key` maps the field path to the form's key; the what-if keys by default)."""
    key = (field_key or querystring.field_key)(exc.field) if exc.field else None
    return {
        "error": {"field": exc.field, "message": exc.message, "key": key},
        "field_errors": {key or exc.field: exc.message} if (key or exc.field) else {},
    }


async def input_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, InputError)
    status = 409 if isinstance(exc, ConflictError) else 422  # a taken slug: 409, on the form as well
    declared = declared_page(request)
    if declared is None or declared.field_key is None:  # the what-if keys: named as the request wrote them
        exc = querystring.as_written(exc, request.query_params.multi_items())
    if wants_json(request.url.path):
        return error_json(exc.field, exc.message, status)
    spec = declared or ERROR_PAGE
    context = {**error_context(exc, spec.field_key), "status": status, "title": "Input error"}
    response = render(request, spec, context, status_code=status)
    asked = getattr(request.state, "asked_url", None)
    if callable(asked):  # an htmx what-if the plan refused: the address bar shows what was asked,
        # so a reload or a copied link shows this refusal; a page whose answers push (/size) pushes it
        (htmx.push_url if getattr(request.state, "asked_push", False) else htmx.replace_url)(response, str(asked()))
    return response


def _loc(loc: tuple[int | str, ...] | list[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


async def validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    loc = [p for p in first.get("loc", ()) if p not in ("query", "path")]
    named = [p for p in loc if p != "body"]
    message = bound_message(None, first, named) if named else None  # a bound in our words (app.schema_bounds)
    return await input_error(request, InputError(_loc(loc), message or str(first.get("msg", "invalid request"))))


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = exc.detail if isinstance(exc.detail, str) else "request refused"
    if exc.status_code == 404:
        message = "Not found."
    headers = dict(exc.headers or {})
    if wants_json(request.url.path):
        response: Response = error_json("", message, exc.status_code)
        response.headers.update(headers)
        return response
    context = {"error": {"field": "", "message": message, "key": None}, "field_errors": {},
               "status": exc.status_code, "title": message,
               # A list behind the token (GET 401): the page offers to unlock the lists in this browser.
               "unlock": request.url.path if exc.status_code == 401 and request.method == "GET" else None}
    return render(request, ERROR_PAGE, context, status_code=exc.status_code, headers=headers)


async def storage_error(request: Request, exc: Exception) -> Response:
    """The repository's NotFound / Conflict / InvalidInput as 404 / 409 / 422."""
    if isinstance(exc, repo.InvalidInput):
        return await input_error(request, InputError("", str(exc)))
    status = 404 if isinstance(exc, repo.NotFound) else 409
    return await http_error(request, HTTPException(status, str(exc)))


async def database_error(request: Request, exc: Exception) -> Response:
    """A database without its schema is a 503 saying what to run; any other database error a 500."""
    assert isinstance(exc, OperationalError | ProgrammingError)
    if any(word in str(exc.orig).lower() for word in SCHEMA_WORDS):
        return await http_error(request, HTTPException(503, NO_SCHEMA))
    return await unexpected_error(request, exc)


async def job_limit_error(request: Request, exc: Exception) -> Response:
    retry = getattr(exc, "retry_after_s", 5)
    return await http_error(request, HTTPException(429, str(exc), headers={"Retry-After": str(retry)}))


async def unexpected_error(request: Request, exc: Exception) -> Response:
    reference = uuid.uuid4().hex[:12]
    log.error("unhandled error %s on %s %s", reference, request.method, request.url.path, exc_info=exc)
    message = f"Something went wrong on our side. The error was logged with reference {reference}."
    # Starlette answers a 500 from its outermost middleware, outside SecurityHeaders: set them here.
    headers = {name.decode(): value.decode() for name, value in SECURITY_HEADERS}
    if wants_json(request.url.path):
        response: Response = error_json("", message, 500)
        response.headers.update(headers)
        return response
    return HTMLResponse(
        "<!doctype html><html lang=en><meta charset=utf-8><title>Error · KV Ledger</title>"
        f"<body style='font-family:system-ui;margin:3rem'><h1>Error</h1><p>{message}</p>"
        "<p><a href='/'>Back to KV Ledger</a></p></body></html>",
        status_code=500,
        headers=headers,
    )


def install(app: FastAPI) -> None:
    """Register the mapping on an app."""
    app.add_exception_handler(InputError, input_error)
    for storage in (repo.NotFound, repo.Conflict, repo.InvalidInput):
        app.add_exception_handler(storage, storage_error)
    app.add_exception_handler(OperationalError, database_error)
    app.add_exception_handler(ProgrammingError, database_error)
    app.add_exception_handler(JobLimitError, job_limit_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)
