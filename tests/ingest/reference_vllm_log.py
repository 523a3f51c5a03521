"""The reference for the differential test (tests/ingest/test_vllm_log_fast_path.py): the
parser's line scan as it was before the fast path (app/ingest/vllm_log.py at 343ffe7), kept
whole, with two deliberate changes. First, it reads EVERY line and runs every extractor whose needles the
line holds (`_candidates` below), where the old code ran only the extractors its hand-written
keyword table located. That table dropped needles ('Graph capturing finished' without 'took' on
the same physical line, extra/hard-wrapped-words100.log); the fast path keys its prefilter on
the needles themselves. Slow by design: no keyword prefilter, no per-line cache; runs are
folded by the RunBuilder of that commit too (reference_vllm_log_runs.py). A second change: colour
codes leave the whole text before the scan (see `_parse`), so continuation lines joined to a message
cut by a hard wrap are read without them, as the fast path reads them.
"""

from __future__ import annotations

import gc
import re
from collections import Counter
from collections.abc import Callable

from app.ingest import vllm_log_config as cfg
from app.ingest import vllm_log_lines as ln
from app.ingest.vllm_log_lines import Fact
from app.ingest.vllm_log_model import Finding, LogParse
from app.ingest.vllm_log_prefix import identity_before

from .reference_vllm_log_runs import RunBuilder

Extractor = Callable[[str], list[Fact]]

# (extractor, needles): the extractor runs on a line piece holding one of its needles.
_EXTRACTORS: tuple[tuple[Extractor, tuple[str, ...]], ...] = (
    (ln.weights, ("weights took", "Model loading took")),
    (ln.v0_profile, ("Memory profiling", "x gpu_memory_utilization (", "model weights take")),
    (ln.blocks, (" blocks: ", "GPU blocks: ", "num_gpu_blocks")),
    (ln.kv_available, ("Available KV cache memory",)),
    (ln.kv_tokens, ("GPU KV cache size",)),
    (ln.concurrency, ("Maximum concurrency for",)),
    (ln.cuda_graphs, ("CUDA graph", "Graph capturing finished")),
    (ln.free_memory, ("Free memory on device", "Initial free memory", "Free memory after profiling")),
    (cfg.engine_config, ("with config: ",)),
    (cfg.api_version, ("API server version", "vLLM server version", "▀▄▀ █")),
    (cfg.non_default_args, ("non-default args",)),
    (cfg.simple_settings, ("max model len", "block size to", "max_num_batched_tokens=", "Auto-fit max_model_len")),
    (cfg.errors, ("max seq len", "No available memory for the cache", "init engine (")),
    (ln.v0_profile_table, ("Memory profiling results:", *ln.TABLE_NEEDLES)),
)
LOOKED_FOR = (
    "'Loading model weights took' / 'Model loading took', 'Memory profiling results', "
    "'Memory profiling takes' and the V0 three-line block, '# GPU/CUDA/cuda blocks', "
    "'Available KV cache memory', 'GPU KV cache size', 'Maximum concurrency for … tokens per request', "
    "CUDA-graph lines, 'Free memory on device', 'kv_cache_memory_bytes', 'num_gpu_blocks is', the "
    "engine config line, 'non-default args' and the start-up errors"
)

