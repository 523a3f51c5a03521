"""Load test: `.venv/bin/python bench/bench_load.py` (appends to bench/RESULTS-load.md).

Bounded and loopback only. One server (`serve`, one uvicorn worker, a fresh SQLite data dir) on
127.0.0.1; this process runs 8 keep-alive clients moving the plan-page sliders (htmx fragment
requests, every one a fresh position) and, while they run, one more client posts a 10 MB vLLM
log (every real startup log of tests/data/vllm-logs concatenated, repeated to 10 MB, no filler
lines: bench_parser.real_logs) to
`/api/v1/import/log`. Recorded: slider p50/p99 idle and during the import, the import's wall
time and the server's CPU seconds for it (from /proc), and the machine.

Targets (issue 12 item 1): slider p99 during the import no worse than 2x idle; the import
finishes, and costs <= 5 s of server CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_parser import real_logs  # noqa: E402
from bench_web import HTMX_HEADERS, Connection, free_port, machine, pct, slider_paths  # noqa: E402

CLIENTS = 8
IDLE_REQUESTS = 400
TARGET_IMPORT_CPU_S = 5.0
TARGET_P99_RATIO = 2.0


def cpu_seconds(pid: int, tree: bool = True) -> float:
    """User + system CPU so far (/proc/<pid>/stat, clock ticks) of a process alone, or (`tree`)
    of it and every process below it, children that have exited and were reaped included."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for p in [pid, *descendants(pid)] if tree else [pid]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # utime, stime (+ cutime, cstime: reaped children)
        total += sum(int(x) for x in fields[11:15 if tree else 13]) / tick
    return total


