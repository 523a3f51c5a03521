"""The public-log evidence set (tests/data/vllm-logs/public/) keeps its index honest.

Every .log has exactly one index entry and every entry a .log; every entry cites a public
vLLM issue or pull request (or another project's, when its notes say so); every number under
`numbers` occurs in its log's text (commas
removed, compared as numbers); every version has a value and a stated or inferred basis; a
named config exists in tests/data/configs/; and no public log repeats a line of the older
fixture logs in tests/data/vllm-logs/ (the two sets must not double-count a run).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .ingest_helpers import DATA, EXTRA, LOGS, read

PUBLIC = LOGS / "public"
CONFIGS = DATA / "configs"
INDEX: dict[str, Any] = json.loads((PUBLIC / "index.json").read_text())
ENTRIES: list[dict[str, Any]] = INDEX["entries"]
# a thread (issue / PR), or a file committed in a public repository, pinned to the commit that last touched it
SOURCE = re.compile(r"^https://github\.com/([\w.-]+/[\w.-]+)/(?:(?:issues|pull)/\d+|blob/[0-9a-f]{40}/\S+) \(.+\)$")
# A source outside vllm-project/vllm (another project's PR quoting the vLLM start-up it printed, a committed log
# file) must say so
OTHER_REPO_NOTE = "not a vllm-project/vllm thread"
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def log_numbers(text: str) -> set[float]:
    """Every number written in the text, with thousands separators removed, as floats."""
    found: set[float] = set()
    for m in NUMBER.finditer(text):
        token = m.group(0).rstrip(",").replace(",", "")
        value = float(token)
        found.add(value)
        if m.start() > 0 and text[m.start() - 1] == "-":
            found.add(-value)
    return found


def leaves(node: Any, path: str = "numbers") -> list[tuple[str, float]]:
    """(path, value) for every numeric leaf of a `numbers` tree; bool is not a number."""
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in leaves(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [x for i, v in enumerate(node) for x in leaves(v, f"{path}[{i}]")]
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return [(path, float(node))]
    raise AssertionError(f"{path}: {node!r} is not a number (numbers holds numbers only)")


def missing_numbers(entry: dict[str, Any], text: str) -> list[str]:
    have = log_numbers(text)
    return [f"{p}={v}" for p, v in leaves(entry["numbers"]) if v not in have]


def entry_problems(entry: dict[str, Any]) -> list[str]:
    out: list[str] = []
    source = SOURCE.match(entry.get("source", ""))
    if not source:
        out.append(f"source {entry.get('source')!r} is not a GitHub issue/PR URL + (who, when)")
    elif source.group(1) != "vllm-project/vllm" and OTHER_REPO_NOTE not in str(entry.get("notes", "")):
        out.append(f"source {source.group(1)} is not vllm-project/vllm and the notes do not say so")
    version = entry.get("vllm_version") or {}
    if not str(version.get("value", "")).strip():
        out.append("vllm_version.value is empty")
    if not re.match(r"^(stated|inferred)\b", str(version.get("basis", ""))):
        out.append("vllm_version.basis must start with 'stated' or 'inferred'")
    for key in ("model", "gpu", "tp", "pp", "flags", "notes", "numbers", "importer", "config"):
        if key not in entry:
            out.append(f"missing key {key!r}")
    if not leaves(entry.get("numbers", {})):
        out.append("numbers is empty")
    return out


def test_every_log_has_one_entry_and_every_entry_a_log() -> None:
    names = [e["file"] for e in ENTRIES]
    assert len(names) == len(set(names)), "duplicate index entries"
    on_disk = {p.name for p in PUBLIC.glob("*.log")}
    assert on_disk - set(names) == set(), "logs without an index entry"
    assert set(names) - on_disk == set(), "index entries without a log"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_entry_is_sourced_versioned_and_complete(entry: dict[str, Any]) -> None:
    assert entry_problems(entry) == []


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_every_number_is_in_the_log_text(entry: dict[str, Any]) -> None:
    assert missing_numbers(entry, read(PUBLIC / entry["file"])) == []


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_named_config_exists(entry: dict[str, Any]) -> None:
    config = entry["config"]
    if config is not None:
        assert (CONFIGS / str(config).split()[0]).is_file()


def _old_lines() -> set[str]:
    paths = [*LOGS.glob("*.log"), *EXTRA.glob("*.log")]
    return {line.strip() for p in paths for line in read(p).splitlines() if _distinctive(line)}


def _distinctive(line: str) -> bool:
    # a progress bar before its first step ("0/4 [00:00<?, ?it/s]") carries no timing: every 4-shard load prints it
    return len(line.strip()) >= 40 and any(c.isdigit() for c in line) and "<?, ?it/s]" not in line


def test_no_public_log_repeats_an_older_fixture() -> None:
    old = _old_lines()
    repeated = {
        p.name: line.strip()
        for p in PUBLIC.glob("*.log")
        for line in read(p).splitlines()
        if _distinctive(line) and line.strip() in old
    }
    assert repeated == {}


def test_the_checks_catch_what_they_guard(tmp_path: Path) -> None:
    """The checkers flag a number absent from the text, a foreign source and a bare version."""
    text = "INFO 07-22 [gpu_worker.py:245] Available KV cache memory: 7.07 GiB\nGPU KV cache size: 178,880 tokens"
    good = {"numbers": {"kv": 7.07, "tokens": 178880}}
    assert missing_numbers(good, text) == []
    assert missing_numbers({"numbers": {"kv": 7.7}}, text) == ["numbers.kv=7.7"]
    assert missing_numbers({"numbers": {"kv": -7.07}}, text) == ["numbers.kv=-7.07"]
    bad = {
        "source": "https://github.com/sgl-project/sglang/issues/1 (x, 2025-01-01)",
        "vllm_version": {"value": "0.9.2", "basis": "a guess"},
        "numbers": {"kv": 1},
    }
    problems = entry_problems(bad)
    assert any(p.startswith("source") for p in problems)
    assert any("basis" in p for p in problems)
    assert any("'importer'" in p for p in problems)
    noted = {**bad, "notes": "another project's PR quoting its start-up: not a vllm-project/vllm thread"}
    assert not any(p.startswith("source") for p in entry_problems(noted))
    # a committed file must be pinned to a full commit, not a branch
    branch = {**noted, "source": "https://github.com/o/r/blob/main/log/vllm.log (x, 2025-09-09)"}
    assert any(p.startswith("source") for p in entry_problems(branch))
    pinned = {**noted, "source": "https://github.com/o/r/blob/" + "a" * 40 + "/log/vllm.log (x, 2025-09-09)"}
    assert not any(p.startswith("source") for p in entry_problems(pinned))