# An SGR/CSI escape, as the terminal wrote it (ESC = \x1b) or as pasted from a pager or an issue in
# caret notation (the two characters `^[` for ESC: `^[[0;36m(EngineCore_DP0 pid=N)^[[0;0m`); vLLM
# colours the process prefix (vllm/utils/system_utils.py `_add_prefix`, v0.10.2+).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CARET_ANSI = re.compile(r"\^\[\[[0-9;?]*[A-Za-z]")
_REPEATED = re.compile(r"\[repeated (\d{1,9})x across cluster\]")
_RECORD_START = re.compile(
    r"\s*(?:(?:\x1b|\^\[)\[[0-9;]*m)*"
    r"(?:\([^)]{0,100}pid=|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) |\d{4}-\d\d-\d\d[T ]|\[|$)"
)
_HEADER = re.compile(r"\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (\[)?[\w./\-]{1,120}:\d{1,6}\]")
_MAX_JOIN_LINES = 12
_STAMP = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def _stamp(seg: str, pos: int) -> tuple[int, int, int, int, int] | None:
    """The log header time (month, day, h, m, s) of the message at `pos`, if its header has one."""
    found = list(_STAMP.finditer(seg, max(0, pos - 300), pos + 1))
    if not found:
        return None
    mo, d, h, mi, sec = (int(x) for x in found[-1].groups())
    return (mo, d, h, mi, sec)


def _detect_wrap(text: str) -> int | None:
    """The width of a fixed-width hard wrap (`fold -w`, terminal paste), or None."""
    sample = [s.rstrip("\r") for s in text.split("\n", 20000)[:20000]]
    lengths = Counter(len(s) for s in sample)
    long_lines = sum(c for n, c in lengths.items() if n >= 60)
    candidates = [(c, n) for n, c in lengths.items() if 60 <= n <= 300]
    if not candidates or long_lines == 0:
        return None
    c, width = max(candidates)
    if c < 3 or c < 0.5 * long_lines:
        return None
    # fold pieces all differ; a log that repeats one idle-stats line many times is not wrapped
    distinct = len({s for s in sample if len(s) == width})
    return width if distinct >= 0.5 * c else None


def _unwrap(text: str, width: int) -> tuple[str, list[int], int]:
    """Join continuation lines of a `width`-column hard wrap; also return how many were joined."""
    lines = text.split("\n")
    out: list[str] = []
    origin: list[int] = []
    i, n, joined = 0, len(lines), 0
    while i < n:
        start = i
        parts = [lines[i].rstrip("\r")]
        while len(parts[-1]) == width and i + 1 < n and not _RECORD_START.match(lines[i + 1]):
            i += 1
            joined += 1
            parts.append(lines[i].rstrip("\r"))
        out.append("".join(parts))
        origin.append(start + 1)
        i += 1
    return "\n".join(out), origin, joined


def _candidates(text: str) -> dict[int, set[int]]:
    """Every line start, with every extractor (the slow, simple reading)."""
    every = set(range(len(_EXTRACTORS)))
    found = {0: set(every)}
    pos = text.find("\n")
    while pos >= 0:
        found[pos + 1] = set(every)
        pos = text.find("\n", pos + 1)
    return found


