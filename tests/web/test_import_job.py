"""Imports whose body the server only spools and relays (issue 12 item 1, app/web/plan/import_job.py):
the import child parses the body and encodes the reply; the server gets back a small outcome,
stores the distinct plan documents and streams the reply. The JSON is the same key for key; the
page shows its first runs; no temporary file outlives its request."""

from __future__ import annotations

import pickle
import sys
import tempfile
from pathlib import Path

import orjson
import pytest

from app.web.app import create_app
from app.web.deps import TOKEN_HEADER
from app.web.plan import import_job, workflows

from .support import TestClient, make_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_parser import real_logs, typical_log

SAME = {"Sec-Fetch-Site": "same-origin"}
LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"


@pytest.fixture(autouse=True)
def own_tempdir(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every spooled body and reply of these tests lands in a directory of its own (checked empty).
    A short one under /tmp: multiprocessing puts its AF_UNIX listener in the temp dir, and a socket
    path over 107 bytes fails (``OSError: AF_UNIX path too long``; pytest's tmp_path under xdist
    reached it). Kept after the test, as tmp_path's were: multiprocessing keeps using the temp dir it
    first made its own directory in."""
    spool = Path(tempfile.mkdtemp(prefix="kvs-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    return spool


def _expected(text: str, model: str = "") -> dict[str, object]:
    """The parsed log as the reply's JSON states it, computed in this process (orjson, as the
    reply was written before the import moved to the child)."""
    parsed, _docs = workflows.read_import(text, model)
    out: dict[str, object] = orjson.loads(orjson.dumps(parsed))
    return out


@pytest.mark.parametrize("where", ["inline", "child"])
@pytest.mark.parametrize("path", ["/api/v1/import/log", "/import.json"])
def test_the_reply_is_the_parsed_log_and_a_plan_per_run(where: str, path: str, own_tempdir: Path) -> None:
    text = real_logs(1)  # the real logs once: 40 runs, ~0.5 MB
    inline = 10**9 if where == "inline" else 0
    app = create_app(make_settings())
    app.state.isolation.inline_below_chars = inline
    with TestClient(app) as client:
        reply = client.post(path, files={"file": ("vllm.log", text.encode(), "text/plain")}, headers=SAME)
        assert reply.status_code == 200, reply.text[:300]
        assert reply.headers["content-type"] == "application/json"
        body = reply.json()
        plans = body.pop("plans")
        assert body == _expected(text)
        assert [p["run"] for p in plans] == list(range(len(body["runs"])))
        linked = {p["url"] for p in plans if p["url"]}
        assert linked and all(p["error"] for p in plans if not p["url"])
        assert client.get(min(linked)).status_code in (200, 422)  # 422: a run whose plan cannot compute
        for url in linked:  # every link's document is stored (none evicted by a later one)
            assert app.state.bases.get(url.rsplit("=", 1)[1]) is not None
    assert not list(own_tempdir.glob("kvledger-import-*"))  # the spooled body and the reply are gone


def test_the_child_hands_back_a_small_outcome_not_the_parsed_log(own_tempdir: Path) -> None:
    """What the server unpickles is the fields, the distinct plan documents and a number per run:
    a small fraction of the log (the parsed log itself stays in the reply file)."""
    def run(text: str, name: str) -> import_job.ImportOutcome:
        body, reply = own_tempdir / f"body-{name}", own_tempdir / f"reply-{name}"
        body.write_text(orjson.dumps({"text": text}).decode())
        job = import_job.ImportJob(str(body), "application/json", 20 * 2**20, ("model",), 8 * 2**20, str(reply))
        return import_job.run_import(job)

    once = run(real_logs(1), "once")  # every real log once
    text = real_logs(2_000_000)
    outcome = run(text, "repeated")
    reply = own_tempdir / "reply-repeated"
    assert outcome.error is None and once.error is None
    copies = text.count(real_logs(1))
    # every copy's runs are its own: where one copy's last log meets the next copy's first, the next
    # log's process labels come back under other pids and its workers start to size after the last
    # start's engine figures (vllm_log_runs), so no run spans the seam
    assert outcome.run_count == len(outcome.run_docs) == copies * once.run_count
    assert copies >= 3 and len(outcome.docs) <= len(once.docs) + 1  # repeated runs share their documents
    assert len(pickle.dumps(outcome)) < len(text) / 20
    # the reply (without its "plans") is in the file: every run of the parsed log
    written = orjson.loads(reply.read_bytes() + b'"plans":[]}')
    assert len(written["runs"]) == outcome.run_count


def test_the_page_shows_its_first_runs_and_says_how_many_it_has(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_job, "PAGE_RUNS", 5)
    text = real_logs(1)
    runs = len(_expected(text)["runs"])  # type: ignore[arg-type]
    with TestClient(create_app(make_settings())) as client:
        page = client.post("/import", data={"text": text}, headers=SAME)
        assert page.status_code == 200
        assert page.text.count('class="card import-run"') == 5
        assert f"Run 5 of {runs}" in page.text
        assert f"This log has {runs} runs; the first 5 are shown here" in page.text


def test_a_short_log_shows_every_run_without_the_note() -> None:
    text = (LOGS / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log").read_text()
    with TestClient(create_app(make_settings())) as client:
        page = client.post("/import", files={"file": ("x.log", text.encode(), "text/plain")}, headers=SAME)
    assert page.status_code == 200 and "import-run" in page.text
    assert "runs-not-shown" not in page.text


@pytest.mark.parametrize("where", ["inline", "child"])
def test_an_input_error_in_the_child_keeps_the_forms_values_on_the_page(where: str) -> None:
    text = typical_log(3000)  # ~0.4 MB: fits the box
    app = create_app(make_settings())
    app.state.isolation.inline_below_chars = 10**9 if where == "inline" else 0
    with TestClient(app) as client:
        page = client.post("/import", data={"text": text, "tp": "zero", "config": "{}"}, headers=SAME)
    assert page.status_code == 422
    assert "TP must be a whole number" in page.text
    assert text.splitlines()[0] in page.text  # the log stays in its box


def test_a_token_sent_as_a_form_field_still_imports(own_tempdir: Path) -> None:
    """The write guard reads the form for its token field: the body is then spooled from that form."""
    text = real_logs(1)
    with TestClient(create_app(make_settings(write_token="t0ken"))) as client:
        refused = client.post("/import.json", data={"text": text}, headers=SAME)
        assert refused.status_code == 401
        by_field = client.post("/import.json", data={"text": text, "token": "t0ken"}, headers=SAME)
        by_header = client.post("/import.json", data={"text": text}, headers={**SAME, TOKEN_HEADER: "t0ken"})
    assert by_field.status_code == by_header.status_code == 200, by_field.text[:300]
    a, b = by_field.json(), by_header.json()
    a.pop("plans"), b.pop("plans")
    assert a == b == _expected(text)
    assert not list(own_tempdir.glob("kvledger-import-*"))


def test_a_broken_form_is_a_422_on_the_body(own_tempdir: Path) -> None:
    with TestClient(create_app(make_settings())) as client:
        reply = client.post("/api/v1/import/log", content=b"--x\r\nno headers here",
                            headers={"content-type": "multipart/form-data; boundary=x"})
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["field"] in {"body", "log"}
    assert not list(own_tempdir.glob("kvledger-import-*"))
