"""Every error that reaches a user is mapped here, in one place, to a response.

- InputError (the domain's "this input is wrong", with a dotted field path): 422. On the API
  and .json twins `{"error": {"field", "message"}}`; on a page, the page the route declared,
  re-rendered with the message next to the field (a fragment for htmx, else the whole page).
- FastAPI's request validation errors: the same 422 shapes.
- HTTP errors (404, 405, ...): JSON or a small page.
- Anything else is a bug: logged with its traceback, answered with a plain 500 message.
  Never a stack trace in a response.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from app.core.errors import InputError
from app.web import querystring
from app.web.limits import wants_json
from app.web.responses import PageSpec, declared_page, render

log = logging.getLogger(__name__)

ERROR_PAGE = PageSpec("pages/error.html", {"nav": ""})


def error_json(field: str, message: str, status_code: int) -> JSONResponse:
    return JSONResponse({"error": {"field": field, "message": message}}, status_code=status_code)


def error_context(exc: InputError) -> dict[str, Any]:
    """The template context of an input error: the message, and where it belongs in the form."""
    key = querystring.field_key(exc.field) if exc.field else None
    return {
        "error": {"field": exc.field, "message": exc.message, "key": key},
        "field_errors": {key or exc.field: exc.message} if (key or exc.field) else {},
    }


async def input_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, InputError)
    if wants_json(request.url.path):
        return error_json(exc.field, exc.message, 422)
    spec = declared_page(request) or ERROR_PAGE
    context = {**error_context(exc), "status": 422, "title": "Input error"}
    return render(request, spec, context, status_code=422)


def _loc(loc: tuple[int | str, ...] | list[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


async def validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    loc = [p for p in first.get("loc", ()) if p not in ("query", "path")]
    return await input_error(request, InputError(_loc(loc), str(first.get("msg", "invalid request"))))


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
               "status": exc.status_code, "title": message}
    return render(request, ERROR_PAGE, context, status_code=exc.status_code, headers=headers)


async def unexpected_error(request: Request, exc: Exception) -> Response:
    reference = uuid.uuid4().hex[:12]
    log.error("unhandled error %s on %s %s", reference, request.method, request.url.path, exc_info=exc)
    message = f"Something went wrong on our side. The error was logged with reference {reference}."
    if wants_json(request.url.path):
        return error_json("", message, 500)
    return HTMLResponse(
        "<!doctype html><html lang=en><meta charset=utf-8><title>Error · KV Ledger</title>"
        f"<body style='font-family:system-ui;margin:3rem'><h1>Error</h1><p>{message}</p>"
        "<p><a href='/'>Back to KV Ledger</a></p></body></html>",
        status_code=500,
    )


def install(app: FastAPI) -> None:
    """Register the mapping on an app."""
    app.add_exception_handler(InputError, input_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)
