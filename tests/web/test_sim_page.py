"""The simulator page, its jobs and its JSON API: templates and context, lifecycle, caps, errors."""

from __future__ import annotations

import datetime as dt
import functools
import html
import json
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from app.core.sim.io import SimCancelled
from app.db.jobs import JobLimits
from app.db.models import utcnow
from app.db.session import upgrade_to_head
from app.services import plan_query, plans
from app.services.sim_jobs import JobLimitError, JobRunner, limits_of, validate
from app.services.sim_jobs import simulate as run_resolved
from app.services.simulation import run_simulation
from app.settings import Settings
from app.web.app import create_app
from app.web.deps import database
from app.web.sim import forms
from app.web.sim.routes import SYNC_MAX_WORK
from app.web.templating import RenderEvent

from .support import HX, TestClient, make_settings

PAYLOAD = "<img src=x onerror=window.__xss=1>"
#: Small and quick: seed 002's pool and workload, 300 requests on four levels (~0.1 s).
SMALL_FORM = {"requests_per_level": "300", "ramp": "1, 8, 16, 32"}
SMALL_DOC: dict[str, Any] = {"pool": {"blocks": 1783, "block_size": 16},
                             "workload": {"shared_prefix_tokens": 512, "shared_fraction": 0.7,
                                          "requests_per_level": 300},
                             "ramp": [1, 8, 16, 32], "seed": 2}
#: Long: 20,000 requests on ten levels, twice (several seconds), the most the default cap allows.
LONG_DOC: dict[str, Any] = {**SMALL_DOC, "workload": {**SMALL_DOC["workload"], "requests_per_level": 20_000},
                            "ramp": list(range(1, 11))}
FINISHED = ("done", "failed", "cancelled")


@pytest.fixture(scope="module")
def migrated_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the latest migration, copied for each test (jobs live in the database)."""
    path = tmp_path_factory.mktemp("simdb") / "template.sqlite3"
    upgrade_to_head(f"sqlite:///{path}")
    return path


@pytest.fixture
def db_settings(migrated_file: Path, tmp_path: Path) -> Settings:
    shutil.copy(migrated_file, tmp_path / "kvledger.sqlite3")
    return make_settings(database_url=f"sqlite:///{tmp_path / 'kvledger.sqlite3'}")


@pytest.fixture
def app(db_settings: Settings) -> FastAPI:
    return create_app(db_settings)


def _runner(app: FastAPI, run: Callable[..., Any], limits: JobLimits | None = None,
            clock: Callable[[], dt.datetime] | None = None) -> JobRunner:
    settings = app.state.settings
    runner = JobRunner(lambda: database(app), max_work=settings.sim_max_work,
                       limits=limits or limits_of(settings), run=run, clock=clock or utcnow)
    app.state.sim_jobs = runner
    return runner


def _pages(renders: list[RenderEvent]) -> list[tuple[str, str | None]]:
    return [(e.template, e.block) for e in renders]


def _wait(client: TestClient, job_id: str, until: Callable[[dict[str, Any]], bool],
          timeout_s: float = 20.0) -> list[dict[str, Any]]:
    """Poll the job's JSON until `until(status)`; every status seen, in order."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = client.get(f"/api/v1/sim/jobs/{job_id}")
        assert response.status_code == 200
        seen.append(response.json())
        if until(seen[-1]):
            return seen
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} did not reach the expected state: {seen[-1]}")


@functools.cache
def _small_result() -> dict[str, Any]:
    return run_resolved(validate(SMALL_DOC, None), lambda fraction: None, lambda: False)


