"""Log imports that never hold the server's event loop (issue 12 item 1).

A 10 MB import used to stall every slider request in flight for hundreds of milliseconds at a
time: the server decoded the 10 MB upload, unpickled the import child's 9 MB result and encoded a
27 MB reply, each one long call holding the GIL. Here the server process only moves bytes:

1. `spool`: the request body goes into a temporary file chunk by chunk as it arrives (never
   parsed, decoded or held whole by the server);
2. `run_import`, in the import child (web/isolation.py: bounded, niced, under the CPU and wall
   limits): parses that body (JSON or a form, with Starlette's own parsers and text_body's rules),
   checks the fields, reads the log (`workflows.read_import`), writes the reply's JSON (the parsed
   log, orjson) into a second temporary file, and hands back only a small `ImportOutcome`: the
   form's short fields, each distinct plan document as canonical JSON (a 10 MB log of 5,372 runs
   has 13), per run which one (or why none) and, for the page, its first `PAGE_RUNS` runs;
3. the server stores those documents (`BaseStore.put_many`, on a worker thread), builds each
   run's plan link, and streams the reply file to the client in `CHUNK`s, followed by its
   `"plans"` key: the same JSON, key for key, as before.

Small bodies (below the isolation's inline threshold) take the same path in the request's worker
thread. When the write guard has already read the form (a write token sent as a form field), the
parsed fields are spooled as JSON instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, Headers
from starlette.formparsers import FormParser, MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import StreamingResponse

from app.core.errors import InputError
from app.services.base_documents import BaseStore, canonical
from app.web import querystring
from app.web.plan import text_body, workflows

JSON = dict[str, Any]
#: Bytes per read of a spooled reply (a gzip client's chunk is compressed on the event loop: ~1 ms).
CHUNK = 64 * 1024
#: Runs the import page shows in full; the JSON replies (/import.json, /api/v1/import/log) have every run.
PAGE_RUNS = 100
FIELD = "log"  # the field an import's errors belong to


@dataclass(frozen=True)
class ImportJob:
    """What the import child is given: where the body is, how to read it and what to answer."""

    body_path: str
    content_type: str
    limit: int  # the largest log text, bytes (Settings.max_log_bytes)
    fields: tuple[str, ...]  # the optional string fields besides `text`
    allowance: int  # bytes of plan documents one client may hold (Settings.base_client_bytes)
    reply_path: str | None = None  # a JSON reply: where the parsed log's JSON goes
    page_runs: int = 0  # the page: how many runs it shows in full


@dataclass
class ImportOutcome:
    """The import child's small answer (see the module docstring)."""

    fields: dict[str, str]  # the short fields; `text` only for the page, and only when it fits the box
    error: tuple[str, str] | None = None  # an InputError's field and message
    layout: dict[str, int] = field(default_factory=dict)
    docs: list[bytes] = field(default_factory=list)  # canonical JSON of each distinct plan document
    run_docs: list[int] = field(default_factory=list)  # per run (or per shown run): its docs index, or -1
    run_errors: list[str | None] = field(default_factory=list)  # why that run has no document
    run_count: int = 0
    runs: list[JSON] = field(default_factory=list)  # the page: its runs' display pieces
    findings: list[Any] = field(default_factory=list)  # the page: the log's own findings


# ------------------------------------------------------------------ the child's side


def run_import(job: ImportJob) -> ImportOutcome:
    """The whole import for one spooled body (module level: it runs in the import child)."""
    fields: dict[str, str] = {}
    try:
        fields = read_body(job)
        return _imported(job, fields)
    except InputError as exc:
        return ImportOutcome(_kept(job, fields), (exc.field, exc.message))


def read_body(job: ImportJob) -> dict[str, str]:
    """`text` and the job's fields from the spooled body, in any of text_body's forms."""
    kind = text_body.body_kind(job.content_type)
    if kind == text_body.JSON_TYPE:
        with open(job.body_path, "rb") as fh:
            out = text_body.json_fields(fh.read(), job.fields)
    else:
        out = asyncio.run(_form_fields(job, kind))
    return text_body.check_size(out, job.limit, FIELD)