class _Scanner:
    def __init__(self, text: str, origin: list[int] | None) -> None:
        self.text = text
        self.origin = origin
        self.builder = RunBuilder()
        self.errors: list[Finding] = []

    def _next_lines(self, end: int) -> list[str]:
        out: list[str] = []
        pos = end + 1
        text = self.text
        while pos < len(text) and len(out) < _MAX_JOIN_LINES:
            nxt = text.find("\n", pos)
            nxt = len(text) if nxt < 0 else nxt
            line = text[pos:nxt].rstrip("\r")
            if _RECORD_START.match(line):
                break
            out.append(line)
            pos = nxt + 1
        return out

    def _joined(self, seg: str, extractor: Extractor, end: int) -> list[Fact]:
        following = self._next_lines(end)
        if not following:
            return []
        tight, loose = seg, seg
        for line in following:
            tight, loose = tight + line, loose + " " + line
            if extractor(tight) or extractor(loose):
                # the message may go on: join every continuation line, mid-word (fold -w) or
                # at a space (word wrap), and keep the reading that states the most
                best = max((extractor(sep.join([seg, *following])) for sep in ("", " ")), key=len)
                return best or extractor(tight) or extractor(loose)
        return []

    def _emit(self, seg: str, facts: list[Fact], line: int) -> None:
        group: list[Fact] = []
        for f in facts:
            if group and f.pos != group[0].pos:
                self.builder.add_group(group, identity_before(seg, group[0].pos), line, _stamp(seg, group[0].pos))
                group = []
            group.append(f)
        if group:
            self.builder.add_group(group, identity_before(seg, group[0].pos), line, _stamp(seg, group[0].pos))
        if not self.builder.header_seen():
            h = _HEADER.search(seg, max(0, facts[0].pos - 300), facts[0].pos + 1)
            if h is not None:
                if h[1]:
                    self.builder.add_clue("'[file.py:N]' log header (c0e3ecd6d)", "0.8.0", "", line)
                else:
                    self.builder.add_clue("'file.py:N]' log header without '[' (before c0e3ecd6d)", "", "0.8.0", line)

    def line(self, start: int, end: int, lineno: int, extractors: set[int]) -> None:
        raw = self.text[start:end]
        if "\x1b" in raw:
            raw = _ANSI.sub("", raw)
        if "^[[" in raw:
            raw = _CARET_ANSI.sub("", raw)
        segs = raw.split("\r") if "\r" in raw else [raw]
        line = self.origin[lineno - 1] if self.origin is not None else lineno
        last = len(segs) - 1
        for k, seg in enumerate(segs):
            if not seg:
                continue
            emitted = False
            for index in sorted(extractors):
                extractor, needles = _EXTRACTORS[index]
                if not any(n in seg for n in needles):
                    continue
                facts = extractor(seg)
                if not facts and k == last:
                    facts = self._joined(seg, extractor, end)
                if facts:
                    self._emit(seg, facts, line)
                    emitted = True
            if emitted and "across cluster]" in seg:  # Ray collapsed the same memory line of other workers
                for m in _REPEATED.finditer(seg):
                    self.builder.note_repeated(int(m[1]))

    def run(self) -> None:
        text = self.text
        lineno, prev = 1, 0
        for start, extractors in sorted(_candidates(text).items()):
            lineno += text.count("\n", prev, start)
            prev = start
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            try:
                self.line(start, end, lineno, extractors)
            except Exception as exc:  # a parser bug must not lose the rest of the log
                self.errors.append(
                    Finding("parser_error", f"line could not be parsed ({type(exc).__name__}: {exc})", lineno, "error")
                )


def parse_vllm_log(text: str) -> LogParse:
    """Parse the text of one or more vLLM startup logs. Never raises on a str."""
    if not isinstance(text, str):
        return LogParse((), (Finding("not_text", "the input is not text", None, "error"),))
    # The parse allocates one small object per fact and keeps them: with the cyclic GC on,
    # repeated full collections make a big log quadratic. Nothing here creates cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse(text)
    finally:
        if gc_was_enabled:
            gc.enable()


def _parse(text: str) -> LogParse:
    findings: list[Finding] = []
    origin: list[int] | None = None
    width = _detect_wrap(text) if "\n" in text else None
    if width is not None:
        unwrapped, lines, joined = _unwrap(text, width)
        if joined:
            text, origin = unwrapped, lines
            findings.append(
                Finding("hard_wrapped_input", f"{joined} lines wrapped at {width} columns were re-joined", None)
            )
    # (the fast path's second deliberate change: colour codes removed from the whole text, so a
    # hard-wrap join reads continuation lines without them too)
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "^[[" in text:
        text = _CARET_ANSI.sub("", text)
    scanner = _Scanner(text, origin)
    scanner.run()
    findings.extend(scanner.errors)
    runs = scanner.builder.runs()
    if not any(r.ranks or r.engine or any(f.severity == "error" for f in r.findings) for r in runs):
        findings.append(
            Finding("no_vllm_memory_lines", f"no vLLM memory lines found; looked for {LOOKED_FOR}", None, "warning")
        )
        runs = []
    return LogParse(tuple(runs), tuple(findings))
