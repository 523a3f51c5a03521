"""Fold facts into runs: which engine start a fact belongs to, which rank, and what wins.

Theory of operation. Facts arrive in text order, each with the identity of the process that
printed it. A run (one engine start) is open until:
- an engine-config line, an `API server version` line or a `non-default args` line arrives
  while the open run already has its own such line or any memory figure → a new run;
- a start-up error closes the run; the next fact starts a new one (the same error repeated by
  another process of the same traceback is dropped; the same error raised by another rank with
  other numbers joins the closed run);
- a rank that already reported a start-of-sizing figure (weights, V0 profile, available KV)
  reports it again after the engine printed its KV figures, or a rank label reappears with a
  new pid → the engine restarted: a new run;
- the same start-up error raised again under the same process label with another pid → another
  start (two CI jobs quoted one after the other, public/36);
- a max_model_len stated by a line other than the engine config that differs from the one the
  run's concurrency line or start-up error already stated → another start: one engine start has
  one max_model_len, and vLLM checks every worker's KV memory against it before it prints the
  concurrency (vllm/v1/core/kv_cache_utils.py `get_kv_cache_configs` @72c99f2a, v0.10.2), so a
  max-seq-len error for another length cannot belong to a start that printed it (public/21);
- a process's log header time going backwards (`MM-DD HH:MM:SS`; a step back of more than half a
  year is a new year), any process's going back more than an hour behind the run's latest line,
  or moving on by more than a day before a memory figure → another start pasted after this one
  (public/20: two starts of a PR's before/after output). Not for a process whose lines Ray's log
  monitor relays (`Identity.relayed`): Ray holds a line repeated by several workers back for its
  dedup window and prints it later with its own, older, time (ray/_private/ray_logging.py
  `LogDeduplicator`, RAY_DEDUP_LOGS; public/62: a Ray worker's 04:42:46 KV line after its 04:42:58
  graph line, public/63 likewise); a restarted Ray worker has another pid, so another rank label;
- a process label heard again under another pid, a worker (or the driver) new to the run starting
  to size after the engine's KV figures, or workers of another prefix era (`_other_process`,
  `_late_worker`, `_worker_family`) → another start.
Within a rank, a field stated twice keeps the more precise statement (smaller tolerance; the
other goes to `also`); two statements that disagree beyond their tolerances give a finding.
Engine figures printed several times (v0.8.2–v0.11.0 print one pre-min pair per worker) resolve
to the minimum; `num_gpu_blocks is: N` / `num_gpu_blocks_override` win over printed blocks.
"""

from __future__ import annotations

from app.ingest import vllm_log_rank_index as rank_index
from app.ingest.vllm_log_finish import RankAcc, RunAcc, finish_run
from app.ingest.vllm_log_lines import Fact
from app.ingest.vllm_log_model import Finding, Run, Stated
from app.ingest.vllm_log_prefix import API, DRIVER, ENGINE, WORKER, Identity, prefix_clue

_ENGINE_DONE = ("kv_tokens", "num_gpu_blocks", "max_concurrency", "num_gpu_blocks_final")
_MIN_FIELDS = ("kv_tokens", "max_concurrency", "num_gpu_blocks")


def _stated(f: Fact, line: int) -> Stated:
    return Stated(f.value, line, f.printed, f.tol)