async def _form_fields(job: ImportJob, kind: str) -> dict[str, str]:
    async def stream() -> AsyncGenerator[bytes, None]:
        with open(job.body_path, "rb") as fh:
            while chunk := fh.read(CHUNK):
                yield chunk

    headers = Headers({"content-type": job.content_type})
    parser: FormParser | MultiPartParser
    if kind == text_body.FORM_TYPES[0]:
        parser = MultiPartParser(headers, stream(), max_part_size=job.limit + 1)
    else:
        parser = FormParser(headers, stream(), max_part_size=job.limit + 1)
    try:
        form: FormData = await parser.parse()
    except MultiPartException as exc:
        raise InputError("body", f"the form cannot be read: {exc.message}") from None
    try:
        return await text_body.form_fields(form, job.fields, job.limit, FIELD)
    finally:
        await form.close()


def _kept(job: ImportJob, fields: Mapping[str, str]) -> dict[str, str]:
    """The fields the server needs back: the short ones, and for the page the log if it fits its box."""
    kept = {k: v for k, v in fields.items() if k != "text"}
    text = fields.get("text", "")
    if job.page_runs and len(text.encode()) <= workflows.KEEP_IN_BOX_BYTES:
        kept["text"] = text
    return kept


def _imported(job: ImportJob, fields: Mapping[str, str]) -> ImportOutcome:
    text = workflows.log_text(fields["text"], None, job.limit)
    layout = workflows.import_layout(fields.get("tp", ""), fields.get("pp", ""))
    parsed, docs = workflows.read_import(text, fields.get("model", ""), layout, fields.get("config", ""))
    runs: list[JSON] = parsed.get("runs") or []
    out = ImportOutcome(_kept(job, fields), layout=layout, run_count=len(runs))
    indexed = range(len(runs)) if job.reply_path is not None else range(min(len(runs), job.page_runs))
    _distinct_documents(out, docs, indexed, job.allowance)
    if job.reply_path is not None:
        _write_reply(job.reply_path, parsed)
    if job.page_runs:
        out.runs = [workflows.run_display(i, runs[i]) for i in indexed]
        out.findings = list(parsed.get("findings") or [])
    return out


def _distinct_documents(
    out: ImportOutcome, docs: Sequence[tuple[JSON | None, str | None]], indexed: range, allowance: int
) -> None:
    """Each distinct plan document once (runs that share one share the object: `read_log`), as
    canonical JSON, as many as fit one client's allowance together (`DurableBaseStore.put_many`
    stores no more); per run its index, or -1 and why."""
    by_object: dict[int, int] = {}
    by_content: dict[str, int] = {}
    total = 0
    for i in indexed:
        doc, error = docs[i] if i < len(docs) else (None, "no plan for this run")
        if doc is None:
            out.run_docs.append(-1)
            out.run_errors.append(error)
            continue
        index = by_object.get(id(doc))
        if index is None:
            data = canonical(doc)
            key = hashlib.sha256(data).hexdigest()
            index = by_content.get(key)
            if index is None and total + len(data) <= allowance:
                index = by_content[key] = len(out.docs)
                out.docs.append(data)
                total += len(data)
            index = by_object[id(doc)] = -1 if index is None else index
        out.run_docs.append(index)
        out.run_errors.append(None if index >= 0 else workflows.PLANS_PAST_ALLOWANCE)


def _write_reply(path: str, parsed: Mapping[str, Any]) -> None:
    """The parsed log's JSON without its closing brace (and with a comma when it has keys): the
    server appends `"plans": […]}` (orjson, as `FastJSONResponse` wrote the whole reply)."""
    data = orjson.dumps(parsed)
    with open(path, "wb") as fh:
        fh.write(memoryview(data)[:-1])
        if len(data) > 2:
            fh.write(b",")


# ------------------------------------------------------------------ the server's side


@dataclass(frozen=True)
class Spooled:
    path: str
    size: int
    content_type: str


async def spool(request: Request, extra: Sequence[str]) -> Spooled:
    """The request body in a temporary file, written as it arrives (see the module docstring)."""
    fd, path = tempfile.mkstemp(prefix="kvledger-import-", suffix=".body")
    content_type, size = request.headers.get("content-type", ""), 0
    try:
        with os.fdopen(fd, "wb") as fh:
            form = getattr(request, "_form", None)  # Starlette's cache of a form already read
            if isinstance(form, FormData):
                limit = request.app.state.settings.max_log_bytes
                fields = await text_body.form_fields(form, extra, limit, FIELD)
                content_type, size = text_body.JSON_TYPE, fh.write(orjson.dumps(fields))
            else:
                async for chunk in request.stream():
                    size += fh.write(chunk)
    except BaseException:
        os.unlink(path)
        raise
    return Spooled(path, size, content_type)


