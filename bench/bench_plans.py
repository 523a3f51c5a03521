"""Large imported plans: a slider tick on a stored base of N DISTINCT measured ranks.

Run: PYTHONPATH=. .venv/bin/python bench/bench_plans.py [--quick] [--sizes 8,1024,16384] [--baseline DIR]
(prints Markdown; reports, never fails).

Every rank differs (free at start, weights, non-torch, activation, CUDA graphs all vary with
the rank's index), so nothing can be computed once for identical copies. The base document is
stored in the app's base store as an import stores it (`/plan?base=<id>`); each tick is a new
utilization, so the per-query plan cache never hits. Measured in process, as the server does
it: the plan view (base lookup, defaults, what-if, compute, canonical URL), the template
context (with the two keys the route adds) and the htmx fragment's three blocks. Targets
(issue 14): 1,024 ranks <= 10 ms per fragment, 16,384 ranks <= 100 ms. Timings are medians,
wall clock and CPU (`time.process_time`, the comparable figure on a shared machine).

`--baseline DIR`: a checkout of an older tree (`git archive COMMIT | tar -x -C DIR`); the same
ticks run on it and on this tree, each in its own process and alternating (two rounds), so the
ratio old / new is taken in one run under the same load.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

#: The tree whose app is measured: this one, or a baseline's (`--baseline`, through the environment).
ROOT = Path(os.environ.get("KVL_BENCH_ROOT") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(ROOT))
GIB, MIB = 2**30, 2**20
TARGETS_MS = {1024: 10.0, 16384: 100.0}
#: Set by `--rooms` (and so seen by the worker processes): every rank also has a measured KV room.
ROOMS_ENV = "KVL_BENCH_ROOMS"


def distinct_ranks(n: int, rooms: bool = False) -> list[dict[str, Any]]:
    """N measured ranks, every one different (as a real 128-node import is); with `rooms`, each with
    a measured KV room too (as an import of logs printing "Available KV cache memory" gives)."""
    out = [
        {
            "label": f"n{i // 8}-gpu{i % 8}",
            "total": 80 * GIB,
            "free_at_start": 79 * GIB - i * 4096,
            "weights": 35 * GIB + (i * 7919) % 997 * MIB // 64,
            "non_torch": GIB + (i * 104729) % 1009 * 4096,
            "cuda_graphs": GIB // 2 + (i * 31) % 257 * MIB,
            "activation": 3 * GIB + i * 8192,
        }
        for i in range(n)
    ]
    if rooms:
        for i, rank in enumerate(out):
            rank["kv_room"] = 30 * GIB + i * 65536
    return out


def base_document(n: int) -> dict[str, Any]:
    config = json.loads((ROOT / "tests" / "data" / "configs" / "llama31-70b.json").read_text())
    return {
        "model": {"config": config},
        "layout": {"tp": 8, "dp": max(1, n // 8)},
        "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192},
        "policy": {"growth_reserve": 0.08, "operating_reserve": "0.9 GiB", "avg_live_tokens": 4000},
        "ranks": distinct_ranks(n, rooms=bool(os.environ.get(ROOMS_ENV))),
    }


def fragment_ms(n: int, ticks: int) -> dict[str, float]:
    """Median ms per slider tick (new utilization each time) on a stored base of n distinct ranks:
    wall clock per part and in total, and CPU time in total."""
    from app.settings import Settings
    from app.web.app import create_app
    from app.web.plan import present, views

    app = create_app(Settings(database_url="sqlite://"))
    freeze_like_the_server()
    base_id = app.state.bases.put(base_document(n))
    templates = app.state.templates
    blocks = ["results", "summary", "field_errors_oob"]
    times: dict[str, list[float]] = {"view": [], "context": [], "render": [], "total": [], "cpu": []}
    collector = GCTime()
    for i in range(ticks + 1):
        params = {"base": base_id, "util": f"{0.5 + (i % 45) / 100:.2f}", "growth": f"{(i // 45) / 100:.2f}"}
        c0, t0 = time.process_time(), time.perf_counter()
        view = views.plan_view(params, app.state.bases, False, app.state.plan_cache)
        t1 = time.perf_counter()
        # routes._plan_context adds these two to present.plan_context's
        context = {**present.plan_context(view, form=False), "fragment": True}
        context.update(edits_plan="", token_required=False)
        t2 = time.perf_counter()
        html = templates.render_blocks("pages/plan.html", context, blocks)
        t3, c3 = time.perf_counter(), time.process_time()
        # Up to 1,024 ranks every rank is listed; past that one per group of identical ranks (rank_groups).
        form = view.result.get("ranks_form")
        assert len(view.result["ranks"]) in (n, 0) if form == "full" else len(view.result["rank_groups"]) > 0, n
        if i == 0:
            collector.reset()
            continue  # the first tick validates and builds the base (once per document id)
        for key, value in (("view", t1 - t0), ("context", t2 - t1), ("render", t3 - t2), ("total", t3 - t0),
                           ("cpu", c3 - c0)):  # fmt: skip
            times[key].append(value * 1e3)
    out = {k: statistics.median(v) for k, v in times.items()}
    out["fragment_kib"] = len(html.encode()) / 1024
    out.update(collector.per_tick(ticks))
    collector.close()
    return out


def freeze_like_the_server() -> None:
    """What `kvledger serve` does after start-up (`app.web.app.freeze_startup_objects`: collect once,
    then `gc.freeze`), so a full collection scans only what requests create, as in the server. A
    baseline tree without it is measured as it ran."""
    from app.web import app as web_app

    freeze = getattr(web_app, "freeze_startup_objects", None)
    if freeze is not None:
        freeze()


class GCTime:
    """Garbage collections (by generation) and the time spent in them, through `gc.callbacks`."""

    def __init__(self) -> None:
        self.started = 0.0
        self.reset()
        gc.callbacks.append(self._event)

    def reset(self) -> None:
        self.counts, self.seconds = [0, 0, 0], 0.0

    def _event(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self.started
            self.counts[info["generation"]] += 1

    def per_tick(self, ticks: int) -> dict[str, float]:
        return {"gc_ms": self.seconds * 1e3 / ticks, **{f"gc{g}": c / ticks for g, c in enumerate(self.counts)}}

    def close(self) -> None:
        gc.callbacks.remove(self._event)


def first_tick_ms(n: int) -> float:
    """The first tick on a newly stored base (validates and builds it once)."""
    from app.settings import Settings
    from app.web.app import create_app
    from app.web.plan import views

    app = create_app(Settings(database_url="sqlite://"))
    freeze_like_the_server()
    base_id = app.state.bases.put(base_document(n))
    t0 = time.perf_counter()
    views.plan_view({"base": base_id, "util": "0.85"}, app.state.bases, False, app.state.plan_cache)
    return (time.perf_counter() - t0) * 1e3


def ticks_for(n: int, quick: bool) -> int:
    return 3 if quick else max(5, min(60, 60_000 // n))


def in_process(root: Path, n: int, ticks: int) -> dict[str, float]:
    """`fragment_ms` in a new process on the app of `root` (this tree or a baseline)."""
    env = {**os.environ, "KVL_BENCH_ROOT": str(root), "PYTHONPATH": str(root)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", f"{n},{ticks}"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def side_by_side(baseline: Path, n: int, ticks: int) -> tuple[dict[str, float], dict[str, float]]:
    """(this tree, baseline): two alternating rounds each, the per-round medians averaged."""
    here = Path(__file__).resolve().parents[1]
    rounds: dict[str, list[dict[str, float]]] = {"new": [], "old": []}
    for _ in range(2):
        rounds["new"].append(in_process(here, n, ticks))
        rounds["old"].append(in_process(baseline, n, max(3, ticks // 4)))
    return tuple(  # type: ignore[return-value]
        {k: statistics.fmean(r.get(k, 0.0) for r in rounds[side]) for k in ("total", "cpu", "gc_ms")}
        for side in ("new", "old")
    )


def main() -> int:
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)  # the in-memory database has no tables: the base store says so once
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer ticks and sizes (a smoke run)")
    parser.add_argument("--sizes", help="comma-separated rank counts (default 8,64,1024,4096,16384)")
    parser.add_argument("--baseline", type=Path, help="a checkout of an older tree to run the same ticks on")
    parser.add_argument("--rooms", action="store_true", help="every rank with a measured KV room (a log import)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # "n,ticks": one fragment_ms as JSON
    args = parser.parse_args()
    if args.rooms:
        os.environ[ROOMS_ENV] = "1"
    if args.worker:
        n, ticks = (int(x) for x in args.worker.split(","))
        print(json.dumps(fragment_ms(n, ticks)))
        return 0
    sizes: tuple[int, ...] = (8, 1024) if args.quick else (8, 64, 1024, 4096, 16384)
    if args.sizes:
        sizes = tuple(int(x) for x in args.sizes.split(","))
    print(f"Load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores."
          + (" Every rank has a measured KV room (--rooms)." if args.rooms else ""))
    print()
    old = ""
    if args.baseline:
        old = (f" | baseline {args.baseline.name}: total / CPU / GC (this tree, same run) | old / new (CPU)")
    print(
        "| distinct measured ranks | tick: plan view | context | render | **fragment total** | CPU per tick "
        f"| GC per tick: ms (collections gen 0 / 1 / 2) | first tick (builds the base) | fragment size | target{old} |"
    )
    print("| --- " * (10 + (2 if args.baseline else 0)) + "|")
    for n in sizes:
        ticks = ticks_for(n, args.quick)
        r = fragment_ms(n, ticks)
        first = first_tick_ms(n)
        target = TARGETS_MS.get(n)
        verdict = "" if target is None else f"<= {target:g} ms: {'PASS' if r['total'] <= target else 'FAIL'}"
        extra = ""
        if args.baseline:
            new, base = side_by_side(args.baseline, n, ticks)
            extra = (f" | {base['total']:.1f} / {base['cpu']:.1f} / {base['gc_ms']:.1f} ms "
                     f"({new['total']:.1f} / {new['cpu']:.1f} / {new['gc_ms']:.1f} ms) "
                     f"| {base['cpu'] / new['cpu']:.1f}x")  # fmt: skip
        print(
            f"| {n:,} | {r['view']:.2f} ms | {r['context']:.2f} ms | {r['render']:.2f} ms | **{r['total']:.2f} ms** "
            f"| {r['cpu']:.2f} ms | {r['gc_ms']:.2f} ms ({r['gc0']:.1f} / {r['gc1']:.2f} / {r['gc2']:.3f}) "
            f"| {first:.1f} ms | {r['fragment_kib']:.0f} KiB | {verdict}{extra} |"
        )
    print()
    print(f"Load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