def _numeric(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: A log header time: (month, day, hour, minute, second).
Stamp = tuple[int, int, int, int, int]
_HALF_YEAR_DAYS = 183


def _went_back(last: Stamp | None, now: Stamp) -> bool:
    """Whether one process's header time stepped back (a step back of more than half a year is
    taken as the new year: 12-31 → 01-01)."""
    if last is None or now >= last:
        return False
    return (last[0] - now[0]) * 31 + last[1] - now[1] <= _HALF_YEAR_DAYS


def _days_on(last: Stamp | None, now: Stamp) -> float:
    """How many days one process's header time moved forward (0 when it stepped back; 12-31 →
    01-01 is a day on). Months count 31 days: the header has no year, so this is a bound."""
    if last is None or _went_back(last, now):
        return 0.0
    def day(s: Stamp) -> float:
        return s[0] * 31 + s[1] + (s[2] * 3600 + s[3] * 60 + s[4]) / 86400
    gap = day(now) - day(last)
    return gap if gap >= 0 else gap + 12 * 31


def _hours_back(last: Stamp | None, now: Stamp) -> float:
    """How many hours a header time stepped back (0 when it moved on)."""
    if last is None or not _went_back(last, now):
        return 0.0
    return _days_on(now, last) * 24


#: Processes of one start write their lines as they go: one process's line stamped earlier than
#: another's already in the file is a few seconds of buffering, never this much (Ray's relayed lines,
#: which can be minutes late, are left out: `Identity.relayed`).
_BACK_HOURS = 1.0

#: One engine start sizes its cache within hours (a large model's load from network storage is the
#: slow part); a process whose header time moves on by more than this between two memory
#: figures is another start pasted after the first (two excerpts of one log one after the other).
_START_DAYS = 1.0


def _restarted(raiser: Identity | None, ident: Identity) -> bool:
    """The closed run's error raised again by a process of the same label with another pid."""
    return (raiser is not None and raiser.label == ident.label and ident.pid is not None
            and raiser.pid is not None and raiser.pid != ident.pid)



def _worker_family(ident: Identity) -> str | None:
    """The prefix style of a multiprocessing worker (`VllmWorkerProcess`, `VllmWorker rank=N`,
    `VllmWorker TPn`, `Worker_…`): one engine start's workers all print one style, each style
    belongs to other vLLM releases (`prefix_clue`), so two styles in one run are two starts
    (two logs pasted one after the other). None for Ray's relayed workers and the others."""
    if ident.kind != WORKER or ident.relayed:
        return None
    clue = prefix_clue(ident)
    return None if clue is None else clue[0]


def _shared_label(ident: Identity) -> bool:
    """A worker label without an index of its own (`(Worker pid=N)`, `(VllmWorker pid=N)`): at TP > 1
    every worker prints it before its rank is assigned (public/73, v0.18.1 TP4: four `(Worker pid=N)`
    before `(Worker_TP0 pid=N)`), so another pid under it is another worker of the same start."""
    return ident.kind == WORKER and not ident.parallel and ident.label == (ident.process or "").split(" ", 1)[0]


class RunBuilder:
    """Accumulates facts into runs; `runs()` returns the finished, frozen runs."""

    def __init__(self) -> None:
        self._done: list[RunAcc] = []
        self._cur = RunAcc(1, 1)

    # ------------------------------------------------------------ run boundaries
    def _new_run(self, line: int) -> None:
        self._done.append(self._cur)
        self._cur = RunAcc(line, line)

    def _splits(self, f: Fact, ident: Identity) -> bool:
        cur = self._cur
        if cur.closed_code is not None:
            return f.scope != "clue"
        if f.scope == "settings" and f.field == "max_model_len":
            return cur.length is not None and cur.length != f.value
        if f.scope == "mark":
            if f.field == "config":
                return "config" in cur.marks or cur.has_memory
            if f.field in ("api_version", "args"):
                return f.field in cur.marks or "config" in cur.marks or cur.has_memory
            if f.field == "profile_table":  # a process prints its profiling table once per engine start
                acc = cur.ranks.get(ident.label)
                return acc is not None and "total_bytes" in acc.fields
            return False
        if f.scope != "rank":
            return False
        acc = cur.ranks.get(ident.label)
        if acc is None:
            return f.starts and self._late_worker(ident)
        if ident.kind != DRIVER and ident.pid is not None and acc.ident.pid not in (None, ident.pid):
            return True
        if f.starts and f.field in acc.fields:
            return "init_done" in cur.marks or any(k in cur.engine for k in _ENGINE_DONE)
        return False

    def _other_process(self, ident: Identity) -> bool:
        """A process label this run already heard under another pid: another process, so another
        engine start (an EngineCore or API server prints its KV figures once per start; a worker's
        label names one process of one start)."""
        cur = self._cur
        if ident.kind == DRIVER or ident.pid is None or not (cur.has_memory or cur.marks):
            return False
        known = cur.pids.get(ident.label)
        if known is not None and known != ident.pid and not _shared_label(ident):
            return True
        family = _worker_family(ident)
        return family is not None and cur.worker_family not in (None, family)

    def _late_worker(self, ident: Identity) -> bool:
        """A worker (or the unprefixed driver) new to this run starts sizing (weights, profile,
        available KV) after the run's engine printed its KV figures: another start. The engine
        prints them only once every worker has returned its memory (`EngineCore._initialize_kv_caches`:
        `determine_available_memory()` of all workers, then `get_kv_cache_configs`, vllm/v1/engine/core.py
        :232 @28be48fa9; V0: `determine_num_available_blocks` over all workers before `# GPU blocks`).
        Not for a Ray-relayed line (Ray prints it late) nor a data-parallel rank (another engine)."""
        cur = self._cur
        if ident.kind not in (WORKER, DRIVER) or ident.relayed or any(k == "DP" for k, _ in ident.parallel):
            return False
        return "init_done" in cur.marks or any(k in cur.engine for k in _ENGINE_DONE)

    def add_group(self, facts: list[Fact], ident: Identity, line: int, stamp: Stamp | None = None) -> None:
        """Facts of one message match, printed by `ident` on `line` (log header time `stamp`, if any)."""
        cur = self._cur
        if stamp is not None and not ident.relayed:
            last, latest = cur.stamps.get(ident.label), cur.latest
            sizing = any(f.scope in ("rank", "engine") for f in facts)
            if (_went_back(last, stamp) or _hours_back(latest, stamp) > _BACK_HOURS
                    or (sizing and max(_days_on(last, stamp), _days_on(latest, stamp)) > _START_DAYS)):
                self._new_run(line)
                cur = self._cur
            cur.stamps[ident.label] = stamp
            if cur.latest is None or not _went_back(cur.latest, stamp):
                cur.latest = stamp
        if self._other_process(ident):
            self._new_run(line)
            cur = self._cur
        if ident.kind != DRIVER and ident.pid is not None:
            cur.pids[ident.label] = ident.pid
            cur.worker_family = cur.worker_family or _worker_family(ident)
        code = cur.closed_code
        same = code is not None and any(f.scope == "error" and f.field == code for f in facts)
        if same and _restarted(cur.closed_by, ident):
            self._new_run(line)
            cur, same = self._cur, False
        apply = self._apply
        if same:
            # the start-up error of this run again: re-raised by another process of the same traceback
            # (dropped), or raised by another rank with its own numbers (kept, in the same run)
            seen = {(x.code, x.message) for x in cur.findings}
            if any(f.scope == "error" and (f.field, str(f.value)) in seen for f in facts):
                return
            for f in facts:
                apply(f, ident, line)
        else:
            splits = self._splits
            for f in facts:
                if splits(f, ident):
                    self._new_run(line)
                apply(f, ident, line)
        clue = prefix_clue(ident)
        if clue is not None and clue[0] not in self._cur.clues:
            self._cur.clues[clue[0]] = (clue[1], clue[2], line)

    def note_repeated(self, times: int) -> None:
        self._cur.repeated += times

    def add_clue(self, basis: str, lo: str, hi: str, line: int) -> None:
        self._cur.clues.setdefault(basis, (lo, hi, line))
        if "log header" in basis:
            self._cur.header_seen = True

    def header_seen(self) -> bool:
        """Whether the open run already has its log-header style (one regex per run, not per line)."""
        return self._cur.header_seen

    # ------------------------------------------------------------ applying facts
    def _rank(self, ident: Identity, line: int) -> RankAcc:
        acc = self._cur.ranks.get(ident.label)
        if acc is None:
            acc = self._cur.ranks[ident.label] = RankAcc(ident, line)
        elif acc.ident.pid is None and ident.pid is not None:
            acc.ident = ident
        return acc

    def _put(
        self, owner: str, fields: dict[str, Stated], also: dict[str, list[Stated]], new: Stated, name: str
    ) -> None:
        old = fields.get(name)
        if old is None:
            fields[name] = new
            return
        if old.value == new.value and old.printed == new.printed:
            return
        if _numeric(old.value) and _numeric(new.value):
            diff = abs(float(old.value) - float(new.value))
            if diff > float(old.tolerance) + float(new.tolerance) and (owner, name) not in self._cur.conflicts:
                self._cur.conflicts.add((owner, name))
                self._cur.findings.append(
                    Finding(
                        "inconsistent_value",
                        f"rank {owner} states {name} twice with different values: {old.printed} (line {old.line}) "
                        f"and {new.printed} (line {new.line}); the more precise one is kept",
                        new.line,
                        "warning",
                        {"field": name, "first": old.value, "second": new.value},
                    )
                )
        if float(new.tolerance) < float(old.tolerance):
            fields[name] = new
            also.setdefault(name, []).append(old)
        else:
            also.setdefault(name, []).append(new)

    def _apply(self, f: Fact, ident: Identity, line: int) -> None:
        cur = self._cur
        if line > cur.last_line:
            cur.last_line = line
        scope = f.scope
        if scope == "rank":
            if ident.kind == API:
                return  # the API server re-raises a worker's error; it measures no GPU itself
            acc = self._rank(ident, line)
            self._put(acc.ident.label, acc.fields, acc.also, Stated(f.value, line, f.printed, f.tol), f.field)
            cur.has_memory = True
        elif scope == "engine":
            cur.engine.setdefault(f.field, []).append(_stated(f, line))
            if f.field == "max_concurrency_tokens":
                cur.length = f.value
            if ident.kind == ENGINE and f.field == "kv_tokens":
                cur.engine_printers.add(ident.label)
            cur.has_memory = True
            if ident.kind == WORKER and f.field in _MIN_FIELDS:
                acc = self._rank(ident, line)
                self._put(acc.ident.label, acc.fields, acc.also, _stated(f, line), f.field)
        elif scope == "settings":
            old = cur.settings.get(f.field)
            new = _stated(f, line)
            if (
                old is None
                or not _numeric(new.value)
                or not _numeric(old.value)
                or float(new.tolerance) <= float(old.tolerance)
                or abs(float(new.value) - float(old.value)) > float(old.tolerance) + float(new.tolerance)
            ):
                cur.settings[f.field] = new
        elif scope == "assign":
            if ident.kind in (WORKER, ENGINE):  # a worker's own place (an EngineCore's: its in-process worker's)
                rank_index.fold(cur.assigned, f, ident.label, line)
        elif scope in ("error", "note"):
            numbers = dict(f.numbers)
            if ident.kind != DRIVER:
                numbers["rank"] = ident.label
            sev = "error" if scope == "error" else "info"
            cur.findings.append(Finding(f.field, str(f.value), line, sev, numbers))
            if scope == "error":
                cur.closed_code = f.field
                cur.closed_by = ident
                cur.length = numbers.get("max_model_len", cur.length)
                cur.has_memory = True
        elif scope == "mark":
            cur.marks.setdefault(f.field, line)
        elif scope == "clue":
            lo, _, hi = str(f.value).partition("|")
            cur.clues.setdefault(f.field, (lo, hi, line))
        elif scope == "version":
            cur.versions.append((str(f.value), f.field, line))
        elif scope == "args":
            cur.args.update(f.numbers)

    # ------------------------------------------------------------ finishing
    def runs(self) -> list[Run]:
        accs = [*self._done, self._cur]
        out = [finish_run(a) for a in accs if a.has_memory or a.settings or a.versions]
        return out
