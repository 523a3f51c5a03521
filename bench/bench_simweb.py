"""Simulator web benchmark: `.venv/bin/python bench/bench_simweb.py` (writes bench/RESULTS-simweb.md).

Measures in process, through the ASGI app (starlette's TestClient, so without socket costs):

1. The htmx polling request of a running job (the `job` block, every 500 ms per open page).
2. The finished job page (charts + level table) for seed 002's 10-level ramp.
3. The job runner's overhead: seed 002's full ramp (2,000 requests × 10 levels, with the
   no-prefix ramp) run directly vs through `JobRunner` (jobs in a SQLite file: the insert, the
   claim, a heartbeat every 0.5 s, the result row and the polling reads).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.db.session import upgrade_to_head  # noqa: E402
from app.services.sim_jobs import JobRunner, simulate, validate  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.web.app import create_app  # noqa: E402
from app.web.deps import database  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

SEED_002: dict[str, Any] = {
    "pool": {"blocks": 1783, "block_size": 16},
    "workload": {"shared_prefix_tokens": 512, "shared_fraction": 0.7, "requests_per_level": 2000},
    "ramp": [1, 2, 4, 8, 12, 16, 24, 32, 48, 64],
    "seed": 2,
}


def _median_ms(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _wait_done(runner: JobRunner, job_id: str) -> None:
    while True:
        view = runner.get(job_id)
        if view is not None and view.finished:
            return
        time.sleep(0.002)


def main() -> None:
    url = f"sqlite:///{tempfile.mkdtemp(prefix='kvl-bench-')}/kvledger.sqlite3"
    upgrade_to_head(url)
    app = create_app(Settings(database_url=url, demo_data=True))
    release = threading.Event()

    def held(doc: dict[str, Any], progress: Callable[[float], None], cancel: Callable[[], bool]) -> dict[str, Any]:
        progress(0.4)
        release.wait()
        return simulate(doc, progress, cancel)

    lines = []
    with TestClient(app) as client:
        app.state.sim_jobs = JobRunner(lambda: database(app), max_work=None, run=held)
        running = client.post("/api/v1/sim/jobs", json=SEED_002).json()
        poll_ms = _median_ms(lambda: client.get(running["url"], headers={"HX-Request": "true"}), 200)
        release.set()
        _wait_done(app.state.sim_jobs, running["id"])
        page = client.get(running["url"])
        page_ms = _median_ms(lambda: client.get(running["url"]), 50)
        lines.append(f"polling fragment (running job):      {poll_ms:6.2f} ms median of 200")
        lines.append(f"finished job page (10 levels):        {page_ms:6.2f} ms median of 50, "
                     f"{len(page.content) / 1024:.0f} KiB uncompressed")

    resolved = validate(SEED_002, None)
    direct_ms = min(_median_ms(lambda: simulate(resolved, lambda f: None, lambda: False), 1) for _ in range(3))
    runner = JobRunner(lambda: database(app), max_work=None)

    def through_runner() -> None:
        _wait_done(runner, runner.submit(SEED_002, owner="bench").id)

    runner_ms = min(_median_ms(through_runner, 1) for _ in range(3))
    lines.append(f"seed 002 ramp, direct:                {direct_ms:6.0f} ms (best of 3)")
    lines.append(f"seed 002 ramp, through JobRunner:     {runner_ms:6.0f} ms (best of 3)")

    header = (f"# Simulator web benchmark\n\nRecorded {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC} on "
              f"{platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
              f"Python {platform.python_version()}, by `.venv/bin/python bench/bench_simweb.py`."
              "\n\n```\n")
    text = header + "\n".join(lines) + "\n```\n"
    (ROOT / "bench" / "RESULTS-simweb.md").write_text(text)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