class Gate:
    """A stand-in simulation that reports half its progress, then waits to be released or cancelled."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Semaphore(0)

    def run(self, doc: dict[str, Any], progress: Callable[[float], None], cancel: Callable[[], bool]) -> dict[str, Any]:
        progress(0.5)
        self.started.release()
        while not self.release.wait(0.005):
            if cancel():
                raise SimCancelled
        return _small_result()


@pytest.fixture
def gate(app: FastAPI) -> Gate:
    gate = Gate()
    _runner(app, gate.run)
    return gate


# -- the form page ----------------------------------------------------------------------------


def test_form_page_renders_seed_002_defaults(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/sim")
    assert response.status_code == 200
    assert _pages(renders) == [("pages/sim.html", None)]
    context = renders[0].context
    assert context["form"] == forms.FORM_DEFAULTS
    assert context["pool"] is None and context["plan_query"] == {}
    assert context["max_work"] == make_settings().sim_max_work
    assert 'action="/sim/jobs"' in response.text and 'enctype="multipart/form-data"' in response.text


def test_plan_query_simulates_the_binding_rank_pool(client: TestClient, renders: list[RenderEvent]) -> None:
    query = {"model": "llama-3.1-70b", "tp": "4", "util": "0.85"}
    response = client.get("/sim", params=query)
    assert response.status_code == 200
    plan = plans.run_plan(plan_query.plan_from_query(query), with_levers=False)
    pool = renders[0].context["pool"]
    assert (pool["blocks"], pool["block_size"]) == (plan["blocks"], plan["block_size"])
    assert f"binding rank {plan['binding_rank']}" in pool["source"]
    assert renders[0].context["plan_query"] == query
    assert '<input type="hidden" name="util" value="0.85">' in response.text
    twin = client.get("/sim.json", params=query).json()
    assert twin["pool"] == {"blocks": plan["blocks"], "block_size": plan["block_size"]}
    assert twin["document"]["plan"] == plan_query.plan_from_query(query)


def test_the_plan_pages_simulate_link_simulates_the_layout_it_opened_at(client: TestClient) -> None:
    """/plan?gpu=L4 24GB&live=4000&max_model_len=32768 opens Llama-3.1-8B at TP2 (its note: the
    smallest layout that starts; TP1's 2,037 blocks hold 32,592 tokens); its "Simulate" link
    carries no TP, and the simulator planned the bare document at TP1: another plan's cliff."""
    query = {"gpu": "L4 24GB", "live": "4000", "max_model_len": "32768"}
    page = client.get("/plan", params=query)
    assert page.status_code == 200
    shown = client.get("/plan.json", params=query).json()
    assert shown["layout"]["tp"] > 1 and any(n.startswith("opened at TP") for n in shown["notes"])
    links = re.findall(r'href="(/sim\?[^"]+)"', page.text)
    assert links
    sim = client.get(html.unescape(links[0]).replace("/sim?", "/sim.json?", 1)).json()
    assert sim["pool"] == {"blocks": shown["blocks"], "block_size": shown["block_size"]}
    assert sim["document"]["plan"]["layout"]["tp"] == shown["layout"]["tp"]
    run = client.post("/api/v1/simulate", json={**sim["document"], "ramp": [1, 2],
                                                "workload": {**sim["document"]["workload"], "requests_per_level": 50}})
    assert run.status_code == 200 and run.json()["input"]["pool"]["blocks"] == shown["blocks"]


def test_form_values_come_from_the_query(client: TestClient, renders: list[RenderEvent]) -> None:
    client.get("/sim", params={"seed": "7", "ramp": "1, 2", "unknown": "x"})
    form = renders[0].context["form"]
    assert (form["seed"], form["ramp"]) == ("7", "1, 2")
    assert "unknown" not in form


def test_sim_json_twin_is_the_document_the_form_submits(client: TestClient) -> None:
    twin = client.get("/sim.json").json()
    assert twin["document"] == forms.document(forms.FORM_DEFAULTS, None)
    assert twin["pool"] == {"blocks": 1783, "block_size": 16}
    assert twin["document"]["workload"]["shared_fraction"] == 0.7


def test_bad_plan_query_shows_why_the_pool_is_missing(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/sim", params={"model": PAYLOAD})
    assert response.status_code == 422
    assert "unknown model" in renders[0].context["pool_error"]
    assert PAYLOAD not in response.text
    assert client.get("/sim.json", params={"model": "nope"}).json()["error"]["field"].startswith("plan.")


# -- jobs -------------------------------------------------------------------------------------


def test_job_lifecycle_from_the_form(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.post("/sim/jobs", data=SMALL_FORM, follow_redirects=False)
    assert response.status_code == 303
    url = response.headers["location"]
    job_id = url.rsplit("/", 1)[1]
    assert url == f"/sim/jobs/{job_id}" and len(job_id) >= 22
    seen = _wait(client, job_id, lambda s: s["state"] in FINISHED)
    progress = [s["progress"] for s in seen]
    assert progress == sorted(progress) and seen[-1]["state"] == "done" and progress[-1] == 1.0
    result = seen[-1]["result"]
    assert result["peak_concurrency"] in (1, 8, 16, 32)
    assert result["recommended_concurrency"] in (1, 8, 16, 32, None)
    assert result["input"]["workload"]["requests_per_level"] == 300

    renders.clear()
    page = client.get(url)
    assert page.status_code == 200 and _pages(renders) == [("pages/sim_job.html", None)]
    context = renders[0].context
    assert set(context["charts"]) == {"throughput", "kv_usage", "hit_rate", "preemptions"}
    assert [row["concurrency"] for row in context["rows"]] == [1, 8, 16, 32]
    assert context["summary"]["peak_concurrency"] == result["peak_concurrency"]
    assert context["rerun_url"] == "/sim?" + "&".join(
        f"{k}={v}".replace(" ", "+").replace(",", "%2C") for k, v in sorted(SMALL_FORM.items()))
    throughput = context["charts"]["throughput"]
    assert [t["name"] for t in throughput["data"]] == ["with shared prefix", "without shared prefix"]
    assert throughput["layout"]["shapes"][0]["x0"] == result["peak_concurrency"]
    assert any(a["text"].startswith("peak") for a in throughput["layout"]["annotations"])
    assert 'hx-trigger="every 500ms"' not in page.text  # finished: no more polling
    assert client.get(url + ".json").json()["result"] == result


def test_progress_increases_then_the_job_finishes(client: TestClient, gate: Gate, renders: list[RenderEvent]) -> None:
    job = client.post("/api/v1/sim/jobs", json=SMALL_DOC).json()
    assert client.get(f"/api/v1/sim/jobs/{job['id']}").json()["progress"] in (0.0, 0.5)
    assert gate.started.acquire(timeout=5)
    _wait(client, job["id"], lambda s: s["progress"] == 0.5)  # written with the next heartbeat
    status = client.get(f"/sim/jobs/{job['id']}.json").json()
    assert (status["state"], status["progress"], status["result"], status["error"]) == ("running", 0.5, None, None)

    fragment = client.get(job["url"], headers=HX)
    assert _pages(renders) == [("pages/sim_job.html", "job")]
    assert fragment.headers["vary"].startswith("HX-Request")
    assert 'hx-trigger="every 500ms"' in fragment.text and "<html" not in fragment.text
    assert 'value="0.5"' in fragment.text

    gate.release.set()
    final = _wait(client, job["id"], lambda s: s["state"] in FINISHED)[-1]
    assert (final["state"], final["progress"]) == ("done", 1.0)
    assert final["result"]["peak_concurrency"] == _small_result()["peak_concurrency"]


def test_running_page_refreshes_without_javascript(client: TestClient, gate: Gate) -> None:
    job = client.post("/api/v1/sim/jobs", json=SMALL_DOC).json()
    assert gate.started.acquire(timeout=5)
    page = client.get(job["url"])
    assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in page.text
    assert page.headers["cache-control"] == "no-store"
    gate.release.set()


def test_cancel_stops_a_long_job(client: TestClient) -> None:
    job = client.post("/api/v1/sim/jobs", json=LONG_DOC).json()
    _wait(client, job["id"], lambda s: s["progress"] > 0)
    assert client.post(f"/api/v1/sim/jobs/{job['id']}/cancel").status_code == 200
    final = _wait(client, job["id"], lambda s: s["state"] in FINISHED, timeout_s=60)[-1]
    assert final["state"] == "cancelled" and final["result"] is None
    assert 0 < final["progress"] < 1  # stopped part-way: the cancel took, not the end of the run


def test_cancel_from_the_page(client: TestClient, gate: Gate, renders: list[RenderEvent]) -> None:
    job = client.post("/api/v1/sim/jobs", json=SMALL_DOC).json()
    assert gate.started.acquire(timeout=5)
    fragment = client.post(f"/sim/jobs/{job['id']}/cancel", headers=HX)
    assert fragment.status_code == 200 and _pages(renders) == [("pages/sim_job.html", "job")]
    assert renders[0].context["job"].cancel_requested
    assert _wait(client, job["id"], lambda s: s["state"] in FINISHED)[-1]["state"] == "cancelled"
    plain = client.post(f"/sim/jobs/{job['id']}/cancel", follow_redirects=False)
    assert (plain.status_code, plain.headers["location"]) == (303, job["url"])


def test_unknown_jobs_are_404(client: TestClient) -> None:
    for method, path in (("get", "/sim/jobs/nope"), ("get", "/sim/jobs/nope.json"), ("post", "/sim/jobs/nope/cancel"),
                         ("get", "/api/v1/sim/jobs/nope"), ("post", "/api/v1/sim/jobs/nope/cancel")):
        response = client.request(method.upper(), path)
        assert response.status_code == 404, path
    assert client.get("/api/v1/sim/jobs/nope").json() == {"error": {"field": "", "message": "Not found."}}


def test_polling_a_forgotten_job_stops(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/sim/jobs/forgotten", headers=HX)
    assert response.status_code == 286  # htmx stops polling and swaps in the explanation
    assert _pages(renders) == [("pages/sim_job.html", "job")]
    assert 'data-state="gone"' in response.text and "hx-trigger" not in response.text


# -- caps -------------------------------------------------------------------------------------


def test_work_cap_names_the_field() -> None:
    app = create_app(make_settings(sim_max_work=1_000))
    with TestClient(app) as client:
        page = client.post("/sim/jobs", data={**SMALL_FORM, "requests_per_level": "500"})
        assert page.status_code == 422
        assert "exceeds the limit of 1,000" in page.text
        assert 'id="err-requests_per_level" role="alert">requests_per_level × ramp levels = 500 × 4' in page.text
        api = client.post("/api/v1/sim/jobs", json={**SMALL_DOC, "workload": {"requests_per_level": 500}})
        assert api.status_code == 422
        assert api.json()["error"]["field"] == "workload.requests_per_level"
        assert "2,000 exceeds the limit of 1,000" in api.json()["error"]["message"]


def test_synchronous_api_is_the_cli_output_and_capped_to_small_runs(client: TestClient) -> None:
    result = client.post("/api/v1/simulate", json=SMALL_DOC)
    assert result.status_code == 200
    assert result.json() == run_simulation(SMALL_DOC, max_work=None) == _small_result()
    plan_doc = {"plan": plan_query.plan_from_query({"model": "llama-3.1-8b"}), "workload": {"requests_per_level": 200},
                "ramp": [1, 8], "seed": 2}
    from_plan = client.post("/api/v1/simulate", json=plan_doc).json()
    assert from_plan == run_simulation(plan_doc, max_work=None)
    assert from_plan["input"]["pool_source"].startswith("plan: binding rank")
    big = client.post("/api/v1/simulate", json={**SMALL_DOC, "workload": {"requests_per_level": SYNC_MAX_WORK}})
    assert big.status_code == 422
    error = big.json()["error"]
    assert error["field"] == "workload.requests_per_level" and "/api/v1/sim/jobs" in error["message"]


def _other(app: FastAPI, host: str) -> TestClient:
    """Another client of the same app (no lifespan of its own), seen from address `host`."""
    return TestClient(app, raise_server_exceptions=True, client=(host, 50000))


def test_concurrent_jobs_are_capped_overall_and_per_client(client: TestClient, app: FastAPI, gate: Gate) -> None:
    settings = app.state.settings
    assert (settings.sim_max_active, settings.sim_client_active) == (4, 2)
    mine = [client.post("/api/v1/sim/jobs", json=SMALL_DOC).json()["id"] for _ in range(2)]
    refused = client.post("/api/v1/sim/jobs", json=SMALL_DOC)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
    assert "You already have 2 simulations queued or running" in refused.json()["error"]["message"]
    page = client.post("/sim/jobs", data=SMALL_FORM)
    assert page.status_code == 429 and "You already have 2" in page.text
    assert client.post("/api/v1/simulate", json=SMALL_DOC).status_code == 429
    other = _other(app, "10.0.0.2")
    theirs = [other.post("/api/v1/sim/jobs", json=SMALL_DOC).json()["id"] for _ in range(2)]
    full = _other(app, "10.0.0.3").post("/api/v1/sim/jobs", json=SMALL_DOC)
    assert full.status_code == 429 and "4 simulations are already queued or running" in full.text
    queued = client.post(f"/api/v1/sim/jobs/{mine[-1]}/cancel").json()
    assert queued["state"] == "cancelled"  # queued behind the one running slot: cancelled at once
    assert client.post("/api/v1/sim/jobs", json=SMALL_DOC).status_code == 202
    gate.release.set()
    for job_id in theirs:
        _wait(other, job_id, lambda s: s["state"] in FINISHED)


def _finish(runner: JobRunner, job_id: str) -> None:
    deadline = time.monotonic() + 60  # a hang guard for a condition wait, not a speed check
    while not (view := runner.get(job_id)) or not view.finished:
        if time.monotonic() > deadline:
            raise AssertionError("the job never finished")
        time.sleep(0.005)


def test_finished_jobs_expire_and_a_flood_never_pushes_out_anothers(app: FastAPI) -> None:
    now = [dt.datetime(2026, 12, 1, tzinfo=dt.UTC)]
    limits = JobLimits(workers=1, max_active=2, client_active=2, client_jobs=3, max_jobs=5, ttl_s=600,
                       rate_per_min=10_000, burst=1000)
    runner = _runner(app, lambda d, p, c: {"ok": True}, limits, clock=lambda: now[0])
    done: list[str] = []
    for _ in range(2):
        done.append(runner.submit(SMALL_DOC, owner="alice").id)
        _finish(runner, done[-1])
        now[0] += dt.timedelta(seconds=1)
    flood: list[str] = []
    for _ in range(5):  # bob's own oldest finished jobs make room for his new ones
        flood.append(runner.submit(SMALL_DOC, owner="bob").id)
        _finish(runner, flood[-1])
        now[0] += dt.timedelta(seconds=1)
    assert [runner.get(i) is not None for i in flood] == [False, False, True, True, True]
    assert all(runner.get(i) is not None for i in done)  # alice's results stay until their expiry
    with pytest.raises(JobLimitError, match="keeps at most 5 simulations") as full:
        runner.submit(SMALL_DOC, owner="carol")
    assert full.value.retry_after_s == 600 - 7  # alice's first job finished 7 s ago
    now[0] += dt.timedelta(seconds=601)
    assert all(runner.get(i) is None for i in done)
    assert runner.submit(SMALL_DOC, owner="carol").state == "queued"  # the expired made room
    assert len(set(done + flood)) == 7 and all(len(i) >= 22 for i in done + flood)
    runner.shutdown()
    with pytest.raises(JobLimitError):
        runner.submit(SMALL_DOC, owner="alice")


def test_submission_rate_limit_per_client(app: FastAPI) -> None:
    now = [dt.datetime(2026, 12, 1, tzinfo=dt.UTC)]
    limits = JobLimits(max_active=100, client_active=100, client_jobs=100, max_jobs=1000, rate_per_min=6, burst=3)
    runner = _runner(app, lambda d, p, c: {"ok": True}, limits, clock=lambda: now[0])
    for _ in range(3):
        runner.submit(SMALL_DOC, owner="alice")
    with pytest.raises(JobLimitError, match="Too many simulations started from your address") as refused:
        runner.submit(SMALL_DOC, owner="alice")
    assert refused.value.retry_after_s == 10  # one token every 60 / 6 s
    assert runner.submit(SMALL_DOC, owner="bob").state == "queued"  # other clients are not held up
    now[0] += dt.timedelta(seconds=10)
    assert runner.submit(SMALL_DOC, owner="alice").state == "queued"
    with pytest.raises(JobLimitError):
        runner.submit(SMALL_DOC, owner="alice")
    runner.shutdown()


def test_rate_limit_over_http_is_429_with_retry_after(db_settings: Settings) -> None:
    from dataclasses import replace

    app = create_app(replace(db_settings, sim_rate_burst=2, sim_rate_per_min=1))
    _runner(app, lambda d, p, c: {"ok": True})
    with TestClient(app) as client:
        for _ in range(2):
            assert client.post("/api/v1/sim/jobs", json=SMALL_DOC).status_code == 202
        refused = client.post("/api/v1/sim/jobs", json=SMALL_DOC)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) in range(50, 61)
        assert "Too many simulations started from your address" in refused.json()["error"]["message"]
        page = client.post("/sim/jobs", data=SMALL_FORM)
        assert page.status_code == 429 and "a minute" in page.text and "retry-after" in page.headers
        assert _other(app, "10.0.0.9").post("/api/v1/sim/jobs", json=SMALL_DOC).status_code == 202


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "key", "words"),
    [
        ({"ramp": "4, 2"}, "ramp", "strictly increasing"),
        ({"ramp": "1, two"}, "ramp", "whole number"),
        ({"shared_fraction": "1.5"}, "shared_fraction", "between 0 and 1"),
        ({"prompt_p99": "wide"}, "prompt_p99", "must be a number"),
        ({"output_max": "8"}, "output_max", "at least min"),
        ({"prompt_lengths": "100, 200\n300, 4x"}, "prompt_lengths", "is not a whole number of tokens"),
        ({"prompt_lengths": "[1, 2"}, "prompt_lengths", "not valid JSON"),
        ({"pool_blocks": "10"}, "pool_blocks", "cannot hold the longest possible request"),
        ({"sched_max_num_batched_tokens": "32"}, "sched_max_num_batched_tokens", "between 64"),
        ({"cost_base_s": "0"}, "cost_base_s", "must be above 0"),
    ],
)
def test_bad_form_input_is_shown_next_to_the_field(
    client: TestClient, renders: list[RenderEvent], fields: dict[str, str], key: str, words: str
) -> None:
    response = client.post("/sim/jobs", data={**SMALL_FORM, **fields})
    assert response.status_code == 422
    assert _pages(renders) == [("pages/sim.html", None)]
    errors = renders[0].context["field_errors"]
    assert list(errors) == [key] and words in errors[key]
    assert renders[0].context["form"][key] == fields[key].strip()


def test_bad_api_input_is_422_with_the_field(client: TestClient) -> None:
    cases = [
        ({"pool": {"blocks": "many"}}, "pool.blocks"),
        ({"pool": {"blocks": 1783}, "ramp": [4, 2]}, "ramp[1]"),
        ({"pool": {"blocks": 1783}, "workload": {"prompt_tokens": [10, -1]}}, "workload.prompt_tokens[1]"),
        ({"plan": {"model": {"catalogue": "nope"}, "gpu": {"total": "80GiB"}}}, "plan.model.catalogue"),
        ({"pool": {"blocks": 1783}, "plan": {}}, "pool"),
        ({"blocks": 3}, "$.blocks"),
    ]
    for doc, field in cases:
        for path in ("/api/v1/simulate", "/api/v1/sim/jobs"):
            response = client.post(path, json=doc)
            assert response.status_code == 422, (path, doc)
            assert response.json()["error"]["field"] == field, (path, doc)
    assert client.post("/api/v1/sim/jobs", content=b"not json",
                       headers={"content-type": "application/json"}).status_code == 422


def test_uploaded_csv_lengths_are_simulated(client: TestClient) -> None:
    csv_text = "prompt_tokens,output_tokens\n800,100\n1200,50\n300,200\n"
    response = client.post(
        "/sim/jobs", data={**SMALL_FORM, "output_lengths": "[64, 128]"},
        files={"prompt_file": ("lengths.csv", csv_text.encode(), "text/csv")}, follow_redirects=False,
    )
    assert response.status_code == 303
    job_id = response.headers["location"].rsplit("/", 1)[1]
    final = _wait(client, job_id, lambda s: s["state"] in FINISHED)[-1]
    workload = final["result"]["input"]["workload"]
    assert workload["prompt_tokens"] == [800, 1200, 300] and workload["output_tokens"] == [64, 128]


def test_non_utf8_upload_is_a_field_error(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.post("/sim/jobs", data=SMALL_FORM, files={"output_file": ("x.csv", b"\xff\xfe\x00", "text/csv")})
    assert response.status_code == 422
    assert renders[0].context["field_errors"] == {"output_lengths": "the uploaded file is not UTF-8 text"}


# -- inert user text --------------------------------------------------------------------------


def test_pasted_text_is_inert(client: TestClient) -> None:
    for key in sorted(forms.FORM_KEYS - {"prefix_caching"}):
        response = client.post("/sim/jobs", data={**SMALL_FORM, key: PAYLOAD})
        assert response.status_code == 422, key
        assert PAYLOAD not in response.text, key
        assert "&lt;img src=x onerror=window.__xss=1&gt;" in response.text, key
    assert PAYLOAD not in client.get("/sim", params={"ramp": PAYLOAD, "tp": PAYLOAD}).text


def test_pool_source_text_is_inert_in_the_job_page(client: TestClient) -> None:
    source = "</script><script>window.__xss=1</script>" + PAYLOAD
    job = client.post("/api/v1/sim/jobs", json={**SMALL_DOC, "pool_source": source}).json()
    _wait(client, job["id"], lambda s: s["state"] in FINISHED)
    page = client.get(job["url"]).text
    assert source not in page and PAYLOAD not in page and "</script><script>" not in page
    assert json.loads(client.get(job["url"] + ".json").text)["result"]["input"]["pool_source"] == source


def test_lengths_parse_from_json_csv_columns_and_wrapped_lists() -> None:
    assert forms.parse_lengths("[812, 96]", "p", "prompt") == [812, 96]
    assert forms.parse_lengths("100, 200,\n300, 400\n", "p", "prompt") == [100, 200, 300, 400]
    table = "id,prompt_tokens,output_tokens\n7,900,120\n8,1500,80\n"
    assert forms.parse_lengths(table, "p", "prompt") == [900, 1500]
    assert forms.parse_lengths(table, "p", "output") == [120, 80]
    assert forms.parse_lengths("tokens\n5\n6", "p", "output") == [5, 6]


ODD_VALUES = ("", " ", "nan", "inf", "-1", "0", "1e309", "99999999999999999999999", "[", "{}", "[1.5]", "１２", "1;2")


def test_odd_form_values_never_fail_the_server(app: FastAPI) -> None:
    _runner(app, lambda doc, progress, cancel: _small_result(),
            JobLimits(max_active=1000, client_active=1000, client_jobs=1000, max_jobs=1000, rate_per_min=10_000,
                      burst=1000))
    with TestClient(app, raise_server_exceptions=True) as client:
        for key in sorted(forms.FORM_KEYS):
            for value in ODD_VALUES:
                response = client.post("/sim/jobs", data={**SMALL_FORM, key: value}, follow_redirects=False)
                assert response.status_code in (303, 422), (key, value, response.status_code)


def test_the_sim_opened_from_a_70b_plan_estimates_its_step_cost(client: TestClient) -> None:
    """Issue 17 item 9: the form of a 70B TP4 plan shows the plan's roofline cost, not the 8B defaults,
    and the finished job says the step cost is an estimate and shows the implied length distribution."""
    plan = {"model": "llama-3.1-70b", "tp": "4"}
    form = client.get("/sim", params=plan).text
    assert 'id="cost-source">roofline estimate: base 10.54 ms' in form
    assert 'placeholder="0.0105 (estimated)"' in form  # base_s, seconds
    started = client.post("/sim/jobs", data={**plan, **SMALL_FORM}, follow_redirects=False)
    assert started.status_code == 303
    job_id = started.headers["location"].rsplit("/", 1)[-1]
    _wait(client, job_id, lambda s: s["state"] in FINISHED, timeout_s=180)
    page = client.get(f"/sim/jobs/{job_id}").text
    assert "Step cost (an estimate): roofline estimate" in page
    assert "Prompt lengths: p10 232, median 735, p90 2,329, p99 5,965 tokens" in page
