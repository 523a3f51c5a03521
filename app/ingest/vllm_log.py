"""Parse a vLLM startup log (any version 0.6 → today, V0 and V1) into per-run, per-rank figures.

Pure: takes the text, returns data; never opens files, never raises on a `str`.

Theory of operation (one pass, cheap prefilters first, each distinct line read once):
1. If the text looks hard-wrapped at a fixed width (many long lines of exactly the same
   length), continuation lines are joined back to their record first (line numbers are kept).
   A wrap counted before colour codes were stripped (public/58-62) cuts first lines shorter than
   continuation lines; it is told by the continuation lines (`_coloured_wrap`).
2. The text is split into lines (C speed). A line text seen before replays what it did the first
   time (concatenated or repeated logs, and TP ranks, print the same lines verbatim); a new line
   is tested against one compiled alternation of every extractor's needles, and a line holding
   none (progress bars, request logs, tracebacks) is skipped without running any other regex.
   A new line that starts with a record header is first looked up with its header's pids and
   time masked (`vllm_log_templates.template_key`): a later restart's line states the facts of
   the earlier one, with its own prefix identity and time.
3. A candidate line loses ANSI colour codes, is cut at `\\r` (progress bars redraw with it,
   CRLF ends lines) and each piece goes through the extractors whose needles it holds
   (`vllm_log_lines`, `vllm_log_config`). What the line tells the run builder (facts grouped by
   match, the process prefix and log time before each match, the header style) is kept per
   line text; the one context-dependent step, retrying a message cut by a hard wrap joined with
   the following lines that start no new record, runs wherever the line occurs.
4. Each match is attributed to the process prefix in front of it (`vllm_log_prefix`) and folded
   into runs by `vllm_log_runs.RunBuilder` (new engine start → new run, start-up error ends one).
Line numbers are 1-based and count `\\n` only (a `\\r` inside a line does not start a new one).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from app.ingest import vllm_log_config as cfg
from app.ingest import vllm_log_lines as ln
from app.ingest import vllm_log_rank_index as rank_index
from app.ingest.vllm_log_cut import cut_last_number
from app.ingest.vllm_log_lines import Fact
from app.ingest.vllm_log_model import Finding, LogParse, gc_paused, log_parse_to_json
from app.ingest.vllm_log_prefix import identity_before
from app.ingest.vllm_log_runs import RunBuilder
from app.ingest.vllm_log_templates import _GROUP, _HEADER, _JOIN, _REPEATED, Op, _stamp, fresh_ops

__all__ = ["LOOKED_FOR", "log_parse_to_json", "parse_vllm_log"]

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
    (cfg.sampler_path, cfg.SAMPLER_NEEDLES),
    (cfg.allow_long_max_model_len, cfg.LONG_LEN_NEEDLES),
    (cfg.kernel_method, cfg.KERNEL_NEEDLES),
    (rank_index.assignment, rank_index.NEEDLES),
    (cfg.errors, ("max seq len", "No available memory for the cache", "init engine (", "CUDA out of memory. Tried")),
    (ln.v0_profile_table, ("Memory profiling results:", *ln.TABLE_NEEDLES)),
)
LOOKED_FOR = (
    "'Loading model weights took' / 'Model loading took', 'Memory profiling results', "
    "'Memory profiling takes' and the V0 three-line block, '# GPU/CUDA/cuda blocks', "
    "'Available KV cache memory', 'GPU KV cache size', 'Maximum concurrency for … tokens per request', "
    "CUDA-graph lines, 'Free memory on device', 'kv_cache_memory_bytes', 'num_gpu_blocks is', the "
    "engine config line, 'non-default args' and the start-up errors (CUDA out of memory included)"
)

# An SGR/CSI escape, as the terminal wrote it (ESC = \x1b) or as pasted from a pager or an issue in
# caret notation (the two characters `^[` for ESC: `^[[0;36m(EngineCore_DP0 pid=N)^[[0;0m`); vLLM
# colours the process prefix (vllm/utils/system_utils.py `_add_prefix`, v0.10.2+).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CARET_ANSI = re.compile(r"\^\[\[[0-9;?]*[A-Za-z]")
_REPEATED_RE = re.compile(r"\[repeated (\d{1,9})x across cluster\]")
_RECORD_START = re.compile(
    r"\s*(?:(?:\x1b|\^\[)\[[0-9;]*m)*"
    r"(?:\([^)]{0,100}pid=|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) |\d{4}-\d\d-\d\d[T ]|\[|$)"
)
_HEADER_RE = re.compile(r"\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (\[)?[\w./\-]{1,120}:\d{1,6}\]")
_MAX_JOIN_LINES = 12
# A hard wrap counted before colour codes were stripped (public/58-62: a console wrapped at 147
# characters, ESC not counted, then the codes went): a continuation line is 147 long, the first line
# of a record 147 minus its prefixes' codes (`[1;36m…[0;0m` = 11, an inner `[36m…[0m` = 7). At most
# this many characters of codes per first line; a first-line width must recur this often.
_CODES_WIDTH = 40
_FIRST_MIN = 2
_CONT_MIN = 5


def _wrap_widths(text: str) -> tuple[int, frozenset[int]] | None:
    """(width, first-line widths) of a hard wrap, or None. The first-line widths are empty for a
    fixed-width wrap (every cut line is `width` long); for a wrap counted before colour codes were
    stripped they are the shorter lengths at which first lines of records were cut."""
    sample = [s.rstrip("\r") for s in text.split("\n", 20000)[:20000]]
    lens = list(map(len, sample))
    lengths = Counter(lens)
    long_lines = sum(c for n, c in lengths.items() if n >= 60)
    candidates = [(c, n) for n, c in lengths.items() if 60 <= n <= 300]
    if not candidates or long_lines == 0:
        return None
    c, width = max(candidates)
    if c >= 3 and c >= 0.5 * long_lines:
        # fold pieces all differ; a log that repeats one idle-stats line many times is not wrapped
        distinct = len({s for s in sample if len(s) == width})
        if distinct >= 0.5 * c:
            return width, frozenset()
    return _coloured_wrap(sample, lens, lengths, sorted(candidates, reverse=True)[:3])


def _at(lens: list[int], n: int) -> list[int]:
    """The indices of the lines `n` long (C-speed `list.index` between hits)."""
    out: list[int] = []
    i = -1
    try:
        while True:
            i = lens.index(n, i + 1)
            out.append(i)
    except ValueError:
        return out


def _coloured_wrap(
    sample: list[str], lens: list[int], lengths: Counter[int], top: list[tuple[int, int]]
) -> tuple[int, frozenset[int]] | None:
    """A wrap counted before colour codes were stripped: among the most common long lengths, one
    whose lines are continuations (no record starts there) followed by continuations, at least
    `_CONT_MIN` of them, mostly distinct, with recurring shorter first lines of records cut right
    before a continuation (see `_CODES_WIDTH`). Only lines of those lengths and the line after each
    are matched, not every line."""
    last = len(sample) - 1
    starts = _RECORD_START.match
    for count, width in top:
        if count < _CONT_MIN:
            break
        cont = [i for i in _at(lens, width) if i < last and not starts(sample[i]) and not starts(sample[i + 1])]
        if len(cont) < _CONT_MIN or len({sample[i] for i in cont}) < 0.5 * len(cont):
            continue
        first = frozenset(
            n
            for n in range(width - _CODES_WIDTH, width)
            if lengths.get(n, 0) >= _FIRST_MIN
            and sum(1 for i in _at(lens, n) if i < last and starts(sample[i]) and not starts(sample[i + 1]))
            >= _FIRST_MIN
        )
        if first:
            return width, first
    return None


def _unwrap(text: str, width: int, first: frozenset[int] = frozenset()) -> tuple[str, list[int], int]:
    """Join continuation lines of a `width`-column hard wrap; also return how many were joined. A
    record's first line is cut at `width` or, after colour codes were stripped, at a length in
    `first` (`_wrap_widths`); its continuation lines at `width`."""
    lines = text.split("\n")
    out: list[str] = []
    origin: list[int] = []
    i, n, joined = 0, len(lines), 0
    while i < n:
        start = i
        parts = [lines[i].rstrip("\r")]
        cut = len(parts[0]) in first
        while (cut or len(parts[-1]) == width) and i + 1 < n and not _RECORD_START.match(lines[i + 1]):
            cut = False
            i += 1
            joined += 1
            parts.append(lines[i].rstrip("\r"))
        out.append("".join(parts))
        origin.append(start + 1)
        i += 1
    return "\n".join(out), origin, joined


# Every needle of every extractor: a line holding none of them states no fact
# (tests/ingest/test_vllm_log_prefilter.py checks it against every extractor on every line).
_NEEDLES = tuple(sorted({n for _, needles in _EXTRACTORS for n in needles}))
# Per needle, the bit mask of the extractors that list it (bit i = _EXTRACTORS[i]).
_NEEDLE_MASK = {n: sum(1 << i for i, (_, needles) in enumerate(_EXTRACTORS) if n in needles) for n in _NEEDLES}
_INDICES: dict[int, tuple[int, ...]] = {}  # mask -> extractor indices, ascending (a few distinct masks)


def _indices(mask: int) -> tuple[int, ...]:
    found = _INDICES.get(mask)
    if found is None:
        found = _INDICES[mask] = tuple(i for i in range(len(_EXTRACTORS)) if mask >> i & 1)
    return found


def _line_mask(line: str) -> int:
    """The extractors whose needles `line` holds, as a bit mask."""
    mask = 0
    for n, bit in _NEEDLE_MASK.items():
        if n in line:
            mask |= bit
    return mask


# The gate a line passes before any extractor: one compiled alternation of every needle (a line
# holding none states no fact). Measured side by side on 15 MB of real logs (bench_parser.py
# ceilings), it costs less per line than a whole-text `str.find` pass per needle or a whole-text
# `finditer` of the same alternation: the search stops at the first needle of a fact line.
_ANY_NEEDLE = re.compile("|".join(map(re.escape, _NEEDLES)))
# The alternation tries every needle at every position (≈ 0.4 µs a character): quickest on a log
# line, but a multi-megabyte line goes faster through one C substring search per needle.
_LONG_LINE = 4096


def _has_needle(line: str) -> bool:
    if len(line) < _LONG_LINE:
        return _ANY_NEEDLE.search(line) is not None
    return any(n in line for n in _NEEDLES)


_CACHE_LINES = 200_000  # distinct candidate lines remembered per parse (bounded memory)

def _group_ops(seg: str, facts: list[Fact]) -> list[Op]:
    """Facts of one extractor call, grouped by match position, with who printed them and when."""
    ops: list[Op] = []
    group: list[Fact] = []
    for f in facts:
        if group and f.pos != group[0].pos:
            ops.append((_GROUP, group, identity_before(seg, group[0].pos), _stamp(seg, group[0].pos)))
            group = []
        group.append(f)
    if group:
        ops.append((_GROUP, group, identity_before(seg, group[0].pos), _stamp(seg, group[0].pos)))
    ops.append((_HEADER, seg, facts[0].pos))  # searched only while the run has no header style yet
    return ops


def line_ops(raw: str) -> tuple[Op, ...]:
    """What one physical line (without its `\\n`) tells the run builder, before any hard-wrap join."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    if "^[[" in raw:
        raw = _CARET_ANSI.sub("", raw)
    if not _has_needle(raw):  # after the colours: a code may sit inside a message
        return ()
    return _line_ops(raw, _indices(_line_mask(raw)))


def _line_ops(raw: str, indices: tuple[int, ...]) -> tuple[Op, ...]:
    """`line_ops` of a line without colour codes whose needles name the extractors `indices`."""
    pieces = "\r" in raw
    segs = raw.split("\r") if pieces else [raw]
    last = len(segs) - 1
    ops: list[Op] = []
    for k, seg in enumerate(segs):
        if not seg:
            continue
        emitted = False
        for index in indices:
            extractor, needles = _EXTRACTORS[index]
            if pieces and not any(n in seg for n in needles):  # the line holds a needle; this piece?
                continue
            facts = extractor(seg)
            if facts:
                ops.extend(_group_ops(seg, facts))
                emitted = True
            elif k == last:
                ops.append((_JOIN, seg, index))
        if "across cluster]" in seg:  # Ray collapsed the same memory line of other workers
            counts = tuple(int(m[1]) for m in _REPEATED_RE.finditer(seg))
            if counts:
                ops.append((_REPEATED, counts, emitted))
    return tuple(ops)


def _fresh_ops(raw: str, templates: dict[str, tuple[Op, ...]]) -> tuple[Op, ...]:
    """`line_ops(raw)` for a line text not seen before, through its template key when it has one
    (`vllm_log_templates`)."""
    return fresh_ops(raw, templates, line_ops, _CACHE_LINES)


class _Scanner:
    def __init__(self, text: str, origin: list[int] | None) -> None:
        self.lines = text.split("\n")
        self.origin = origin
        self.builder = RunBuilder()
        self.errors: list[Finding] = []

    def _next_lines(self, index: int) -> list[str]:
        """The continuation lines after line `index` (0-based): those that start no new record."""
        out: list[str] = []
        for raw in self.lines[index + 1 : index + 1 + _MAX_JOIN_LINES]:
            line = raw.rstrip("\r")
            if _RECORD_START.match(line):
                break
            out.append(line)
        return out

    def _joined(self, seg: str, extractor: Extractor, index: int) -> list[Fact]:
        following = self._next_lines(index)
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

    def _header(self, seg: str, pos: int, line: int) -> None:
        """The log-header style of the message at seg[pos:] as version evidence (once per run)."""
        h = _HEADER_RE.search(seg, max(0, pos - 300), pos + 1)
        if h is None:
            return
        if h[1]:
            self.builder.add_clue("'[file.py:N]' log header (c0e3ecd6d)", "0.8.0", "", line)
        else:
            self.builder.add_clue("'file.py:N]' log header without '[' (before c0e3ecd6d)", "", "0.8.0", line)

    def _apply(self, ops: tuple[Op, ...] | list[Op], index: int, line: int) -> None:
        builder = self.builder
        joined = False
        for op in ops:
            kind = op[0]
            if kind == _GROUP:
                builder.add_group(op[1], op[2], line, op[3])
            elif kind == _HEADER:
                if not builder.header_seen():
                    self._header(op[1], op[2], line)
            elif kind == _JOIN:
                facts = self._joined(op[1], _EXTRACTORS[op[2]][0], index)
                if facts:
                    self._apply(_group_ops(op[1], facts), index, line)
                    joined = True
            elif op[2] or joined:
                for times in op[1]:
                    builder.note_repeated(times)

    def run(self) -> None:
        cache: dict[str, tuple[Op, ...]] = {}
        templates: dict[str, tuple[Op, ...]] = {}  # per template key (`template_key`), this parse's
        origin = self.origin
        for index, raw in enumerate(self.lines):
            ops = cache.get(raw)
            try:
                if ops is None:
                    ops = _fresh_ops(raw, templates)
                    if len(cache) < _CACHE_LINES:
                        cache[raw] = ops
                if ops:
                    self._apply(ops, index, origin[index] if origin is not None else index + 1)
            except Exception as exc:  # a parser bug must not lose the rest of the log
                message = f"line could not be parsed ({type(exc).__name__}: {exc})"
                self.errors.append(Finding("parser_error", message, index + 1, "error"))


def parse_vllm_log(text: str) -> LogParse:
    """Parse the text of one or more vLLM startup logs. Never raises on a str."""
    if not isinstance(text, str):
        return LogParse((), (Finding("not_text", "the input is not text", None, "error"),))
    with gc_paused():  # one small object per fact, all kept: no collection can free any
        return _parse(text)


def _parse(text: str) -> LogParse:
    findings: list[Finding] = []
    origin: list[int] | None = None
    text, cut = cut_last_number(text, line_ops)
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
    # Colour codes go in one pass over the text (C speed), not line by line: a code never spans a
    # line, so each line loses exactly what it would lose alone; continuation lines a hard-wrap join
    # reads lose theirs too.
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
