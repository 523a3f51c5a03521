"""Heavy pure work (parsing a pasted log) runs in a child process, bounded and timed.

A 10 MB log is seconds of pure Python. On a request thread it holds the GIL and the one plan
worker (`cpu.py`) waits behind it, so every slider request slows down; and a parse nobody
waits for any more still runs to its end. Here the work runs in a child process instead:

- at most `workers` at once (a semaphore; a request that cannot get a slot within the time
  limit is told the server is busy, 503);
- each under a limit of processor time (`cpu_limit_s`, the child's own CPU seconds, read from
  `/proc/<pid>/stat` every `POLL_S` and enforced again by `RLIMIT_CPU` inside the child) and a
  generous wall-clock limit (`wall_limit_s`): past either the child is killed and the request
  gets an `InputError` on the field that held the input, saying which (the page shows it next to
  the field). CPU time, not wall time, is what an input costs: a child that waits for a core on a
  loaded machine (it runs at a lower priority than the requests) is not stopped for that;
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

import gc
import math
import multiprocessing
import multiprocessing.connection
import os
import pickle
import resource
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from starlette.exceptions import HTTPException

from app.core.errors import InputError

T = TypeVar("T")

#: Imported once by the forkserver, inherited by every child. The forkserver skips a name that does
#: not import without a word: "app.planning" (its read_log now in app.services.imports) left every
#: import child importing the planner itself, 0.6 s of CPU per import (tests/web/test_isolation_preload.py).
PRELOAD = ["app.services.imports", "app.ingest.vllm_log", "app.ingest.catalogue", "app.web.plan.import_job"]
POLL_S = 0.1
#: The child yields the cores to slider requests: it runs at the lowest priority (its limit is in
#: CPU seconds, so waiting for a core does not count against it).
CHILD_NICENESS = 10
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
#: Inputs shorter than this (in characters) run in the calling thread: parsing a real start-up
#: log of this size takes milliseconds (bench/RESULTS-load.md).
INLINE_BELOW_CHARS = 256 * 1024


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a live process has used (Linux /proc), or None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime (proc(5))


def _child(
    conn: multiprocessing.connection.Connection, func: Callable[..., object], args: tuple[Any, ...], memory: int,
    cpu_limit_s: float,
) -> None:
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # The kernel's own stop, one second past the parent's check (which reads /proc): SIGXCPU at the
    # soft limit, SIGKILL at the hard one. Whole seconds only.
    soft = math.ceil(cpu_limit_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
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


def _unpickle(data: bytes) -> tuple[str, Any]:
    """The child's reply. A big result is millions of small objects: with the cyclic collector
    running, unpickling it triggers collection after collection over the whole heap (3-4x the
    time: 0.9 s instead of 0.3 s for a 10 MB import), all of it holding the GIL that slider requests
    need. Nothing unpickled here forms a cycle, so the collector pauses for it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        reply: tuple[str, Any] = pickle.loads(data)
    finally:
        if enabled:
            gc.enable()
    return reply


class Isolation:
    """See the module docstring. Thread-safe; `run` blocks the calling (worker) thread."""

    def __init__(
        self, workers: int = 1, cpu_limit_s: float = 30.0, memory_bytes: int = 4 * 1024**3,
        inline_below_chars: int = INLINE_BELOW_CHARS, wall_limit_s: float = 600.0,
    ) -> None:
        self.workers = workers
        self.inline_below_chars = inline_below_chars
        self.memory_bytes = memory_bytes
        self.cpu_limit_s = cpu_limit_s
        self.wall_limit_s = max(wall_limit_s, cpu_limit_s)
        self._slots = threading.BoundedSemaphore(workers)
        self._live: set[BaseProcess] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)

    def run(self, field: str, func: Callable[..., T], *args: object) -> T:
        """`func(*args)` in a child process; an `InputError` on `field` past the CPU or wall limit."""
        return self.run_sized(field, sum(len(a) for a in args if isinstance(a, str)), func, *args)

    def run_sized(self, field: str, size: int, func: Callable[..., T], *args: object) -> T:
        """`run` for work whose input is not among its arguments (a file the child reads): `size`
        (characters or bytes of that input) decides whether it runs inline."""
        if size < self.inline_below_chars:
            return func(*args)  # milliseconds of work: a child would cost more than it saves
        deadline = time.monotonic() + self.wall_limit_s
        # a second import waits for the slot as long as one may compute, not the whole wall limit
        if self._closed.is_set() or not self._slots.acquire(timeout=min(self.cpu_limit_s, self.wall_limit_s)):
            raise HTTPException(503, "The server is busy with other imports; try again in a minute.")
        try:
            return self._run_one(field, func, args, deadline)  # type: ignore[return-value]
        finally:
            self._slots.release()

    def _run_one(self, field: str, func: Callable[..., object], args: tuple[Any, ...], deadline: float) -> object:
        parent, child = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(target=_child, args=(child, func, args, self.memory_bytes, self.cpu_limit_s),
                                 daemon=True)
        with self._lock:
            self._live.add(proc)
        try:
            proc.start()
            child.close()
            while not parent.poll(POLL_S):
                self._check(field, proc, deadline, parent)
            try:
                kind, value = _unpickle(parent.recv_bytes())
            except EOFError:  # the child ended without a reply: say why when it is known
                proc.join(timeout=1)
                self._check(field, proc, deadline, parent)
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

    def _check(
        self, field: str, proc: BaseProcess, deadline: float, parent: multiprocessing.connection.Connection
    ) -> None:
        """Raise when the child must stop: the server is closing, the child died or used up its
        CPU time (measured here, or the kernel's RLIMIT_CPU signal), or the wall limit passed."""
        if self._closed.is_set():
            raise HTTPException(503, "The server is shutting down; send the request again shortly.")
        used = cpu_seconds(proc.pid) if proc.pid is not None else None
        killed_by_limit = proc.exitcode == -signal.SIGXCPU  # the kernel's stop at RLIMIT_CPU
        if (used is not None and used > self.cpu_limit_s) or killed_by_limit:
            raise InputError(
                field,
                f"reading this input needed more than the {self.cpu_limit_s:g} s of processor time this server "
                "allows per request, so it was stopped. Send a shorter excerpt (the engine start-ups you need).",
            )
        if not proc.is_alive() and not parent.poll(0):
            raise InputError(field, "reading this input ran out of memory or crashed; it was stopped")
        if time.monotonic() > deadline:
            raise InputError(
                field,
                f"reading this input did not finish within the {self.wall_limit_s:g} s this server waits per "
                "request (it is busy), so it was stopped. Try again shortly, or send a shorter excerpt.",
            )

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
