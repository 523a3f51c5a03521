"""Load test: `.venv/bin/python bench/bench_load.py` (appends to bench/RESULTS-load.md).

Bounded and loopback only. One server (`serve`, one uvicorn worker, a fresh SQLite data dir) on
127.0.0.1, with a ticker coroutine on its event loop (`serve_ticked`: how late each 2 ms sleep
wakes is the loop's stall); this process runs 8 keep-alive clients moving the plan-page sliders
(htmx fragment requests, every one a fresh position) in interleaved phases of one run — idle,
import, idle, import, idle — where in each import phase one more client posts a 10 MB vLLM log
(every real startup log of tests/data/vllm-logs concatenated, repeated to 10 MB, no filler lines:
bench_parser.real_logs) to `/api/v1/import/log` as a file upload. Recorded per phase: slider
p50/p99, the loop's stalls (p99, max) and the load average; per import its p99 against the idle
phase before it AND the one after it; then the import alone, for its server CPU (from /proc, the
import child included), the shutdown after SIGTERM, and the machine.

Targets (issue 12 item 1): slider p99 during the import no worse than 2x idle; the import
finishes, and costs <= 5 s of server CPU; shutdown <= 10 s after SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_parser import real_logs  # noqa: E402
from bench_web import HTMX_HEADERS, Connection, free_port, machine, pct, slider_paths  # noqa: E402

CLIENTS = 8
IDLE_REQUESTS = 600
IMPORT_PATHS = 3000  # slider positions per import phase (each request a fresh one; 8,960 in all)
REPEATS = 2  # idle, import, idle, import, idle: each import between two idle phases of the same run
TICK_S = 0.002
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


async def under_import(port: int, pid: int, text: str, offset: int, n_paths: int) -> Phase:
    """The sliders while one more client posts the log: they start 0.5 s before it, stop when it ends."""
    stop = asyncio.Event()
    paths = slider_paths(n_paths, offset)
    cpu0, own0, t0 = cpu_seconds(pid), cpu_seconds(pid, tree=False), time.monotonic()
    clients = [asyncio.create_task(slider_client(port, paths[i::CLIENTS], stop)) for i in range(CLIENTS)]
    await asyncio.sleep(0.5)
    status, elapsed, body = await post_log(port, text)
    cpu1, own1 = cpu_seconds(pid), cpu_seconds(pid, tree=False)
    stop.set()
    runs = await asyncio.gather(*clients)
    times = [t for r in runs for t in r]
    ran_out = any(len(r) == len(paths[i::CLIENTS]) for i, r in enumerate(runs))
    return Phase("import", t0, time.monotonic(), times, os.getloadavg()[0],
                 {"status": status, "import_s": elapsed, "server_cpu_s": cpu1 - cpu0, "parent_cpu_s": own1 - own0,
                  "ran_out": ran_out, "body": body.decode(errors="replace")})


async def idle(port: int, offset: int, n: int = IDLE_REQUESTS) -> Phase:
    paths = slider_paths(n, offset)
    t0 = time.monotonic()
    times = [t for r in await asyncio.gather(
        *(slider_client(port, paths[i::CLIENTS], None) for i in range(CLIENTS))) for t in r]
    return Phase("idle", t0, time.monotonic(), times, os.getloadavg()[0], {})


@dataclass
class Phase:
    """One phase of the run: slider latencies (ms) between two monotonic instants."""

    kind: str
    t0: float
    t1: float
    times: list[float]
    load: float  # 1-minute load average at its end
    extra: dict[str, Any] = field(default_factory=dict)

    def p(self, q: float) -> float:
        return pct(self.times, q)


# ---------------------------------------------------------------- the event loop's stalls, in the server


def serve_ticked(port: int, ticks_path: str) -> None:
    """`serve` with a ticker coroutine on the server's event loop: every TICK_S it sleeps, and
    writes how late it woke (monotonic time, ms) to `ticks_path`: the loop's stall (whatever held
    it: a long callback, or the GIL held by another thread). The bench reads it per phase."""
    import contextlib

    import app.web.app as web

    original = web.create_app

    def create_app(settings: Any) -> Any:
        app = original(settings)
        inner = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(a: Any) -> Any:
            task = asyncio.get_running_loop().create_task(_ticker(ticks_path))
            try:
                async with inner(a) as state:
                    yield state
            finally:
                task.cancel()

        app.router.lifespan_context = lifespan
        return app

    web.create_app = create_app  # type: ignore[assignment]
    web.serve("127.0.0.1", port)


async def _ticker(path: str) -> None:
    with open(path, "a") as fh:
        last = flushed = time.monotonic()
        cpu_last = time.process_time()
        while True:
            await asyncio.sleep(TICK_S)
            now, cpu = time.monotonic(), time.process_time()
            # late: wall time past the tick; busy: the CPU this process (any thread) used meanwhile,
            # i.e. the part of the stall the server caused itself rather than waiting for a core
            late = max(0.0, now - last - TICK_S)
            fh.write(f"{now:.4f} {late * 1000:.2f} {min(late, max(0.0, cpu - cpu_last - TICK_S)) * 1000:.2f}\n")
            last, cpu_last = now, cpu
            if now - flushed > 0.25:
                fh.flush()
                flushed = now


def stalls(path: Path, t0: float, t1: float, column: int = 1) -> list[float]:
    """How late (ms) the server's ticker woke between t0 and t1 (`column` 2: of it, how long the
    server itself was busy)."""
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and t0 <= float(parts[0]) <= t1:
            out.append(float(parts[column]))
    return out


def import_cpu_in_process(text: str) -> float:
    """CPU seconds of the work the server's import child does for this text (best of 2)."""
    from app.services import imports

    best = float("inf")
    for _ in range(2):
        t0 = time.process_time()
        imports.read_log(text)
        best = min(best, time.process_time() - t0)
    return best


