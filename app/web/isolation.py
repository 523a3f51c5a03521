"""Heavy pure work (parsing a pasted log) runs in a child process, bounded and timed.

A 10 MB log is seconds of pure Python. On a request thread it holds the GIL and the one plan
worker (`cpu.py`) waits behind it, so every slider request slows down; and a parse nobody
waits for any more still runs to its end. Here the work runs in a child process instead:

- at most `workers` at once (a semaphore; a request that cannot get a slot within the time
  limit is told the server is busy, 503);
- each under a time limit: past it the child is killed and the request gets an `InputError`
  on the field that held the input, saying so (the page shows it next to the field);
- each child's address space is capped (`memory_bytes`): a pathological input is a clear
  error, not a server out of memory;
- at shutdown (the app's lifespan) every live child is killed, so SIGTERM is never held up
  by a parse.

Inputs below `INLINE_BELOW_CHARS` (every real start-up log) run inline: they take milliseconds.
Children come from a `forkserver` (not `fork`: the server has threads and locks) that has
already imported the modules in `PRELOAD`, so starting one costs milliseconds, not an import
of the app. Results and errors come back through a pipe; the function must be a module-level
callable whose arguments and result pickle.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import resource
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from starlette.exceptions import HTTPException

from app.core.errors import InputError

T = TypeVar("T")

PRELOAD = ["app.planning", "app.ingest.vllm_log", "app.ingest.catalogue"]
POLL_S = 0.1
CHILD_NICENESS = 5
#: Inputs shorter than this (in characters) run in the calling thread: parsing a real start-up
#: log of this size takes milliseconds (bench/RESULTS-load.md).
INLINE_BELOW_CHARS = 256 * 1024


def _child(
    conn: multiprocessing.connection.Connection, func: Callable[..., object], args: tuple[Any, ...], memory: int
) -> None:
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    os.nice(CHILD_NICENESS)  # interactive requests (sliders) first when cores are short
    try:
        result: tuple[str, object] = ("ok", func(*args))
    except InputError as exc:
        result = ("input", (exc.field, exc.message))
    except MemoryError:
        result = ("input", ("", "the input needs more memory than this server gives one request"))
    except Exception as exc:  # a bug: reported to the parent, which logs it as a 500
        result = ("bug", f"{type(exc).__name__}: {exc}")
    conn.send(result)
    conn.close()


class Isolation:
    """See the module docstring. Thread-safe; `run` blocks the calling (worker) thread."""

    def __init__(
        self, workers: int = 1, time_limit_s: float = 30.0, memory_bytes: int = 4 * 1024**3,
        inline_below_chars: int = INLINE_BELOW_CHARS,
    ) -> None:
        self.workers = workers
        self.inline_below_chars = inline_below_chars
        self.memory_bytes = memory_bytes
        self.time_limit_s = time_limit_s
        self._slots = threading.BoundedSemaphore(workers)
        self._live: set[BaseProcess] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)

    def run(self, field: str, func: Callable[..., T], *args: object) -> T:
        """`func(*args)` in a child process; an `InputError` on `field` past the time limit."""
        if sum(len(a) for a in args if isinstance(a, str)) < self.inline_below_chars:
            return func(*args)  # milliseconds of work: a child would cost more than it saves
        deadline = time.monotonic() + self.time_limit_s
        if self._closed.is_set() or not self._slots.acquire(timeout=self.time_limit_s):
            raise HTTPException(503, "The server is busy with other imports; try again in a minute.")
        try:
            return self._run_one(field, func, args, deadline)  # type: ignore[return-value]
        finally:
            self._slots.release()

    def _run_one(self, field: str, func: Callable[..., object], args: tuple[Any, ...], deadline: float) -> object:
        parent, child = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(target=_child, args=(child, func, args, self.memory_bytes), daemon=True)
        with self._lock:
            self._live.add(proc)
        try:
            proc.start()
            child.close()
            while not parent.poll(POLL_S):
                if self._closed.is_set():
                    raise HTTPException(503, "The server is shutting down; send the request again shortly.")
                if not proc.is_alive() and not parent.poll(0):
                    raise InputError(field, "reading this input ran out of memory or crashed; it was stopped")
                if time.monotonic() > deadline:
                    raise InputError(
                        field,
                        f"reading this input took longer than the {self.time_limit_s:g} s this server allows "
                        "per request, so it was stopped. Send a shorter excerpt (the engine start-ups you need).",
                    )
            try:
                kind, value = parent.recv()
            except EOFError:
                if self._closed.is_set():
                    raise HTTPException(503, "The server is shutting down; send the request again shortly.") from None
                raise InputError(field, "reading this input ran out of memory or crashed; it was stopped") from None
        finally:
            parent.close()
            self._stop(proc)
        if kind == "ok":
            return value
        if kind == "input":
            sub, message = value
            raise InputError(sub or field, message)
        raise RuntimeError(f"isolated {getattr(func, '__name__', func)!r} failed: {value}")

    def _stop(self, proc: BaseProcess) -> None:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5)
        with self._lock:
            self._live.discard(proc)

    def shutdown(self) -> None:
        """Kill every live child and refuse new work (the app is stopping)."""
        self._closed.set()
        with self._lock:
            live = list(self._live)
        for proc in live:
            if proc.is_alive():
                proc.kill()