async def run(request: Request, extra: Sequence[str], page_runs: int = 0) -> tuple[ImportOutcome, str | None]:
    """Spool the body and run the import (in the child, or inline when small) on a worker thread.
    The outcome and, for a JSON reply (`page_runs` 0), the path of its spooled JSON."""
    settings = request.app.state.settings
    body = await spool(request, extra)
    reply_path = None
    try:
        if not page_runs:
            fd, reply_path = tempfile.mkstemp(prefix="kvledger-import-", suffix=".json")
            os.close(fd)
        job = ImportJob(body.path, body.content_type, settings.max_log_bytes, tuple(extra),
                        settings.base_client_bytes, reply_path, page_runs)
        outcome: ImportOutcome = await run_in_threadpool(
            request.app.state.isolation.run_sized, FIELD, body.size, run_import, job)
    except BaseException:
        _remove(reply_path)
        raise
    finally:
        await _remove_off_loop(body.path)
    if outcome.error is not None:
        _remove(reply_path)
    return outcome, reply_path


def raise_error(outcome: ImportOutcome) -> None:
    if outcome.error is not None:
        raise InputError(*outcome.error)


async def _remove_off_loop(path: str) -> None:
    """Unlink on a worker thread: freeing a 10 MB file's pages takes the kernel tens of ms."""
    try:
        await run_in_threadpool(_remove, path)
    finally:
        _remove(path)  # cancelled: here; a no-op when it is gone already


def _remove(path: str | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def plan_links(outcome: ImportOutcome, bases: BaseStore) -> list[dict[str, Any]]:
    """Each run's link to its plan (or why there is none); the distinct documents are stored in
    one write. Runs that share a document share its URL (one encoding)."""
    ids = bases.put_many([json.loads(data) for data in outcome.docs])
    urls = [querystring.page_url("/plan", {"base": base_id}) if base_id else None for base_id in ids]
    links = []
    for index, error in zip(outcome.run_docs, outcome.run_errors, strict=True):
        url = urls[index] if index >= 0 else None
        links.append({"plan_url": url, "plan_error": None if url else error or workflows.PLANS_PAST_ALLOWANCE})
    return links


def _plans_tail(outcome: ImportOutcome, bases: BaseStore) -> bytes:
    links = plan_links(outcome, bases)
    plans = [{"run": i, "url": link["plan_url"], "error": link["plan_error"]} for i, link in enumerate(links)]
    return b'"plans":' + orjson.dumps(plans) + b"}"


async def json_reply(request: Request, extra: Sequence[str]) -> StreamingResponse:
    """The import's JSON (the parsed log and `plans`, one link per run), relayed from its file."""
    outcome, reply_path = await run(request, extra)
    raise_error(outcome)
    assert reply_path is not None
    try:
        tail = await run_in_threadpool(_plans_tail, outcome, request.app.state.bases)
        fh = open(reply_path, "rb")  # noqa: SIM115 (closed by the relay)
    finally:
        _remove(reply_path)  # an open file stays readable
    size = os.fstat(fh.fileno()).st_size + len(tail)

    async def relay() -> AsyncIterator[bytes]:
        try:
            while chunk := fh.read(CHUNK):
                yield chunk
            yield tail
        finally:  # closing frees the unlinked file: tens of ms for a big reply, off the loop
            try:
                await run_in_threadpool(fh.close)
            finally:
                fh.close()  # cancelled (the client left): here; a no-op when closed already

    return StreamingResponse(relay(), media_type="application/json", headers={"content-length": str(size)})


def page_context(outcome: ImportOutcome, bases: BaseStore) -> dict[str, Any]:
    """The import page's preview: its first runs with their plan links, the log's findings."""
    links = plan_links(outcome, bases)
    runs = [{**run, **link} for run, link in zip(outcome.runs, links, strict=True)]
    return {"runs": runs, "runs_total": outcome.run_count, "findings": outcome.findings,
            "layout": dict(outcome.layout)}
