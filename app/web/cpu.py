"""Plan computations run one at a time on a worker thread, in arrival order.

The plan routes are CPU-bound Python: threads cannot run them in parallel (the GIL), they only
interleave, so a burst of slider requests spread over FastAPI's 40-thread pool makes every one
of them slow. These routes are `async def` and hand their work to `run`, which uses a
one-token anyio limiter: the work still runs off the event loop, and requests queue first in,
first out. Other blocking work (SQLite, log parsing) keeps FastAPI's default thread pool.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread
from starlette.requests import Request

P = ParamSpec("P")
T = TypeVar("T")

CPU_TOKENS = 1


def _limiter(request: Request) -> anyio.CapacityLimiter:
    limiter = getattr(request.app.state, "cpu_limiter", None)
    if limiter is None:
        # Created on first use, inside the event loop (no await between the check and the set).
        limiter = anyio.CapacityLimiter(CPU_TOKENS)
        request.app.state.cpu_limiter = limiter
    return limiter


async def run(request: Request, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run `func(*args, **kwargs)` on a worker thread under the app's CPU limiter."""
    return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs), limiter=_limiter(request))
