"""The API contract in OpenAPI (issue 12 item 9): real request-body schemas and every status an
operation can answer, each with the error body it carries.

FastAPI states what it can infer: the success status and a 422 with its own validation shape.
KV Ledger answers every error as `{"error": {"field", "message"}}` (`errors.py`), and some
statuses come from layers FastAPI does not see. `type_contract` completes the document once,
when it is first built:

- every operation: 422 with the error body (a query, path or body field is invalid);
- every operation that takes a body: 400 (the body does not parse as its content type) and 413
  (larger than the server accepts: `limits.BodySizeLimit`);
- every operation that is not GET: 401 and 403 (`deps.write_policy`: the write token, a
  cross-site request);
- every operation with a path parameter: 404;
- what a route declares itself with `responses=errors(...)` (409 a taken slug, 429 too many
  jobs, 503 the database has no schema, ...);
- request bodies named with `body_schema(...)`: the pydantic model's (or a hand-written) JSON
  schema, registered under components, instead of FastAPI's "any object" for a `dict` body
  (routes keep parsing a dict so that their error messages stay the domain's own).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

ERROR_BODY: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["field", "message"],
        "properties": {
            "field": {"type": "string", "description": "the dotted path of the field at fault ('' if none)"},
            "message": {"type": "string", "description": "what is wrong, in words"},
        },
    }},
}

REASONS: dict[int, str] = {
    400: "the body does not parse as its content type (malformed JSON or multipart)",
    401: "the server has a write token and it was not sent",
    403: "a cross-site request, or a wrong write token",
    404: "no such record",
    409: "a conflict: the slug is taken, or the record was changed outside KV Ledger",
    410: "this operation is retired (the message says what replaced it)",
    413: "the body is larger than this server accepts",
    415: "the body's content type is not one this operation reads",
    422: "a field is invalid (error.field names it)",
    429: "too many requests from this client (Retry-After says when to retry)",
    503: "the database has no schema yet, the server is busy or shutting down",
}

#: Extra body schemas by name (JSON schema dicts or pydantic models), filled by the modules
#: that own them (`register_body`).
_BODIES: dict[str, Callable[[], Mapping[str, Any]]] = {}
_NEEDS: dict[str, tuple[str, ...]] = {}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: these statuses, each with its reason and the error body."""
    return {code: {"description": REASONS[code], "content": {"application/json": {"schema": ERROR_BODY}}}
            for code in codes}


def register_body(name: str, schema: type[BaseModel] | Mapping[str, Any], needs: tuple[str, ...] = ()) -> None:
    """Name a body schema for `body_schema` (`needs`: other registered schemas it refers to)."""
    _NEEDS[name] = needs
    if isinstance(schema, Mapping):
        _BODIES[name] = lambda: schema
    else:
        _BODIES[name] = lambda: schema.model_json_schema(ref_template="#/components/schemas/{model}")


def body_schema(name: str, media: str = "application/json") -> dict[str, Any]:
    """`openapi_extra=` for a route whose body is the registered schema `name`."""
    return {"x-kvledger-body": {"name": name, "media": media}}


def _set_body(operation: dict[str, Any], components: dict[str, Any]) -> None:
    marker = operation.pop("x-kvledger-body", None)
    if marker is None:
        return
    name, media = marker["name"], marker["media"]
    _add_component(name, components)
    body = operation.setdefault("requestBody", {"required": True, "content": {}})
    old = body.setdefault("content", {}).get(media) or {}
    body["content"][media] = {**old, "schema": {"$ref": f"#/components/schemas/{name}"}}


def _add_component(name: str, components: dict[str, Any]) -> None:
    if name in components:
        return
    schema = dict(_BODIES[name]())
    for sub, sub_schema in (schema.pop("$defs", None) or {}).items():
        components.setdefault(sub, sub_schema)
    components[name] = schema
    for other in _NEEDS.get(name, ()):
        _add_component(other, components)


def _complete(operation: dict[str, Any], method: str, path: str) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    codes = [422]
    if "requestBody" in operation:
        codes += [400, 413]
    if method != "get":
        codes += [401, 403]
    if "{" in path:
        codes.append(404)
    for code in codes:
        responses.setdefault(str(code), errors(code)[code])
    for status, response in responses.items():
        if status[:1] in "45":  # every error is the one error body (FastAPI's own 422 shape is never sent)
            response["content"] = {"application/json": {"schema": ERROR_BODY}}
            response.setdefault("description", REASONS.get(int(status), "error"))


def type_contract(schema: dict[str, Any]) -> dict[str, Any]:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for path, operations in (schema.get("paths") or {}).items():
        for method, operation in operations.items():
            _set_body(operation, components)
            _complete(operation, method, path)
    paths = json.dumps(schema.get("paths") or {})
    for unused in ("HTTPValidationError", "ValidationError"):
        if f"/{unused}\"" not in paths and f"/{unused}\"" not in json.dumps(components):
            components.pop(unused, None)
    return schema


def install(app: FastAPI) -> None:
    """Make `app.openapi()` return the completed contract (built once, then cached)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = type_contract(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
