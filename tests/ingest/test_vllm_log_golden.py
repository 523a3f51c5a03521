"""Golden test: every number of expected.json comes out in the right field, rank and run.

expected.json's "schema" string is the contract: run = 0-based engine start (any run if the
file has one); rank_hint null = any rank record of the run, else a record whose pid equals
hint.pid or whose label names TP<tp>/PP<pp>/rank=<rank>; tol_bytes / tol; alt = other places
that count ({scope: finding} = a finding of that run carrying the number).
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest

from .ingest_helpers import LOGS, parsed, read

EXPECTED: dict[str, Any] = json.loads((LOGS / "expected.json").read_text())
INDEX: Any = json.loads((LOGS / "index.json").read_text())


@cache
def _doc(name: str) -> str:
    return json.dumps(parsed(read(LOGS / name)))


def doc(name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(_doc(name))
    return out


def _close(got: object, want: float, tol: float) -> bool:
    return isinstance(got, (int, float)) and not isinstance(got, bool) and abs(got - want) <= tol + 1e-9


def _rank_matches(r: dict[str, Any], hint: dict[str, int] | None) -> bool:
    if hint is None:
        return True
    label = str(r["rank"])
    for key, value in hint.items():
        if key == "pid" and r["pid"] == value:
            return True
        if key in ("tp", "pp") and re.search(rf"(?:^|_){key.upper()}{value}(?:_|$)", label):
            return True
        if key == "rank" and f"rank={value}" in label:
            return True
    return False


def _finding_has(run: dict[str, Any], want: float, tol: float) -> bool:
    for f in run["findings"]:
        if any(_close(v, want, tol) for k, v in f.items() if k != "line"):
            return True
        if any(_close(float(x.replace(",", "")), want, tol) for x in re.findall(r"\d[\d,]*\.?\d*", f["message"])):
            return True
    return False


def _holds(run: dict[str, Any], scope: str, field: str, hint: Any, want: float, tol: float) -> bool:
    if scope == "rank":
        return any(_rank_matches(r, hint) and _close(r.get(field), want, tol) for r in run["ranks"])
    if scope in ("engine", "settings"):
        return _close(run[scope].get(field), want, tol)
    if scope == "finding":
        return _finding_has(run, want, tol)
    raise AssertionError(scope)


CASES = EXPECTED["expectations"]


@pytest.mark.parametrize(
    "exp", CASES, ids=[f"{e['file'][:2]}-r{e['run']}-{e['scope']}-{e['field']}-L{e['line']}" for e in CASES]
)
def test_expected_number(exp: dict[str, Any]) -> None:
    out = doc(exp["file"])
    n_runs = EXPECTED["files"][exp["file"]]["runs"]
    assert len(out["runs"]) == n_runs
    candidates = out["runs"] if n_runs == 1 else [out["runs"][exp["run"]]]
    tol = float(exp.get("tol_bytes", exp.get("tol", 0)))
    places = [(exp["scope"], exp["field"])] + [(a["scope"], a.get("field", exp["field"])) for a in exp.get("alt", [])]
    ok = any(
        _holds(run, scope, field, exp["rank_hint"], exp["value"], tol) for run in candidates for scope, field in places
    )
    assert ok, f"{exp['printed']!r} (line {exp['line']}) not found as {exp['scope']}.{exp['field']}"


def test_every_file_has_expectations_and_evidence() -> None:
    for name in EXPECTED["files"]:
        out = doc(name)
        for run in out["runs"]:
            for r in run["ranks"]:
                for field, ev in r["evidence"].items():
                    assert isinstance(ev["line"], int) and ev["line"] >= 1, (name, field)
                    assert field in r["tolerance"] or isinstance(r[field], (str, bool))


@pytest.mark.parametrize("name", sorted(EXPECTED["files"]))
def test_no_parser_errors(name: str) -> None:
    out = doc(name)
    assert not [f for f in out["findings"] if f["code"] == "parser_error"]
    for run in out["runs"]:
        assert "parser_error" not in [f["code"] for f in run["findings"]]


def _vt(text: str) -> tuple[int, ...]:
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    assert m is not None
    return int(m[1]), int(m[2]), int(m[3] or 0)


@pytest.mark.parametrize("entry", INDEX["entries"], ids=[e["file"][:2] for e in INDEX["entries"]])
def test_version_stated_or_inferred_range_contains_index_version(entry: dict[str, Any]) -> None:
    want = _vt(entry["vllm_version"]["value"])
    for run in doc(entry["file"])["runs"]:
        v = run["version"]
        if v["stated"]:
            assert _vt(v["stated"]) == want
            continue
        assert v["inferred_min"] or v["inferred_max_exclusive"], v
        if v["inferred_min"]:
            assert _vt(v["inferred_min"]) <= want
        if v["inferred_max_exclusive"]:
            assert want < _vt(v["inferred_max_exclusive"])


def test_semantics_flag_follows_version() -> None:
    inside = {
        name: [r["semantics"]["cuda_graphs_inside_budget"] for r in doc(name)["runs"]] for name in EXPECTED["files"]
    }
    for name, flags in inside.items():
        assert flags == [name.startswith(("21-", "22-", "23-"))] * len(flags), name


def test_tp_run_with_one_rank_visible_says_ranks_are_unknown() -> None:
    text = (
        "(EngineCore_DP0 pid=1) INFO 11-01 00:00:00 [core.py:77] Initializing a V1 LLM engine (v0.11.1) with "
        "config: model='m', tensor_parallel_size=4, pipeline_parallel_size=1\n"
        "(Worker_TP0 pid=2) INFO 11-01 00:00:01 [gpu_worker.py:298] Available KV cache memory: 10.0 GiB\n"
    )
    (run,) = parsed(text)["runs"]
    (f,) = [f for f in run["findings"] if f["code"] == "ranks_not_in_log"]
    assert (f["ranks_seen"], f["ranks_expected"]) == (1, 4)


@pytest.mark.parametrize(
    "entry",
    [e for e in INDEX["entries"] if any(k.startswith("engine_per_worker_lines") for k in e["numbers"])],
    ids=lambda e: e["file"][:2],
)
def test_index_per_worker_engine_lines_are_all_kept_in_order(entry: dict[str, Any]) -> None:
    numbers = entry["numbers"]
    lines = numbers.get("engine_per_worker_lines_in_order") or numbers["engine_per_worker_lines"]
    (run,) = doc(entry["file"])["runs"]
    ev = run["engine"]["evidence"]["kv_tokens"]
    stated = sorted([(ev["line"], ev["printed"])] + [(a["line"], a["printed"]) for a in ev.get("also", [])])
    assert [int(p.replace(",", "")) for _, p in stated] == [x["kv_tokens"] for x in lines]
    assert run["engine"]["kv_tokens"] == min(x["kv_tokens"] for x in lines)
    engine = numbers.get("engine", {})
    if "num_gpu_blocks_final" in engine:
        assert run["engine"]["num_gpu_blocks"] == engine["num_gpu_blocks_final"]
        assert run["engine"]["init_seconds"] == engine["init_engine_s"]
    if "attention_block_size" in engine:
        assert run["engine"]["block_size"] == run["settings"]["block_size"] == engine["attention_block_size"]
