"""The one body reader of the text imports (`/api/v1/import/log`, `/api/v1/import/nvidia-smi`):
both take the same forms (issue 17 item 21) —

- JSON `{"text": "…"}` (plus the route's optional string fields, e.g. `"model"`);
- a form, `multipart/form-data` or `application/x-www-form-urlencoded`, with a `text` field or a
  `file` upload (a file wins when both are given), plus the same optional fields.

`openapi_body` documents exactly these forms in /openapi.json. Bodies over the server's size limit
are refused before they are read (app.web.limits); a bad body is a 422 naming what is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request
from starlette.datastructures import FormData, UploadFile

from app.core.errors import InputError

JSON_TYPE = "application/json"
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


def openapi_body(what: str, extra: Mapping[str, str]) -> dict[str, Any]:
    """The OpenAPI `requestBody` of a text import: JSON, multipart and urlencoded forms."""
    fields = {"text": {"type": "string", "description": what}}
    fields |= {name: {"type": "string", "description": doc} for name, doc in extra.items()}
    multipart = {**fields, "file": {"type": "string", "format": "binary", "description": f"or {what} as a file"}}
    return {"requestBody": {"required": True, "content": {
        JSON_TYPE: {"schema": {"type": "object", "properties": fields, "required": ["text"]},
                    "example": {"text": "…"}},
        FORM_TYPES[0]: {"schema": {"type": "object", "properties": multipart}},
        FORM_TYPES[1]: {"schema": {"type": "object", "properties": fields}},
    }}}


def _mib(limit: int) -> str:
    return f"{limit / 2**20:g}"


async def _from_json(request: Request, extra: Sequence[str]) -> dict[str, str]:
    return json_fields(await request.body(), extra)


def json_fields(raw: bytes, extra: Sequence[str]) -> dict[str, str]:
    """`text` and the `extra` fields of a JSON body (also read by the import child, import_job)."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InputError("body", 'the body is not valid JSON; send {"text": "…"}') from None
    except RecursionError:  # the stdlib decoder recurses once per nested [ or {
        raise InputError("body", 'the body nests arrays/objects too deeply; send {"text": "…"}') from None
    if not isinstance(data, dict):
        raise InputError("body", 'send a JSON object, {"text": "…"}')
    unknown = [str(k) for k in data if k not in ("text", *extra)]
    if unknown:  # {"log": "…"} read as an empty text ("paste a vLLM startup log"), not as the misspelling
        known = ", ".join(("text", *extra))
        raise InputError(unknown[0][:100], f"unknown field (check the spelling; this body takes {known})")
    out: dict[str, str] = {}
    for name in ("text", *extra):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise InputError(name, f"{name} must be a string")
        out[name] = valid_unicode(value or "")
    return out


def valid_unicode(text: str) -> str:
    """`text` with each unpaired UTF-16 surrogate a JSON string may escape ("\\ud800") replaced by
    U+FFFD, as an uploaded file's undecodable bytes are: such a string cannot be encoded, so the
    size check and the parse would fail on it."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


async def _from_form(request: Request, extra: Sequence[str], limit: int, field: str) -> dict[str, str]:
    # max_part_size: a pasted text field may be as large as the server takes a log (starlette: 1 MiB)
    async with request.form(max_part_size=limit + 1) as form:  # closes the uploads' temporary files
        return await form_fields(form, extra, limit, field)


async def form_fields(form: FormData, extra: Sequence[str], limit: int, field: str) -> dict[str, str]:
    """`text` (a `file` upload wins) and the `extra` fields of a parsed form (also read by the
    import child, import_job)."""
    out: dict[str, str] = {}
    for name in ("text", *extra):
        value = form.get(name)
        out[name] = value if isinstance(value, str) else ""
    upload = form.get("file")
    if isinstance(upload, UploadFile) and upload.filename:
        data = await upload.read(limit + 1)
        if len(data) > limit:
            raise InputError(field, f"the file is larger than {_mib(limit)} MiB")
        out["text"] = data.decode("utf-8", errors="replace")
    return out


async def read_text_body(request: Request, limit: int, field: str, extra: Sequence[str] = ()) -> dict[str, str]:
    """`text` and the `extra` fields of a text-import body in any of the accepted forms."""
    kind = body_kind(request.headers.get("content-type", ""))
    out = await (_from_json(request, extra) if kind == JSON_TYPE else _from_form(request, extra, limit, field))
    return check_size(out, limit, field)


def body_kind(content_type: str) -> str:
    """JSON_TYPE for any JSON body, the form type for a form; an InputError on the body otherwise."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == JSON_TYPE or kind.endswith("+json"):
        return JSON_TYPE
    if kind in FORM_TYPES:
        return kind
    raise InputError("body", f'send JSON {{"text": "…"}}, or a form ({", ".join(FORM_TYPES)}) with a text '
                             f"field or a file upload; got content type {kind or 'none'!r}")


def check_size(out: dict[str, str], limit: int, field: str) -> dict[str, str]:
    if len(out["text"].encode()) > limit:
        raise InputError(field, f"the text is larger than {_mib(limit)} MiB")
    return out
