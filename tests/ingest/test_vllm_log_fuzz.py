"""The log parser never raises: arbitrary text, real lines cut and glued, binary junk, 10 MB."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.ingest.vllm_log import log_parse_to_json, parse_vllm_log

from .ingest_helpers import EXTRA, LOGS, read

REAL_LINES: list[str] = [
    line for p in sorted([*LOGS.glob("*.log"), *EXTRA.glob("*.log")]) for line in read(p).splitlines() if line
]


def _check(text: str) -> None:
    p = parse_vllm_log(text)
    json.dumps(log_parse_to_json(p), allow_nan=False)
    assert "parser_error" not in [f.code for f in p.findings]
    for run in p.runs:
        assert "parser_error" not in [f.code for f in run.findings]
        for r in run.ranks:
            for name, stated in r.fields.items():
                assert stated.line >= 1, name


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_arbitrary_text(text: str) -> None:
    _check(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(REAL_LINES),
            st.integers(0, 400),
            st.integers(0, 400),
            st.sampled_from(["\n", "", "\r", "\r\n", " "]),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_truncated_and_glued_real_lines(pieces: list[tuple[str, int, int, str]]) -> None:
    text = "".join(line[a : a + b + 1] + sep for line, a, b, sep in pieces)
    _check(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000))
def test_binary_junk(data: bytes) -> None:
    _check(data.decode("utf-8", errors="replace"))
    _check(data.decode("latin-1"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(REAL_LINES), min_size=1, max_size=30), st.integers(40, 130))
def test_hard_wrapped_real_lines(lines: list[str], width: int) -> None:
    text = "\n".join(line[i : i + width] for line in lines for i in range(0, len(line), width))
    _check(text)


def test_numbers_at_the_limits() -> None:
    for text in (
        "Available KV cache memory: " + "9" * 5000 + " GiB",
        "Available KV cache memory: 999999999999.9999999999 GiB",
        "GPU KV cache size: " + ",".join(["999"] * 3000) + " tokens",
        "non-default args: {" + "[" * 5000 + "}",
        "non-default args: {'a': " + "(" * 200 + "}",
        "with config: " + "(" * 10000 + "model='x'",
        "(" * 10000 + "pid=1) Available KV cache memory: 1.0 GiB",
        "\x00\x1b[" * 1000 + "Model loading took 1.0 GiB and 1 s",
    ):
        _check(text)


def test_ten_megabytes_parse_quickly() -> None:
    rng = random.Random(7)
    noise = "".join(rng.choice("ab (pid=1) GiB: 0.5\n\r\x1b[") for _ in range(200_000))
    body = "\n".join(rng.choice(REAL_LINES) for _ in range(20_000))
    text = (body + noise) * 1
    while len(text) < 10_000_000:
        text += text
    text = text[:10_000_000]
    p = parse_vllm_log(text)
    assert p.runs  # its speed is bench/bench_parser.py's to record: tests never assert wall-clock times


def test_fixture_files_are_utf8() -> None:
    for path in Path(EXTRA).glob("*.log"):
        path.read_bytes().decode("utf-8")


PATHOLOGICAL = [
    "a" * 2_000_000 + " pid=1) Available KV cache memory: 1 GiB",
    "(Worker_TP0 pid=1) INFO 01-01 00:00:00 [a.py:1] Available KV cache memory: 1 GiB" * 50_000,
    "non-default args: {" + "a" * 2_000_000,
    "CUDA graph memory profiling is enabled. The current --gpu-memory-utilization=0.9 is equivalent to "
    "--gpu-memory-utilization=0.8 without CUDA graph memory profiling." * 20_000,
    "CUDA graph memory profiling is disabled" * 50_000,
    "with config: " * 200_000,
    "Free memory on device (1/2 GiB) on startup. Desired GPU memory utilization is (0.9, 1 GiB). Actual usage is "
    * 20_000,
    "GPU blocks: 1" * 300_000,
    "max seq len (" * 300_000,
    "Available KV cache memory: 1 GiB\r" * 200_000,
]


def test_pathological_single_lines_parse() -> None:
    # What they cost is measured in bench/bench_parser.py ("pathological lines" rows), not asserted here.
    for text in PATHOLOGICAL:
        _check(text)
