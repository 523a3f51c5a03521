"""The run folding as it was before the fast path (app/ingest/vllm_log_runs.py at 343ffe7), kept
whole as the reference of tests/ingest/test_vllm_log_fast_path.py (see reference_vllm_log.py)."""

from __future__ import annotations

from app.ingest import vllm_log_rank_index as rank_index
from app.ingest.vllm_log_finish import RankAcc, RunAcc, finish_run
from app.ingest.vllm_log_lines import Fact
from app.ingest.vllm_log_model import Finding, Run, Stated
from app.ingest.vllm_log_prefix import API, DRIVER, ENGINE, WORKER, Identity, prefix_clue
from app.ingest.vllm_log_runs import _BACK_HOURS, _START_DAYS, _days_on, _hours_back, _shared_label, _worker_family

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


def _restarted(raiser: Identity | None, ident: Identity) -> bool:
    """The closed run's error raised again by a process of the same label with another pid."""
    return (raiser is not None and raiser.label == ident.label and ident.pid is not None
            and raiser.pid is not None and raiser.pid != ident.pid)



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
        if acc is None:  # a new rank starting to size after the engine's KV figures (vllm_log_runs)
            return f.starts and ident.kind in (WORKER, DRIVER) and not ident.relayed and not any(
                k == "DP" for k, _ in ident.parallel
            ) and ("init_done" in cur.marks or any(k in cur.engine for k in _ENGINE_DONE))
        if ident.kind != DRIVER and ident.pid is not None and acc.ident.pid not in (None, ident.pid):
            return True
        if f.starts and f.field in acc.fields:
            return "init_done" in cur.marks or any(k in cur.engine for k in _ENGINE_DONE)
        return False

    def add_group(self, facts: list[Fact], ident: Identity, line: int, stamp: Stamp | None = None) -> None:
        """Facts of one message match, printed by `ident` on `line` (log header time `stamp`, if any)."""
        if stamp is not None and not ident.relayed:  # Ray relays lines out of time order (vllm_log_runs)
            last, latest = self._cur.stamps.get(ident.label), self._cur.latest
            sizing = any(f.scope in ("rank", "engine") for f in facts)
            if (_went_back(last, stamp) or _hours_back(latest, stamp) > _BACK_HOURS
                    or (sizing and max(_days_on(last, stamp), _days_on(latest, stamp)) > _START_DAYS)):
                self._new_run(line)
            self._cur.stamps[ident.label] = stamp
            if self._cur.latest is None or not _went_back(self._cur.latest, stamp):
                self._cur.latest = stamp
        cur = self._cur
        if ident.kind != DRIVER and ident.pid is not None and (cur.has_memory or cur.marks):
            known, family = cur.pids.get(ident.label), _worker_family(ident)
            if (known is not None and known != ident.pid and not _shared_label(ident)) or (
                family is not None and cur.worker_family not in (None, family)
            ):  # another process under a known label, or another era's worker prefix: another start
                self._new_run(line)
                cur = self._cur
        if ident.kind != DRIVER and ident.pid is not None:
            cur.pids[ident.label] = ident.pid
            cur.worker_family = cur.worker_family or _worker_family(ident)
        same = cur.closed_code is not None and any(f.scope == "error" and f.field == cur.closed_code for f in facts)
        if same and _restarted(cur.closed_by, ident):
            self._new_run(line)
            cur, same = self._cur, False
        if same:
            # the start-up error of this run again: re-raised by another process of the same traceback
            # (dropped), or raised by another rank with its own numbers (kept, in the same run)
            seen = {(x.code, x.message) for x in cur.findings}
            if any(f.scope == "error" and (f.field, str(f.value)) in seen for f in facts):
                return
        for f in facts:
            if not same and self._splits(f, ident):
                self._new_run(line)
            self._apply(f, ident, line)
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
        cur.last_line = max(cur.last_line, line)
        scope = f.scope
        if scope == "rank":
            if ident.kind == API:
                return  # the API server re-raises a worker's error; it measures no GPU itself
            acc = self._rank(ident, line)
            self._put(acc.ident.label, acc.fields, acc.also, _stated(f, line), f.field)
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
        elif scope == "assign":  # added with app.ingest.vllm_log_rank_index: the same fold
            if ident.kind in (WORKER, ENGINE):  # an EngineCore's too (its in-process worker's place)
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
