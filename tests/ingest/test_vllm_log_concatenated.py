"""Real logs pasted one after the other are read as they are one by one: each start keeps its own
ranks and engine figures, none borrows another log's numbers.

The ten real logs of the shared set (tests/data/vllm-logs/0*-2*.log and the v0.19 ones after them)
are excerpts: most carry no engine-config banner, so a boundary has to come from what one engine
start cannot print. Before this, `cat 16-….log 18-….log` showed one run of 42,656 tokens (16's) with
6,297 blocks and a concurrency at 65,536 tokens (18's), and 18's four ranks beside 16's EngineCore;
`cat 07 13 14` put a V0 `VllmWorkerProcess` start, 13's TP1_EP1 and half of 14's ranks in one run.
"""

from __future__ import annotations

from typing import Any

import pytest

from .ingest_helpers import LOGS, parsed, read, runs

TOP = sorted(LOGS.glob("*.log"))


def _shape(run: dict[str, Any]) -> tuple[object, ...]:
    ranks = sorted(
        (r["rank"], r["pid"], r["kv_bytes"], r["weights_bytes"], r["cuda_graph_bytes"], r["total_bytes"])
        for r in run["ranks"]
    )
    e = run["engine"]
    return (tuple(ranks), e["kv_tokens"], e["num_gpu_blocks"], e["max_concurrency"], e["max_concurrency_tokens"])


def _text(path: Any) -> str:
    t = read(path)
    return t if t.endswith("\n") else t + "\n"


def test_there_are_logs() -> None:
    assert len(TOP) >= 40


def test_every_top_level_log_concatenated_reads_as_each_alone() -> None:
    alone = [_shape(r) for p in TOP for r in runs(parsed(_text(p)))]
    together = [_shape(r) for r in runs(parsed("".join(map(_text, TOP))))]
    assert together == alone


@pytest.mark.parametrize(
    ("first", "second"),
    [("16-", "18-"), ("07-", "13-"), ("13-", "14-"), ("40-", "41-")],
)
def test_two_real_logs_one_after_the_other_are_two_runs(first: str, second: str) -> None:
    (a,) = LOGS.glob(f"{first}*.log")
    (b,) = LOGS.glob(f"{second}*.log")
    alone = [_shape(r) for p in (a, b) for r in runs(parsed(_text(p)))]
    assert [_shape(r) for r in runs(parsed(_text(a) + _text(b)))] == alone


def test_an_engine_of_another_pid_is_another_start() -> None:
    # 16's EngineCore_DP0 (pid 1133552) then 18's (pid 41565): 18's figures must not take 16's minimum
    (a,) = LOGS.glob("16-*.log")
    (b,) = LOGS.glob("18-*.log")
    first, second = runs(parsed(_text(a) + _text(b)))
    assert (first["engine"]["kv_tokens"], first["engine"]["num_gpu_blocks"]) == (42656, None)
    assert [r["rank"] for r in first["ranks"]] == ["EngineCore_DP0"]
    assert (second["engine"]["kv_tokens"], second["engine"]["num_gpu_blocks"]) == (100752, 6297)
    assert sorted(r["rank"] for r in second["ranks"]) == ["TP0", "TP1", "TP2", "TP3"]


def test_a_log_cut_inside_its_last_number_does_not_read_the_cut_number() -> None:
    """18's text cut after 'num_gpu_blocks is: 62' (of 6297, a `head -c` or a paste that stopped short)
    showed 'engine: 62 blocks' beside 100,752 tokens, with no word of it."""
    (path,) = LOGS.glob("18-*.log")
    text = read(path)
    cut = text[: text.index("num_gpu_blocks is: 6297") + len("num_gpu_blocks is: 62")]
    doc = parsed(cut)
    (run,) = runs(doc)
    assert run["engine"]["num_gpu_blocks"] is None and run["engine"]["kv_tokens"] == 100752
    (finding,) = [f for f in doc["findings"] if f["code"] == "last_line_cut"]
    assert finding["line"] == 24 and finding["number"] == "62" and "may be cut short" in finding["message"]
    # the whole line with its newline, or a last line ending in a unit, is read as printed
    assert runs(parsed(text))[0]["engine"]["num_gpu_blocks"] == 6297
    kv = text[: text.index("Available KV cache memory: 2.31 GiB") + len("Available KV cache memory: 2.31 GiB")]
    assert not [f for f in parsed(kv)["findings"] if f["code"] == "last_line_cut"]


@pytest.mark.parametrize(("first", "second"), [("07-", "08-"), ("31-", "32-"), ("56-", "57-"), ("49-", "50-")])
def test_two_public_excerpts_one_after_the_other_are_two_runs(first: str, second: str) -> None:
    """Excerpts whose processes differ in name: 07 (EngineCore_DP0, 10-31) then 08 (EngineCore_0,
    08-20) read as one run with 07's KV and 08's weights; 31 (03-08) then 32 (03-17), 56 (unprefixed
    V0, 02-11) then 57 (EngineCore, 05-28) likewise. One start's processes write as they go: a line
    an hour behind the run's latest, or a memory figure a day after it, is another start."""
    (a,) = (LOGS / "public").glob(f"{first}*.log")
    (b,) = (LOGS / "public").glob(f"{second}*.log")
    alone = [_shape(r) for p in (a, b) for r in runs(parsed(_text(p)))]
    assert [_shape(r) for r in runs(parsed(_text(a) + _text(b)))] == alone
