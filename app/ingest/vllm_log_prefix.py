"""Who printed a line: rank identity from the process prefixes in front of a message.

Prefixes (VLLM-NOTES §1.11; vllm/utils/system_utils.py:201 `_add_prefix`, `decorate_logs`):
`(VllmWorkerProcess pid=N)` (V0 mp; driver unprefixed), `(RayWorkerWrapper pid=N[, ip=A])`,
`(VllmWorker rank=N pid=M)` (V1 v0.7–v0.10.0), `(VllmWorker TP0 pid=…)` (≈v0.10.1),
`(Worker_TP1_EP1 pid=…)`, `(Worker_PP1_TP0 …)`, `(Worker pid=…)` (v0.10.2+), `(EngineCore_DP0
pid=…)`, `(EngineCore pid=…)` (#36822, ≈v0.18+), `(APIServer pid=…)`, Ray Serve nesting. They may
be nested, glued (two writers), cut at the front or wrapped in ANSI colour codes.

The identity of a message is the last prefix before it (innermost / the writer whose text
follows); an outer `EngineCore_N`/`EngineCore_DPn` contributes its DP index. No prefix → the
driver (V0 rank 0, or a user-stripped log).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"\(?(?P<name>[A-Za-z_][\w:.\-=]{0,80}(?: [A-Za-z_][\w:.\-=]{0,40}){0,3}?)? ?pid=(?P<pid>\d{1,10})"
    r"(?:, ?ip=(?P<ip>[\w.:\-]{1,64}))?\)"
)
_PARALLEL = re.compile(r"(?:^|[_ ])(DP|PP|TP|DCP|PCP|EP)(\d{1,5})(?=$|[_ ])")
_RANK = re.compile(r"\brank=(\d{1,6})")
_DP_OF_ENGINE = re.compile(r"EngineCore_(?:DP)?(\d{1,5})")

_WINDOW = 400
_LEVEL = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d ")
_LEVEL_WORDS = ("DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL ")


def last_header(pattern: re.Pattern[str], seg: str, floor: int, end: int) -> re.Match[str] | None:
    """The last match `pattern.finditer(seg, floor, end)` would give, for a pattern that starts
    with a log level word and a space (`DEBUG|INFO|WARNING|ERROR|CRITICAL `) and whose matches
    cannot overlap: the rightmost start where it matches. Found from the right by `str.rfind` of
    each word (C speed) instead of running the regex at every position of the window."""
    best: re.Match[str] | None = None
    for word in _LEVEL_WORDS:
        hi = end
        while True:
            p = seg.rfind(word, floor, hi)
            if p < 0 or (best is not None and p < best.start()):
                break
            m = pattern.match(seg, p, end)
            if m is not None:
                best = m
                break
            hi = p + len(word) - 1  # the next occurrence to the left
    return best
WORKER = "worker"
ENGINE = "engine"
API = "api"
DRIVER = "driver"


@dataclass(frozen=True, slots=True)
class Identity:
    label: str
    pid: int | None
    ip: str | None
    process: str | None
    kind: str  # worker | engine | api | driver
    parallel: tuple[tuple[str, int], ...]
    # printed through Ray's log monitor (a Ray actor: `(RayWorkerWrapper pid=N[, ip=A])`, `(pid=N, ip=A)`):
    # its lines may come out of time order (see `vllm_log_runs`)
    relayed: bool = False


DRIVER_ID = Identity("driver", None, None, None, DRIVER, ())
_CACHE: dict[str, Identity] = {}


#: Worker names that carry no index of their own and are one process per engine when printed so
#: (a TP1 `(Worker pid=N)`, `(VllmWorker pid=N)`, Ray Serve's `(RayWorkerProc pid=N)`).
_SINGLE = ("Worker", "VllmWorker", "RayWorkerProc")


def _from_token(name: str, pid: int, ip: str | None, outer_dp: str | None) -> Identity:
    base = name.split(" ", 1)[0] if name else ""
    parallel = [(k, int(v)) for k, v in _PARALLEL.findall(name)]
    if base.startswith("EngineCore"):
        return Identity(base, pid, ip, name, ENGINE, tuple(parallel))
    if base.startswith(("APIServer", "ApiServer")):  # `ApiServer_{i}`: --api-server-count > 1 (vllm/v1/utils.py:218)
        return Identity(base, pid, ip, name, API, ())
    rank = _RANK.search(name)
    own = bool(parallel)
    if outer_dp is not None and not any(k == "DP" for k, _ in parallel):
        parallel.insert(0, ("DP", int(outer_dp)))
    if rank is not None:
        dp = [f"DP{v}_" for k, v in parallel if k == "DP"]
        label = f"{''.join(dp)}rank={rank[1]}"
        parallel.append(("rank", int(rank[1])))
    elif parallel and (own or base in _SINGLE):
        label = "_".join(f"{k}{v}" for k, v in parallel)
    elif base in _SINGLE:
        label = base
    else:
        # no index of its own: the process is the rank. Ray's workers under a V1 engine
        # (`(EngineCore_0 pid=1159) (RayWorkerWrapper pid=1273, ip=10.42.11.243)`, public/62-63) are
        # TP ranks told apart by pid and node here; the outer engine's DP index must not merge them (the run
        # then labels each by the TP/PP index its own "is assigned as" line states: vllm_log_rank_index)
        label = f"pid={pid}" + (f" ip={ip}" if ip else "")
    relayed = base.startswith("RayWorker") or not base or ip is not None
    return Identity(label, pid, ip, name or None, WORKER, tuple(parallel), relayed)


def identity_before(seg: str, pos: int) -> Identity:
    """The identity of the message at seg[pos:], from the prefixes in seg[:pos]."""
    return identity_at(seg, identity_span(seg, pos))


Span = tuple[int, int, int] | None


def identity_span(seg: str, pos: int) -> Span:
    """Where the prefix of the message at seg[pos:] is: (its '(' or start, its ')', an outer
    `EngineCore` before it or -1), or None when it was printed without one (the driver). Found
    from the text's letters and brackets only (`pid=`, `(`, `)`, level words, `EngineCore`), never
    from the value of a digit: a line that differs only in some digits has the same span."""
    floor = max(0, pos - _WINDOW)  # prefixes sit right before the message: never scan further back
    h = last_header(_LEVEL, seg, floor, pos)  # the `LEVEL mm-dd` header of the message's record, if printed
    header = -1 if h is None else h.start()
    limit = pos if header < 0 else header
    q = seg.rfind("pid=", floor, limit)
    if q < 0:
        return None
    start = max(seg.rfind("(", floor, q), seg.rfind(")", floor, q) + 1, floor)
    end = seg.find(")", q, limit)
    if end < 0 or (header >= 0 and seg[end + 1 : header].strip()):
        return None  # no prefix right before this record's header: it was printed unprefixed
    return start, end, seg.rfind("EngineCore", max(0, start - 120), start)


def identity_at(seg: str, span: Span) -> Identity:
    """The identity of the prefix at `span` of `seg` (`identity_span`)."""
    if span is None:
        return DRIVER_ID
    start, end, outer = span
    token = seg[start : end + 1]
    key = token if outer < 0 else seg[outer:start] + token
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    m = _TOKEN.search(token)
    if m is None:
        ident = DRIVER_ID
    else:
        dp = _DP_OF_ENGINE.match(seg, outer) if outer >= 0 else None
        ident = _from_token((m["name"] or "").strip(), int(m["pid"]), m["ip"], dp[1] if dp else None)
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[key] = ident
    return ident


_CLUES: dict[str, tuple[str, str, str] | None] = {}


def prefix_clue(ident: Identity) -> tuple[str, str, str] | None:
    """Version evidence from the prefix style: (basis, min, max_exclusive)."""
    name = ident.process or ""
    if name in _CLUES:
        return _CLUES[name]
    clue = _prefix_clue(name)
    if len(_CLUES) < 4096:
        _CLUES[name] = clue
    return clue


def _prefix_clue(name: str) -> tuple[str, str, str] | None:
    if name.startswith("VllmWorkerProcess"):
        return ("V0 '(VllmWorkerProcess pid=N)' prefix", "", "0.11.0")
    if name.startswith("VllmWorker rank="):
        return ("'(VllmWorker rank=N pid=M)' prefix", "0.7.0", "0.10.1")
    if name.startswith("VllmWorker "):
        return ("'(VllmWorker TPn pid=M)' prefix", "0.10.1", "0.10.2")
    if name.startswith("Worker"):
        return ("'(Worker_… pid=N)' prefix", "0.10.2", "")
    if name == "EngineCore":
        return ("'(EngineCore pid=N)' prefix without DP index (#36822)", "0.18.0", "")
    if name.startswith("EngineCore_DP"):
        return ("'(EngineCore_DPn pid=N)' prefix", "0.10.2", "")
    return None
