"""Ray-launched V1 start-ups read as ONE run each (tests/data/vllm-logs/public/62-63, dennislee22/vLLM-benchmarking):
`vllm serve` with TP over Ray workers, every worker line nested as `(EngineCore_0 pid=N) (RayWorkerWrapper pid=M[,
ip=A])`. The workers are the ranks (told apart by pid and node: 63 has pid 345 on two nodes), the EngineCore is the
engine; Ray's log monitor relays worker lines out of time order, which is not a restart; 62's console wrap was
counted before the colour codes were stripped, so first lines of records are shorter than continuation lines.
"""

from __future__ import annotations

from typing import Any

from app.ingest.vllm_log import _unwrap, _wrap_widths
from app.ingest.vllm_log_prefix import identity_before

from .ingest_helpers import LOGS, codes, parsed, rank, read, runs

PUBLIC = LOGS / "public"
GIB = 2**30


def _one_run(prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (path,) = PUBLIC.glob(f"{prefix}-*.log")
    doc = parsed(read(path))
    (run,) = runs(doc)
    return doc, run


def _gib(r: dict[str, Any], field: str) -> tuple[float, str]:
    return r[field] / GIB, r["evidence"][field]["printed"]


def test_public_62_is_one_tp2_start_with_both_ray_workers_whole() -> None:
    doc, run = _one_run("62")
    assert codes(doc) == ["hard_wrapped_input"]
    assert run["vllm_version"] == "0.10.1.1" and run["lines"][0] == 1
    assert run["layout"]["tp"]["value"] == 2
    # labelled by the TP rank each worker states ("rank 0 in world size 2 is assigned as … TP rank 0")
    assert [(r["rank"], r["pid"], r["ip"]) for r in run["ranks"]] == [("TP0", 1384, None), ("TP1", 374, "10.254.6.219")]
    assert {r["process"] for r in run["ranks"]} == {"RayWorkerWrapper"}
    for i, r in enumerate(run["ranks"]):
        assert r["parallel"] == {"DP": 0, "PP": 0, "TP": i}  # DP: the EngineCore_0 around it
        assert r["index_basis"].startswith(f"stated: 'rank {i} in world size 2 is assigned as DP rank 0, PP rank 0, "
                                           f"TP rank {i}' (line ")
        weights, printed = _gib(r, "weights_bytes")
        assert printed == "7.1217 GiB" and abs(weights - 7.1217) < 1e-4
        kv, printed = _gib(r, "kv_bytes")
        assert printed == "11.03 GiB" and abs(kv - 11.03) < 1e-4
    # the TP1 worker's lines cut mid-word by the wrap ('Model loading |took', 'Available KV cache me|mory')
    remote = rank(run, "TP1")
    assert remote["evidence"]["weights_bytes"]["line"] == 83 and remote["evidence"]["kv_bytes"]["line"] == 102
    assert rank(run, "TP0")["cuda_graph_bytes"] == round(1.00 * GIB)
    engine = run["engine"]
    assert (engine["kv_tokens"], engine["max_concurrency"], engine["max_concurrency_tokens"]) == (412944, 25.2, 16384)
    assert engine["num_gpu_blocks"] == 25809
    assert "ranks_not_in_log" not in codes(run)
    # the engine-config line, wrapped over 13 lines, is read whole: its fields past the first cut too
    assert run["settings"]["enforce_eager"] is False and run["settings"]["dtype"] == "bfloat16"


def test_public_63_is_one_tp4_start_with_four_ray_workers() -> None:
    doc, run = _one_run("63")
    assert doc["findings"] == []
    assert run["vllm_version"] == "0.10.1.1" and run["layout"]["tp"]["value"] == 4
    # pid 1273 and pid 345 on 10.42.11.243 state their TP rank; Ray collapsed the other two workers'
    # 'is assigned as' lines into '[repeated 3x across cluster]': they keep their process label
    labels = [(r["rank"], r["pid"], r["ip"]) for r in run["ranks"]]
    assert labels == [("TP0", 1273, None), ("TP1", 345, "10.42.11.243"), ("pid=343 ip=10.42.9.224", 343, "10.42.9.224"),
                      ("pid=345 ip=10.42.9.225", 345, "10.42.9.225")]
    assert [r.get("index_basis", "")[:7] for r in run["ranks"]] == ["stated:", "stated:", "", ""]
    (unknown,) = [f for f in run["findings"] if f["code"] == "rank_index_not_stated"]
    assert "pid=343 ip=10.42.9.224, pid=345 ip=10.42.9.225" in unknown["message"] and unknown["ranks"] == 2
    for r in run["ranks"]:
        weights, printed = _gib(r, "weights_bytes")
        assert r["process"] == "RayWorkerWrapper" and printed == "17.2217 GiB" and abs(weights - 17.2217) < 1e-4
    # Ray collapsed the other workers' 'Available KV cache memory' lines: two ranks state it
    for label, line in (("pid=345 ip=10.42.9.225", 104), ("TP1", 289)):
        kv, printed = _gib(rank(run, label), "kv_bytes")
        assert printed == "45.32 GiB" and abs(kv - 45.32) < 1e-4
        assert rank(run, label)["evidence"]["kv_bytes"]["line"] == line
    assert rank(run, "pid=343 ip=10.42.9.224")["cuda_graph_bytes"] == round(1.88 * GIB)
    engine = run["engine"]
    assert (engine["kv_tokens"], engine["max_concurrency"], engine["num_gpu_blocks"]) == (2640144, 284.25, 330018)
    assert "ray_deduplicated_lines" in codes(run) and "ranks_not_in_log" not in codes(run)


def _without_assignment_of(text: str, tp: int) -> str:
    """Public 62 with one worker's 'is assigned as' line gone (as an excerpt or Ray's dedup loses it)."""
    lines = text.splitlines(keepends=True)
    (at,) = [i for i, line in enumerate(lines) if f"TP rank {tp}, EP rank" in line]
    start = max(i for i in range(at + 1) if "RayWorkerWrapper" in lines[i])  # the record's first (wrapped) line
    return "".join(lines[:start] + lines[at + 1:])


def test_public_62_without_one_workers_line_takes_the_index_left_by_elimination() -> None:
    (path,) = PUBLIC.glob("62-*.log")
    (run,) = runs(parsed(_without_assignment_of(read(path), 0)))
    assert [r["rank"] for r in run["ranks"]] == ["TP0", "TP1"]
    assert rank(run, "TP0")["pid"] == 1384
    assert rank(run, "TP0")["index_basis"] == ("by elimination: the 2 workers of the world are in the log and the "
                                               "others state TP1")
    assert "rank_index_not_stated" not in codes(run)


def test_public_62_without_either_workers_line_invents_no_index() -> None:
    (path,) = PUBLIC.glob("62-*.log")
    (run,) = runs(parsed(_without_assignment_of(_without_assignment_of(read(path), 0), 1)))
    assert [r["rank"] for r in run["ranks"]] == ["pid=1384", "pid=374 ip=10.254.6.219"]
    assert all("index_basis" not in r for r in run["ranks"])
    (unknown,) = [f for f in run["findings"] if f["code"] == "rank_index_not_stated"]
    assert unknown["ranks"] == 2 and "pid=1384, pid=374 ip=10.254.6.219" in unknown["message"]


def test_a_ray_worker_under_an_engine_is_its_own_rank() -> None:
    line = "(EngineCore_0 pid=1) (RayWorkerWrapper pid=7, ip=10.0.0.2) INFO 09-10 23:47:50 [x.py:1] msg"
    ident = identity_before(line, line.index("INFO"))
    assert (ident.label, ident.parallel, ident.relayed) == ("pid=7 ip=10.0.0.2", (("DP", 0),), True)
    # a worker that names no index of its own and is one per engine keeps the engine's DP label
    line = "(EngineCore_DP1 pid=1) (Worker pid=2) INFO 09-10 23:47:50 [x.py:1] msg"
    ident = identity_before(line, line.index("INFO"))
    assert (ident.label, ident.relayed) == ("DP1", False)


def _ray(pid: int, stamp: str, msg: str) -> str:
    return f"(EngineCore_0 pid=9) (RayWorkerWrapper pid={pid}) INFO {stamp} [gpu_worker.py:276] {msg}\n"


def test_a_relayed_line_out_of_time_order_stays_in_the_run() -> None:
    text = (
        _ray(7, "09-03 04:42:58", "Graph capturing finished in 11 secs, took 1.00 GiB")
        + _ray(7, "09-03 04:42:46", "Available KV cache memory: 11.03 GiB")
        + _ray(8, "09-03 04:42:46", "Available KV cache memory: 11.03 GiB")
    )
    (run,) = runs(parsed(text))
    assert [r["rank"] for r in run["ranks"]] == ["pid=7", "pid=8"]
    # the same two lines printed by a process Ray does not relay: its time going back is another start
    direct = text.replace("(EngineCore_0 pid=9) (RayWorkerWrapper pid=7) ", "(Worker_TP0 pid=7) ")
    assert len(runs(parsed(direct))) == 2


def test_a_wrap_counted_with_colour_codes_is_rejoined() -> None:
    width, first = 100, 90  # 10 characters of codes were stripped from each first line
    records = []
    for i in range(6):
        head = f"(Worker_TP{i} pid={100 + i}) INFO 09-03 04:42:46 [gpu_worker.py:276] "
        body = f"Available KV cache memory: {i + 10}.03 GiB "
        filler = first + width + 60 + 5 * i - len(head + body)  # the last piece 60-85 long
        whole = head + body + "".join(chr(97 + (k + i) % 26) for k in range(filler))
        records.append([whole[:first], whole[first : first + width], whole[first + width :]])
    text = "\n".join(line for rec in records for line in rec) + "\n"
    assert _wrap_widths(text) == (width, frozenset({first}))
    joined, origin, count = _unwrap(text, width, frozenset({first}))
    assert joined.split("\n")[:6] == ["".join(rec) for rec in records]
    assert count == 12 and origin[:6] == [1, 4, 7, 10, 13, 16]
    (run,) = runs(parsed(text))
    assert [round(r["kv_bytes"] / GIB, 2) for r in run["ranks"]] == [10.03, 11.03, 12.03, 13.03, 14.03, 15.03]
    assert "hard_wrapped_input" in codes(parsed(text))
    # the same records unwrapped: no wrap is detected
    plain = "".join("".join(rec) + "\n" for rec in records)
    assert _wrap_widths(plain) is None