def run_phases(port: int, pid: int, text: str) -> list[Phase]:
    """idle, import, idle, import, idle (REPEATS imports): each import between two idle phases."""
    phases = [asyncio.run(idle(port, 50))]
    offset = 50 + IDLE_REQUESTS
    for _ in range(REPEATS):
        phases.append(asyncio.run(under_import(port, pid, text, offset, IMPORT_PATHS)))
        phases.append(asyncio.run(idle(port, offset + IMPORT_PATHS)))
        offset += IMPORT_PATHS + IDLE_REQUESTS
    return phases


def phase_rows(phases: list[Phase], ticks: Path, mb: float) -> list[str]:
    rows = ["| phase | load (1 min, at its end) | slider requests | p50 | p99 | loop stall p99 / max "
            "| of it busy: p99 / max | import |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for i, ph in enumerate(phases):
        late = stalls(ticks, ph.t0, ph.t1) or [0.0]
        busy = stalls(ticks, ph.t0, ph.t1, 2) or [0.0]
        note = ""
        if ph.kind == "import":
            x = ph.extra
            note = (f"{x['status']}, {x['import_s']:.2f} s; server CPU {x['server_cpu_s']:.2f} s "
                    f"(server process {x['parent_cpu_s']:.2f} s){'; sliders ran out first' if x['ran_out'] else ''}")
        name = f"{i + 1}. {'idle' if ph.kind == 'idle' else f'during the {mb:.1f} MB import'}"
        rows.append(f"| {name} | {ph.load:.1f} | {len(ph.times)} | {ph.p(50):.1f} ms | {ph.p(99):.1f} ms | "
                    f"{pct(late, 99):.1f} / {max(late):.1f} ms | {pct(busy, 99):.1f} / {max(busy):.1f} ms | {note} |")
    return rows


def verdict_rows(phases: list[Phase], ticks: Path) -> list[str]:
    rows = ["| import | p99 / idle before | p99 / idle after | target | verdict | loop stall max: import / idle "
            "| of it busy |", "| --- | --- | --- | --- | --- | --- | --- |"]

    def worst(ph: Phase, column: int = 1) -> float:
        return max(stalls(ticks, ph.t0, ph.t1, column) or [0.0])

    idle_max = max(worst(ph) for ph in phases if ph.kind == "idle")
    idle_busy = max(worst(ph, 2) for ph in phases if ph.kind == "idle")
    for i in range(1, len(phases) - 1, 2):
        before, during, after = phases[i - 1], phases[i], phases[i + 1]
        r0, r1 = during.p(99) / before.p(99), during.p(99) / after.p(99)
        ok = max(r0, r1) <= TARGET_P99_RATIO and during.extra["status"] == 200
        rows.append(f"| phase {i + 1} | {r0:.2f}x | {r1:.2f}x | <= {TARGET_P99_RATIO:g}x both | "
                    f"{'PASS' if ok else 'FAIL'} | {worst(during):.1f} / {idle_max:.1f} ms | "
                    f"{worst(during, 2):.1f} / {idle_busy:.1f} ms |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=10.0, help="size of the posted log (MB)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--label", default="", help="a note for the results heading")
    args = parser.parse_args()
    text = real_logs(int(1e6 * args.mb))
    import subprocess
    import tempfile

    from bench_web import start

    port = free_port()
    ticks = Path(tempfile.mkdtemp(prefix="kvledger-bench-")) / "ticks.txt"
    ticks.touch()
    load0 = os.getloadavg()
    proc: subprocess.Popen[bytes] = start(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import bench_load; "
                               f"bench_load.serve_ticked({port}, {str(ticks)!r})"],
        f"http://127.0.0.1:{port}/")
    try:
        asyncio.run(slider_client(port, slider_paths(50, 0), None))  # warm-up
        phases = run_phases(port, proc.pid, text)
        alone = asyncio.run(import_alone(port, proc.pid, text))
        time.sleep(0.5)  # the ticker's last lines reach the file
    finally:
        proc.terminate()
        t0 = time.monotonic()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutdown_s = time.monotonic() - t0
    cpu_import = import_cpu_in_process(text)
    load = os.getloadavg()
    lines = [
        f"## {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')} {args.label}".rstrip(), "",
        f"Command: `.venv/bin/python bench/bench_load.py --mb {args.mb:g}` ({CLIENTS} slider clients; "
        f"the server's event loop ticked every {TICK_S * 1000:g} ms, a stall = how late a tick woke)", "",
        *phase_rows(phases, ticks, len(text.encode()) / 1e6), "",
        *verdict_rows(phases, ticks), "",
        "| measure | result | target | verdict |", "| --- | --- | --- | --- |",
        f"| the import alone: HTTP status, wall time | {alone['status']}, {alone['import_s']:.2f} s | 200 | "
        f"{'PASS' if alone['status'] == 200 else 'FAIL'} |",
        f"| the import alone: server CPU, child included (of it, the server process) | {alone['cpu_s']:.2f} s "
        f"({alone['parent_cpu_s']:.2f} s) | <= {TARGET_IMPORT_CPU_S:g} s | "
        f"{'PASS' if alone['cpu_s'] <= TARGET_IMPORT_CPU_S else 'FAIL'} |",
        f"| the import's own CPU (read_log + a plan per run, in process) | {cpu_import:.2f} s | "
        f"<= {TARGET_IMPORT_CPU_S:g} s | {'PASS' if cpu_import <= TARGET_IMPORT_CPU_S else 'FAIL'} |",
        f"| shutdown after SIGTERM | {shutdown_s:.2f} s | <= 10 s | {'PASS' if shutdown_s <= 10 else 'FAIL'} |",
        "",
    ]
    for ph in phases:
        if ph.kind == "import" and ph.extra["status"] != 200:
            lines += [f"Import reply: `{str(ph.extra['body'])[:200]}`", ""]
    lines += [f"Load average at the start: {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}; at the end: "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (2 cores shared with other jobs: wall times scale "
              "with it; CPU seconds less).", ""]
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
