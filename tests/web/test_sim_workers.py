"""`kvledger serve --workers 2` on SQLite (a file) and PostgreSQL (issue 16 §2, issue 12 item 3):
a job submitted on one worker is polled, cancelled and read on the other; the caps and the
per-client rate limit hold over both workers; SIGTERM stops a running job and the server."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from app.web.sim.routes import WORKER_HEADER

from .. import server
from .saved_support import backend, database_url

__all__ = ["backend", "database_url"]  # fixtures

SMALL: dict[str, Any] = {"pool": {"blocks": 1783, "block_size": 16},
                         "workload": {"shared_prefix_tokens": 512, "shared_fraction": 0.7, "requests_per_level": 300},
                         "ramp": [1, 8, 16, 32], "seed": 2}
#: 200,000 requests (the default work cap), twice: long enough to be cancelled while it runs.
LONG: dict[str, Any] = {**SMALL, "workload": {**SMALL["workload"], "requests_per_level": 20_000},
                        "ramp": list(range(1, 11))}
ENV = {"KVLEDGER_DEMO_DATA": "0", "KVLEDGER_SIM_WORKERS": "1", "KVLEDGER_SIM_MAX_ACTIVE": "4",
       "KVLEDGER_SIM_CLIENT_ACTIVE": "2", "KVLEDGER_SIM_RATE_BURST": "3", "KVLEDGER_SIM_RATE_PER_MIN": "1"}
FINISHED = ("done", "failed", "cancelled")
GUARD_S = 300.0  # hang guards for condition waits on a loaded machine, not speed checks


class Api:
    """JSON requests to the server on a new connection each (so the kernel spreads them over the
    workers), from the loopback address `source`."""

    def __init__(self, url: str, source: str = "127.0.0.1") -> None:
        self.port = int(url.rsplit(":", 1)[1])
        self.source = source

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60, source_address=(self.source, 0))
        try:
            payload = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            data = json.loads(response.read() or b"{}")
            worker = response.getheader(WORKER_HEADER) or f"retry-after {response.getheader('Retry-After')}"
            return response.status, data, worker
        finally:
            conn.close()

    def until(self, method: str, path: str, ok: Callable[[int, dict[str, Any], str], bool]) -> tuple[
            int, dict[str, Any], str]:
        deadline = time.monotonic() + GUARD_S
        while time.monotonic() < deadline:
            reply = self.call(method, path)
            if ok(*reply):
                return reply
            time.sleep(0.05)
        raise AssertionError(f"{method} {path}: condition not reached; last {reply}")


@pytest.fixture
def two_workers(database_url: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    argv = [sys.executable, "-m", "app.cli", "serve", "--workers", "2", "--port"]
    proc, url = server.start_server({**ENV, "KVLEDGER_DATABASE_URL": database_url}, tmp_path / "server.log",
                                    ready="/sim", timeout_s=GUARD_S, argv=argv)
    try:
        yield proc, url
    finally:
        server.stop_server(proc)


def test_jobs_are_shared_by_both_workers(two_workers: tuple[subprocess.Popen[bytes], str], database_url: str) -> None:
    proc, url = two_workers
    api = Api(url)
    status, job, submitter = api.call("POST", "/api/v1/sim/jobs", LONG)
    assert status == 202 and submitter, job
    path = f"/api/v1/sim/jobs/{job['id']}"
    # Polled on the other worker: the same job, running with progress.
    _, seen, _ = api.until("GET", path, lambda s, b, w: s == 200 and w != submitter and b["progress"] > 0)
    assert seen["state"] == "running" and seen["id"] == job["id"]
    # Cancelled through the other worker (repeated until that worker answers; a second cancel is harmless).
    status, cancelled, _ = api.until("POST", path + "/cancel", lambda s, b, w: w != submitter)
    assert status == 200 and cancelled["state"] in ("running", "cancelled")
    final = api.until("GET", path, lambda s, b, w: b.get("state") in FINISHED)[1]
    assert final["state"] == "cancelled" and 0 < final["progress"] < 1 and final["result"] is None
    # Read on both workers.
    on_submitter = api.until("GET", path, lambda s, b, w: w == submitter)
    on_other = api.until("GET", path, lambda s, b, w: w != submitter)
    assert on_submitter[:2] == on_other[:2] == (200, final)

    # Caps over both workers: client A has 1 slot left of 2, B takes 2, C the fourth; D is refused
    # wherever it lands, and at most one job runs at once (KVLEDGER_SIM_WORKERS=1) over both.
    a, b, c, d = (Api(url, f"127.0.0.{n}") for n in (1, 2, 3, 4))
    ids = [client.call("POST", "/api/v1/sim/jobs", LONG)[1]["id"] for client in (a, b, b, c)]
    refusals = [d.call("POST", "/api/v1/sim/jobs", SMALL) for _ in range(6)]
    assert all(s == 429 and "4 simulations are already queued or running" in r["error"]["message"]
               for s, r, _ in refusals), refusals
    assert b.call("POST", "/api/v1/sim/jobs", SMALL)[0] == 429  # B's own two
    states = [a.call("GET", f"/api/v1/sim/jobs/{i}")[1]["state"] for i in ids]
    assert states.count("running") <= 1 and set(states) <= {"queued", "running"}, states
    cancels = [a.call("POST", f"/api/v1/sim/jobs/{job_id}/cancel") for job_id in ids]
    assert all(status == 200 for status, _, _ in cancels), cancels
    # The state each cancel answered with: a job queued when the list was read may have started since
    # (the one before it was cancelled), so what it was when its own cancel landed is what counts.
    at_cancel = [body["state"] for _, body, _ in cancels]
    assert set(at_cancel) <= {"cancelled", "running", "done"}, at_cancel
    for job_id, state in zip(ids, at_cancel, strict=True):
        final_state = a.until("GET", f"/api/v1/sim/jobs/{job_id}", lambda s, r, w: r["state"] in FINISHED)[1]["state"]
        # A queued job is cancelled at once; a running one may finish first and keep its result.
        assert final_state == "cancelled" or (state in ("running", "done") and final_state == "done"), (
            job_id, state, final_state)

    # The rate limit over both workers: A has used 2 of its 3 tokens (1 a minute after that).
    assert a.call("POST", "/api/v1/sim/jobs", SMALL)[0] == 202
    limited = [a.call("POST", "/api/v1/sim/jobs", SMALL) for _ in range(4)]
    assert all(s == 429 and "Too many simulations started from your address" in r["error"]["message"]
               and int(retry.removeprefix("retry-after ")) >= 1 for s, r, retry in limited), limited
    assert c.call("POST", "/api/v1/sim/jobs", SMALL)[0] == 202  # another client is not held up

    # SIGTERM while a job runs: the server stops and the job is recorded as stopped by it.
    running = b.call("POST", "/api/v1/sim/jobs", LONG)[1]["id"]
    b.until("GET", f"/api/v1/sim/jobs/{running}", lambda s, r, w: r["state"] == "running")
    proc.terminate()
    proc.wait(timeout=GUARD_S)
    engine = create_engine(database_url)
    with engine.connect() as conn:
        row = conn.execute(text("SELECT state, error FROM sim_job WHERE id = :id"), {"id": running}).one()
        leftover = conn.execute(text("SELECT count(*) FROM sim_job WHERE state = 'running'")).scalar_one()
    engine.dispose()
    error = row[1] if isinstance(row[1], dict) else json.loads(row[1])
    assert row[0] == "cancelled" and "server stopped" in error["message"]
    assert leftover == 0
