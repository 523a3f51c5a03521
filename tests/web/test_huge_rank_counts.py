"""100,000 ranks through the API and the CLI (issue 12 item 7): the reply is a summary of bounded
size and the process's peak memory stays bounded. Each run is its own subprocess so its peak RSS
(its VmHWM) is its own; the bounds are generous (the unbounded form took 631 MB in the
server and 694 MB in the CLI with a 48 MB reply); no wall-clock time is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RANKS = 100_000
GIB = 2**30
MAX_RSS_MB = 450
MAX_REPLY_BYTES = 1_000_000


def huge_document(distinct: bool) -> dict[str, Any]:
    ranks = [
        {"total": 80 * GIB, "free_at_start": 79 * GIB - ((i * 7919) % 4001 if distinct else 0) * 4096,
         "weights": 35 * GIB, "non_torch": GIB, "cuda_graphs": GIB // 2, "activation": 3 * GIB}
        for i in range(RANKS)
    ]  # fmt: skip
    return {"model": {"kv_bytes_per_token": 131072}, "layout": {"tp": 8, "dp": RANKS // 8},
            "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192}, "ranks": ranks}  # fmt: skip


#: Appended to each child's code: its own peak RSS on stderr. VmHWM is the high-water mark of this
#: process's memory (reset by exec); ru_maxrss would carry the forking pytest process's size over.
REPORT_RSS = (
    "\nimport sys\n"
    "sys.stderr.write(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).replace(':', ''))\n"
)


def run_measured(code: str, args: list[str], stdin: bytes | None = None) -> tuple[bytes, int]:
    """The child's stdout and its peak RSS in MB."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code + REPORT_RSS, *args], input=stdin, capture_output=True,
                          env=env, cwd=ROOT, timeout=900, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stderr.decode().splitlines() if x.startswith("VmHWM"))
    return proc.stdout, int(line.split()[1]) // 1024  # "VmHWM 123456 kB"


def check_summary(result: dict[str, Any], distinct: bool) -> None:
    assert result["ranks_form"] == "grouped" and result["layout"]["ranks"] == RANKS
    groups = result["rank_groups"]
    assert len(groups) == len(result["ranks"]) <= 256
    covered = sum(g["count"] for g in groups)
    assert covered == RANKS if result["rank_groups_omitted"] == 0 else covered < RANKS
    if not distinct:
        assert len(groups) == 1 and groups[0]["ranks"] == f"0–{RANKS - 1}"
    assert result["rank_distribution"]["ranks"] == RANKS
    assert sum(result["rank_distribution"]["kv_bytes_histogram"]["counts"]) == RANKS
    assert any(r["binding"] for r in result["ranks"])


@pytest.mark.parametrize("distinct", [False, True], ids=["identical", "distinct"])
def test_cli_plan_of_100k_ranks_is_bounded(tmp_path: Path, distinct: bool) -> None:
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(huge_document(distinct)))
    code = "import sys\nfrom app.cli import main\nsys.argv[1:] = sys.argv[1:]\nassert main(sys.argv[1:]) == 0"
    out, rss = run_measured(code, ["plan", str(path), "--json"])
    assert len(out) < MAX_REPLY_BYTES, len(out)
    check_summary(json.loads(out), distinct)
    print(f"reply {len(out):,} bytes, peak RSS {rss} MB")
    assert rss < MAX_RSS_MB, rss


API_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from fastapi.testclient import TestClient
    from app.settings import Settings
    from app.web.app import create_app

    body = sys.stdin.buffer.read()
    app = create_app(Settings(database_url="sqlite://", max_body_bytes=64 * 2**20))
    with TestClient(app) as client:
        reply = client.post("/api/v1/plan", content=body, headers={"content-type": "application/json"})
        assert reply.status_code == 200, reply.text[:2000]
        del body
        sys.stdout.buffer.write(reply.content)
    """
)


@pytest.mark.parametrize("distinct", [False, True], ids=["identical", "distinct"])
def test_api_plan_of_100k_ranks_is_bounded(distinct: bool) -> None:
    body = json.dumps(huge_document(distinct)).encode()
    out, rss = run_measured(API_SCRIPT, [], stdin=body)
    assert len(out) < MAX_REPLY_BYTES, len(out)
    result = json.loads(out)
    check_summary(result, distinct)
    assert result["url"].startswith("/plan?")
    print(f"reply {len(out):,} bytes, peak RSS {rss} MB")
    assert rss < MAX_RSS_MB, rss


def test_the_plan_page_of_a_grouped_plan_shows_its_groups(client: Any, app: Any) -> None:
    kinds = 32
    doc = huge_document(False)
    doc["ranks"] = [{**r, "free_at_start": r["free_at_start"] - (i % kinds) * 2**22} for i, r in
                    enumerate(doc["ranks"][:2048])]  # fmt: skip
    doc["layout"] = {"tp": 8, "dp": 256}
    base = app.state.bases.put(doc)
    page = client.get(f"/plan?base={base}")
    assert page.status_code == 200
    assert "2,048 ranks in 32 groups of identical ranks" in page.text
    assert "(64 ranks: 0, 32, 64," in page.text  # a group's row names the positions it covers
    reply = client.get(f"/plan.json?base={base}")
    assert reply.status_code == 200 and reply.json()["ranks_form"] == "grouped"
