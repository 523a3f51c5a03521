"""The prefilter never drops a fact line: for any line, what `line_ops` extracts (one needle
alternation first, then only the extractors whose needles a piece holds) equals what every
extractor finds when run unconditionally on every piece of the line. Lines: every real log line,
with ANSI colours (ESC and caret notation) spliced in anywhere, odd process prefixes (nested,
glued, cut; extra/ansi-nested-cut-prefixes.log, public/42), junk in front and `\\r` pieces."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.ingest import vllm_log, vllm_log_templates
from app.ingest.vllm_log_lines import Fact

from .ingest_helpers import LOGS, read

LINES: list[str] = sorted({ln for p in LOGS.rglob("*.log") for ln in read(p).splitlines() if ln.strip()})
PREFIXES = (
    "",
    "\x1b[1;36m(VllmWorker rank=0 pid=5431)\x1b[0;0m ",
    "^[[0;36m(EngineCore_DP0 pid=812)^[[0;0m ",
    "VllmWorker rank=4 pid=5435) ",
    "(ServeReplica:default:LLMServer:qwen-0_5b pid=62683) (EngineCore pid=64296) (Worker pid=65043) ",
    "(Worker_TP1_EP1 pid=2079)(Worker_TP0_EP0 pid=2078) ",
    "\x1b[36m(APIServer pid=1)\x1b[0m \x1b[32mINFO\x1b[0m 09-24 20:52:00 [core.py:76] ",
    "2025-09-24T20:52:00.123456Z stdout F ",
    "vllm-0 | ",
)
COLOURS = ("\x1b[0m", "\x1b[1;36m", "^[[32m", "^[[0;0m", "\x1b[?25l")


def every_extractor(line: str) -> list[Fact]:
    """The reference: ANSI removed as the parser does, pieces at `\\r`, every extractor on each."""
    line = vllm_log._CARET_ANSI.sub("", vllm_log._ANSI.sub("", line))
    out: list[Fact] = []
    for seg in line.split("\r"):
        if seg:
            for extractor, _ in vllm_log._EXTRACTORS:
                out.extend(extractor(seg))
    return out


def prefiltered(line: str) -> list[Fact]:
    return [f for op in vllm_log.line_ops(line) if op[0] == vllm_log_templates._GROUP for f in op[1]]


def test_every_real_line() -> None:
    found = 0
    for line in LINES:
        want = every_extractor(line)
        assert prefiltered(line) == want, line
        found += bool(want)
    assert found > 300  # real fact lines were among them (312 distinct ones on 2026-12-01)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(LINES),
    st.sampled_from(PREFIXES),
    st.lists(st.tuples(st.integers(0, 400), st.sampled_from(COLOURS)), max_size=4),
    st.sampled_from(["", "\r", "\r\n", "junk\r", "\r\x1b[2K"]),
    st.text(alphabet="ab (=)[]:0123456789", max_size=20),
)
def test_mutated_real_lines(line: str, prefix: str, colours: list[tuple[int, str]], tail: str, junk: str) -> None:
    for at, code in colours:  # colour codes spliced in anywhere, even inside a message
        at = min(at, len(line))
        line = line[:at] + code + line[at:]
    text = junk + prefix + line + tail
    assert prefiltered(text) == every_extractor(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LINES), st.integers(0, 6000), st.integers(0, 6000), st.booleans())
def test_long_lines_take_the_substring_gate_with_the_same_answer(line: str, before: int, after: int,
                                                                 cut: bool) -> None:
    """Past `_LONG_LINE` characters the gate is one substring search per needle, not the alternation."""
    text = "x" * before + (line[: len(line) // 2] if cut else line) + " y" * after
    assert vllm_log._has_needle(text) == (vllm_log._ANY_NEEDLE.search(text) is not None)
    assert prefiltered(text) == every_extractor(text)
