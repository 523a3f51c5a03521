"""The reference for the differential test (tests/ingest/test_vllm_log_fast_path.py): the parser's line
scan as it was before the fast path (app/ingest/vllm_log.py at 343ffe7), with the parser's own
extractor table and hard-wrap helpers imported, and two deliberate changes. First, it reads EVERY
line and runs every extractor whose needles the line holds (`_candidates` below), where the old code
ran only the extractors its hand-written keyword table located. That table dropped needles ('Graph
capturing finished' without 'took' on the same physical line, extra/hard-wrapped-words100.log); the
fast path keys its prefilter on the needles themselves. Slow by design: no keyword prefilter, no
per-line cache; runs are folded by the RunBuilder of that commit too (reference_vllm_log_runs.py). A
second change: colour codes leave the whole text before the scan (see `_parse`), so continuation
lines joined to a message cut by a hard wrap are read without them, as the fast path reads them.
"""

from __future__ import annotations

import gc

# The extractor table, the hard-wrap join and the header time are the parser's own (shared, not
# copied: the spec of what a line tells is not what the fast path changed); what differs below is
# the scan: every line, every extractor whose needles it holds, no line cache.
from app.ingest.vllm_log import (
    _ANSI,
    _CARET_ANSI,
    _EXTRACTORS,
    _MAX_JOIN_LINES,
    _RECORD_START,
    LOOKED_FOR,
    Extractor,
    _unwrap,
    _wrap_widths,
    line_ops,
)
from app.ingest.vllm_log import _HEADER_RE as _HEADER
from app.ingest.vllm_log import _REPEATED_RE as _REPEATED
from app.ingest.vllm_log_cut import cut_last_number
from app.ingest.vllm_log_lines import Fact
from app.ingest.vllm_log_model import Finding, LogParse
from app.ingest.vllm_log_prefix import identity_before
from app.ingest.vllm_log_templates import _stamp

from .reference_vllm_log_runs import RunBuilder


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
    text, cut = cut_last_number(text, line_ops)  # the same preparation of the text (app.ingest.vllm_log_cut)
    if cut is not None:
        findings.append(cut)
    wrap = _wrap_widths(text) if "\n" in text else None
    if wrap is not None:
        width = wrap[0]
        unwrapped, lines, joined = _unwrap(text, *wrap)
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
