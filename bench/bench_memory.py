"""Server memory over 10,000 varied slider requests (issue 14): is it flat?

Run: PYTHONPATH=. .venv/bin/python bench/bench_memory.py [--requests N] [--profile]
(prints Markdown, writes bench/RESULTS-memory.md; reports, never fails).

Drives the whole ASGI app in process — every middleware, the router, the CPU limiter's worker
thread, the htmx fragment — with GET requests whose query strings all differ: utilization,
growth reserve, prefill chunk, max_model_len, TP, model and KV dtype move together, so the plan
cache, the defaults memo and the pure sub-result caches see ever new keys (their bounds are what is
measured). One request in ten is a plan page for a stored base of 64 measured ranks. RSS (from
/proc/self/statm) is recorded every 1,000 requests after a warm-up; growth after the first 1,000 is
the figure: bounded caches fill and then stay, a leak keeps growing. `--profile` runs 300 ticks
of the 8-rank slider under cProfile instead (the server side of issue 11's round trip).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GIB = 2**30
MODELS = ("llama-3.1-8b", "qwen2.5-7b-instruct", "mistral-7b-v0.3", "qwen3-8b")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def query(i: int, base: str) -> str:
    """The i-th request's query string: no two alike."""
    util = f"{0.50 + (i % 49) / 100:.2f}"
    growth = f"{(i // 49) % 20 / 100:.2f}"
    if i % 10 == 9:
        return f"base={base}&util={util}&growth={growth}"
    model = MODELS[(i // 980) % len(MODELS)]
    tp = (1, 2, 4, 8)[(i // 7) % 4]
    mml = 4096 + 1024 * ((i // 3) % 29)
    dtype = ("auto", "fp8")[(i // 11) % 2]
    return f"model={model}&tp={tp}&util={util}&growth={growth}&max_model_len={mml}&kv_cache_dtype={dtype}"


async def get(app: Any, path: str, qs: str, hx: bool = True) -> tuple[int, int]:
    """One GET through the ASGI app: (status, body bytes)."""
    headers = [(b"host", b"127.0.0.1"), (b"accept-encoding", b"identity")]
    if hx:
        headers.append((b"hx-request", b"true"))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": qs.encode(), "root_path": "",
             "headers": headers, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}  # fmt: skip
    status, size = 0, 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, size
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            size += len(message.get("body", b""))

    await app(scope, receive, send)
    return status, size


def measured_base(n: int = 64) -> dict[str, Any]:
    ranks = [{"total": 80 * GIB, "free_at_start": 79 * GIB - i * 4096, "weights": 35 * GIB + i * 8192,
              "non_torch": GIB, "cuda_graphs": GIB // 2, "activation": 3 * GIB} for i in range(n)]  # fmt: skip
    return {"model": {"catalogue": "llama-3.1-70b"}, "layout": {"tp": 8, "dp": n // 8},
            "engine": {"max_model_len": 8192}, "ranks": ranks}  # fmt: skip


async def run(requests: int) -> tuple[list[tuple[int, float, int]], dict[int, int]]:
    from app.settings import Settings
    from app.web.app import create_app, freeze_startup_objects

    app = create_app(Settings(database_url="sqlite://"))
    base = app.state.bases.put(measured_base())
    statuses: dict[int, int] = {}
    rows: list[tuple[int, float, int]] = []
    async with app.router.lifespan_context(app):
        for i in range(200):  # warm-up: imports, templates, first caches
            await get(app, "/plan", query(10**6 + i, base))
        gc.collect()
        freeze_startup_objects()
        rows.append((0, rss_mb(), 0))
        sizes = 0
        for i in range(1, requests + 1):
            status, size = await get(app, "/plan", query(i, base))
            statuses[status] = statuses.get(status, 0) + 1
            sizes += size
            if i % 1000 == 0:
                rows.append((i, rss_mb(), sizes // 1000))
                sizes = 0
    return rows, statuses


def profile(ticks: int) -> None:
    import cProfile
    import pstats

    from app.settings import Settings
    from app.web.app import create_app

    app = create_app(Settings(database_url="sqlite://"))

    async def go() -> None:
        async with app.router.lifespan_context(app):
            for i in range(ticks):
                await get(app, "/plan", f"model=llama-3.1-8b&tp=8&util={0.5 + (i % 49) / 100:.2f}&chunk={512 + i}")

    asyncio.run(go())  # warm
    prof = cProfile.Profile()
    # The route's work runs on a worker thread: profile every thread.
    import threading

    threading.setprofile(lambda *a: None)
    prof.enable()
    t0 = time.process_time()
    asyncio.run(go())
    cpu = time.process_time() - t0
    prof.disable()
    print(f"{ticks} ticks, {cpu / ticks * 1e3:.2f} ms CPU each (profiled)")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


def main() -> int:
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.profile:
        profile(300)
        return 0
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.monotonic()
    rows, statuses = asyncio.run(run(args.requests))
    took = time.monotonic() - t0
    first = next((r for r in rows if r[0] == 1000), rows[-1])
    growth = rows[-1][1] - first[1]
    per_k = [b - a for (_, a, _), (_, b, _) in itertools.pairwise(rows[1:])]
    lines = [
        "# Server memory over varied slider requests (bench/bench_memory.py)",
        "",
        f"Command: `PYTHONPATH=. .venv/bin/python bench/bench_memory.py --requests {args.requests}`. Recorded "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} cores, {platform.python_version()}; "
        f"load average {load} at the start; {took:.0f} s.",
        "",
        "The ASGI app in process (all middleware, the router, the worker thread), every query string different "
        "(utilization, growth, max_model_len, TP, model, KV dtype; one in ten a 64-rank stored base). RSS from "
        "/proc/self/statm after each 1,000 requests.",
        "",
        "| requests | RSS | mean reply |",
        "| ---: | ---: | ---: |",
        *(f"| {n:,} | {mb:.1f} MB | {size / 1024:.1f} KiB |" for n, mb, size in rows),
        "",
        f"Growth from 1,000 to {rows[-1][0]:,} requests: **{growth:+.1f} MB** "
        f"(median per 1,000 after the first: {statistics.median(per_k) if per_k else 0:+.2f} MB). "
        f"Answers by status: {', '.join(f'{s}: {n:,}' for s, n in sorted(statuses.items()))} (the 422s are "
        "TP degrees the model's heads do not divide, answered with the form's error: also requests).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    (ROOT / "bench" / "RESULTS-memory.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
