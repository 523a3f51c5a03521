"""Who a request comes from, for per-client caps and rate limits: the client's address, hashed
(the address itself is never stored). Behind a reverse proxy every client is the proxy's address.

`CLIENT` holds the current request's key; the web app's middleware (`app.web.edge.Edge`) sets it for
each request (context variables follow the request into worker threads), so storage code deep
below a route (base documents) can attribute a write without every caller passing it along.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar

CLIENT: ContextVar[str] = ContextVar("kvledger_client", default="")


def key_of(host: str) -> str:
    return hashlib.sha256(host.encode()).hexdigest()[:16]