def descendants(pid: int) -> dict[int, int]:
    """pid → parent pid for every process below `pid` (Linux /proc); iterating gives the pids."""
    out: dict[int, int] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            kids = [int(c) for t in Path(f"/proc/{parent}/task").iterdir()
                    for c in (t / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            out[kid] = parent
            todo.append(kid)
    return out


async def import_alone(port: int, pid: int, text: str) -> dict[str, float | int]:
    """The import with nothing else running: the server's CPU for it, in all and in the server
    process itself (receiving the upload, unpickling the child's result, storing each run's plan
    document, writing the reply) apart from the child's parse."""
    tree0, own0 = cpu_seconds(pid), cpu_seconds(pid, tree=False)
    status, elapsed, _ = await post_log(port, text)
    return {"status": status, "import_s": elapsed, "cpu_s": cpu_seconds(pid) - tree0,
            "parent_cpu_s": cpu_seconds(pid, tree=False) - own0}


async def slider_client(port: int, paths: list[str], stop: asyncio.Event | None) -> list[float]:
    conn = await Connection.open(port)
    out: list[float] = []
    for path in paths:
        if stop is not None and stop.is_set():
            break
        t0 = time.perf_counter()
        await conn.get(path, HTMX_HEADERS)
        out.append((time.perf_counter() - t0) * 1000)
    await conn.close()
    return out


async def post_log(port: int, text: str) -> tuple[int, float, bytes]:
    boundary = "kvledgerbenchboundary"
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"vllm.log\"\r\n"
        f"Content-Type: text/plain\r\n\r\n"
    ).encode() + text.encode() + f"\r\n--{boundary}--\r\n".encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /api/v1/import/log HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    t0 = time.perf_counter()
    writer.write(head.encode() + body)
    await writer.drain()
    response = await reader.read()
    elapsed = time.perf_counter() - t0
    writer.close()
    status = int(response.split(b" ", 2)[1]) if response else 0
    return status, elapsed, response.split(b"\r\n\r\n", 1)[-1][:300]


async def under_import(port: int, pid: int, text: str, offset: int) -> dict[str, float | int | str]:
    stop = asyncio.Event()
    paths = slider_paths(7800, offset)  # more than the import lasts: the sliders stop when it ends
    cpu0 = cpu_seconds(pid)
    clients = [asyncio.create_task(slider_client(port, paths[i::CLIENTS], stop)) for i in range(CLIENTS)]
    await asyncio.sleep(0.5)
    status, elapsed, body = await post_log(port, text)
    cpu1 = cpu_seconds(pid)
    stop.set()
    times = [t for r in await asyncio.gather(*clients) for t in r]
    return {"status": status, "import_s": elapsed, "server_cpu_s": cpu1 - cpu0, "n": len(times),
            "p50": statistics.median(times), "p99": pct(times, 99), "body": body.decode(errors="replace")}


async def idle(port: int, offset: int) -> dict[str, float]:
    paths = slider_paths(IDLE_REQUESTS, offset)
    times = [t for r in await asyncio.gather(
        *(slider_client(port, paths[i::CLIENTS], None) for i in range(CLIENTS))) for t in r]
    return {"p50": statistics.median(times), "p99": pct(times, 99), "n": len(times)}


def import_cpu_in_process(text: str) -> float:
    """CPU seconds of the work the server's import child does for this text (best of 2)."""
    from app.services import imports

    best = float("inf")
    for _ in range(2):
        t0 = time.process_time()
        imports.read_log(text)
        best = min(best, time.process_time() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=10.0, help="size of the posted log (MB)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--label", default="", help="a note for the results heading")
    args = parser.parse_args()
    text = real_logs(int(1e6 * args.mb))
    import subprocess

    from bench_web import start

    port = free_port()
    proc: subprocess.Popen[bytes] = start(
        [sys.executable, "-c", f"from app.web.app import serve; serve('127.0.0.1', {port})"],
        f"http://127.0.0.1:{port}/")
    try:
        asyncio.run(slider_client(port, slider_paths(50, 0), None))  # warm-up
        before = asyncio.run(idle(port, 100))
        during = asyncio.run(under_import(port, proc.pid, text, 600))
        after = asyncio.run(idle(port, 8500))
        alone = asyncio.run(import_alone(port, proc.pid, text))
    finally:
        proc.terminate()
        t0 = time.monotonic()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutdown_s = time.monotonic() - t0
    ratio = during["p99"] / before["p99"]  # type: ignore[operator]
    cpu_import = import_cpu_in_process(text)
    load = os.getloadavg()
    lines = [
        f"## {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')} {args.label}".rstrip(), "",
        f"Command: `.venv/bin/python bench/bench_load.py --mb {args.mb:g}`", "",
        "| measure | result | target | verdict |", "| --- | --- | --- | --- |",
        f"| slider idle, {CLIENTS} clients | p50 {before['p50']:.1f} ms, p99 {before['p99']:.1f} ms "
        f"(n={before['n']}) | | |",
        f"| slider during the {len(text.encode()) / 1e6:.1f} MB import | p50 {during['p50']:.1f} ms, "
        f"p99 {during['p99']:.1f} ms (n={during['n']}) | p99 <= {TARGET_P99_RATIO:g}x idle | "
        f"{'PASS' if ratio <= TARGET_P99_RATIO else 'FAIL'} ({ratio:.2f}x) |",
        f"| import: HTTP status, wall time | {during['status']}, {during['import_s']:.2f} s | 200 | "
        f"{'PASS' if during['status'] == 200 else 'FAIL'} |",
        f"| server CPU while importing (the import and every slider request) | {during['server_cpu_s']:.2f} s "
        "| | |",
        f"| the import alone: HTTP status, wall time | {alone['status']}, {alone['import_s']:.2f} s | 200 | "
        f"{'PASS' if alone['status'] == 200 else 'FAIL'} |",
        f"| the import alone: server CPU, child included (of it, the server process) | {alone['cpu_s']:.2f} s "
        f"({alone['parent_cpu_s']:.2f} s) | <= {TARGET_IMPORT_CPU_S:g} s | "
        f"{'PASS' if alone['cpu_s'] <= TARGET_IMPORT_CPU_S else 'FAIL'} |",
        f"| the import's own CPU (read_log + a plan per run, in process) | {cpu_import:.2f} s | "
        f"<= {TARGET_IMPORT_CPU_S:g} s | {'PASS' if cpu_import <= TARGET_IMPORT_CPU_S else 'FAIL'} |",
        f"| slider idle after the import | p50 {after['p50']:.1f} ms, p99 {after['p99']:.1f} ms | | |",
        f"| shutdown after SIGTERM | {shutdown_s:.2f} s | <= 10 s | {'PASS' if shutdown_s <= 10 else 'FAIL'} |",
        "",
    ]
    if during["status"] != 200:
        lines += [f"Import reply: `{str(during['body'])[:200]}`", ""]
    lines += [f"Load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (2 cores shared with "
              "other jobs: wall times scale with it; CPU seconds do not).", ""]
    lines += ["Machine:", "", machine(), "", ""]
    report = "\n".join(lines)
    print(report)
    if not args.no_write:
        out = ROOT / "bench" / "RESULTS-load.md"
        head = "" if out.exists() else "# Load test: sliders during a 10 MB log import (bench/bench_load.py)\n\n"
        with out.open("a") as fh:
            fh.write(head + report)


if __name__ == "__main__":
    main()
