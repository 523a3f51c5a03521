"""What the saved-plans and history routes share: the database on `app.state`, one session per
request, and the write guard (same-origin check and optional write token). The storage layer's
errors reach HTTP through the handlers `app.web.errors` registers.

The database (engine plus read and write session factories) is built by the router's lifespan
when the app runs under a server, and lazily (once, under a lock) on the first request that
needs it otherwise; either way it lives on `app.state.saved_db`. Read routes get a session per
request (`SessionDep`: committed on success, rolled back on error, closed before the response
is sent). Write routes get the write session factory (`WriterDep`) and run their one
transaction with `run_write`, so the commit has returned before the response is sent: an
acknowledged save is a durable save.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, FastAPI, Request
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import HTTPException

from app.db.session import Database, open_database

TOKEN_HEADER = "X-KVLedger-Token"
TOKEN_FIELD = "token"
_INIT_LOCK = threading.Lock()
FORM_CONTENT_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the database when the server starts; dispose of its connections when it stops."""
    database(app)
    try:
        yield
    finally:
        db = getattr(app.state, "saved_db", None)
        if isinstance(db, Database):
            db.dispose()
            app.state.saved_db = None


def database(app: FastAPI) -> Database:
    """The app's database, built from `app.state.settings` on first use."""
    db = getattr(app.state, "saved_db", None)
    if isinstance(db, Database):
        return db
    with _INIT_LOCK:
        db = getattr(app.state, "saved_db", None)
        if not isinstance(db, Database):
            db = open_database(app.state.settings)
            app.state.saved_db = db
        return db


def get_database(request: Request) -> Database:
    return database(request.app)


def get_session(request: Request) -> Iterator[Session]:
    """One read session per request: commit on success, roll back on error."""
    with database(request.app).read() as session:
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        session.commit()


def get_writer(request: Request) -> sessionmaker[Session]:
    return database(request.app).write


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
WriterDep = Annotated[sessionmaker[Session], Depends(get_writer)]


# ---------------------------------------------------------------- the write guard


def _host(url: str) -> str:
    try:
        return urlsplit(url).netloc.lower()
    except ValueError:
        return "?"


def check_same_origin(request: Request) -> None:
    """Refuse a write a browser sends from another site (403). Requests without Origin and
    Referer (curl, scripts) are not cross-site requests and pass."""
    # The Host the browser addressed; behind a proxy that rewrites Host, the one it forwarded.
    hosts = {request.headers.get("host", "").lower(),
             request.headers.get("x-forwarded-host", "").split(",")[0].strip().lower()} - {""}
    message = (
        "This write was refused because it came from another site ({source}). "
        "Save from KV Ledger's own pages, or call the API without a browser."
    )
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise HTTPException(403, message.format(source="Sec-Fetch-Site: cross-site"))
    origin = request.headers.get("origin")
    if origin is not None:
        if origin == "null" or _host(origin) not in hosts:
            raise HTTPException(403, message.format(source=f"Origin {origin[:100]}"))
        return
    referer = request.headers.get("referer")
    if referer and _host(referer) not in hosts:
        raise HTTPException(403, message.format(source=f"Referer {_host(referer)[:100]}"))


async def check_write_token(request: Request) -> None:
    """When the server has a write token, require it (header or form field `token`)."""
    expected: str | None = request.app.state.settings.write_token
    if not expected:
        return
    given = request.headers.get(TOKEN_HEADER)
    if given is None and request.headers.get("content-type", "").startswith(FORM_CONTENT_TYPES):
        value = (await request.form()).get(TOKEN_FIELD)
        given = value if isinstance(value, str) and value else None
    if given is None:
        raise HTTPException(
            401, f"This server requires a write token: send it in the {TOKEN_HEADER} header or the token field."
        )
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(403, "The write token is wrong.")


# ---------------------------------------------------------------- the list guard

LIST_COOKIE = "kvledger_token"
TOKEN_QUERY = "token"


def list_token_ok(request: Request) -> bool:
    """Whether this request may see the lists (no token configured, or it carries the right one
    in the header, the `token` query parameter or the cookie `/unlock` sets)."""
    expected: str | None = request.app.state.settings.write_token
    if not expected:
        return True
    for given in (request.headers.get(TOKEN_HEADER), request.query_params.get(TOKEN_QUERY),
                  request.cookies.get(LIST_COOKIE)):
        if given and hmac.compare_digest(given.encode(), expected.encode()):
            return True
    return False


def require_list_token(request: Request) -> None:
    """The lists (saved plans, deployments, a deployment's ledgers and its export) reveal links;
    with KVLEDGER_WRITE_TOKEN set they need the token too (issue 12 item 6): 401 without it."""
    if not list_token_ok(request):
        raise HTTPException(
            401, f"This list needs the server's token: send it in the {TOKEN_HEADER} header or the "
                 f"{TOKEN_QUERY} query parameter, or unlock the lists in this browser below.")


ListGuard = Depends(require_list_token)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


async def write_policy(request: Request) -> None:
    """THE write policy, a dependency of the app itself (so of every route it has, present and
    future): a request with any other method than GET/HEAD/OPTIONS may change state or write
    storage, so it must come from this site (Origin / Sec-Fetch-Site / Referer) and, when the
    server has KVLEDGER_WRITE_TOKEN, carry the token. GET routes never write (a test asserts
    both over every route of the router)."""
    if request.method in SAFE_METHODS:
        return
    check_same_origin(request)
    await check_write_token(request)


WritePolicy = Depends(write_policy)
